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

absl::Status CheckListenable(const cluster::HostPort& at) {
  addrinfo hints;
  std::memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(at.port);
  const int rc = getaddrinfo(at.host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0)
    return absl::UnavailableError(absl::StrCat("cannot resolve host: ", gai_strerror(rc)));
  absl::Status status;
  for (addrinfo* a = res; a != nullptr && status.ok(); a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    // As gRPC and civetweb bind: a port in TIME_WAIT (a launcher's pick) is free.
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0) {
      status = absl::UnavailableError(absl::StrCat(std::strerror(errno), " (errno ", errno, ")"));
    }
    close(fd);
  }
  freeaddrinfo(res);
  return status;
}

absl::StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Start(
    const ServerOptions& options, const std::vector<grpc::Service*>& services) {
  // Found before gRPC tries, which would log its own multi-line dump first.
  if (options.listen.port != 0) {
    if (absl::Status s = CheckListenable(options.listen); !s.ok()) {
      return absl::UnavailableError(
          absl::StrCat("cannot listen on ", options.listen.ToString(), ": ", s.message()));
    }
  }
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
    const absl::Status why = CheckListenable(options.listen);
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options.listen.ToString(), ": ",
                     why.ok() ? "gRPC could not bind it" : why.message()));
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
