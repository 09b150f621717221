#include "common/rpc/server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/rpc/channel.h"
#include "common/rpc/unary_service.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/server_builder.h"

namespace psc {
namespace rpc {
namespace {

// Why `listen` cannot be bound, as the OS says it ("Address already in use"),
// found by trying to bind a socket ourselves: gRPC only logs the reason.
std::string BindFailureReason(const cluster::HostPort& listen) {
  addrinfo hints;
  std::memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  std::string port = std::to_string(listen.port);
  int rc = getaddrinfo(listen.host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0) return absl::StrCat("cannot resolve host: ", gai_strerror(rc));
  std::string reason = "gRPC could not bind it";
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0) reason = std::strerror(errno);
    close(fd);
  }
  freeaddrinfo(res);
  return reason;
}

}  // namespace

absl::StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Start(
    const ServerOptions& options, const std::vector<grpc::Service*>& services) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(options.listen.ToString(), MakeServerCredentials(options.security),
                           &port);
  // gRPC sets SO_REUSEPORT by default, which would let a second daemon bind a
  // port already in use without error.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  for (grpc::Service* s : services) {
    if (const auto* unary = dynamic_cast<const UnaryService*>(s); unary != nullptr) {
      if (absl::Status check = unary->Check(); !check.ok()) return check;
    }
    builder.RegisterService(s);
  }
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    if (server != nullptr) server->Shutdown();
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options.listen.ToString(), ": ",
                                               BindFailureReason(options.listen)));
  }
  return std::unique_ptr<GrpcServer>(new GrpcServer(std::move(server), options.listen, port));
}

GrpcServer::GrpcServer(std::unique_ptr<grpc::Server> server, cluster::HostPort listen, int port)
    : server_(std::move(server)), listen_(std::move(listen)), port_(port) {
  if (auto* health = server_->GetHealthCheckService()) health->SetServingStatus(true);
}

GrpcServer::~GrpcServer() { Shutdown(absl::ZeroDuration()); }

std::string GrpcServer::address() const {
  return cluster::HostPort{listen_.host, port_}.ToString();
}

void GrpcServer::Shutdown(absl::Duration grace) {
  std::call_once(shutdown_once_, [&] {
    if (auto* health = server_->GetHealthCheckService()) health->SetServingStatus(false);
    server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
    server_->Wait();
  });
}

}  // namespace rpc
}  // namespace psc
