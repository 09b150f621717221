#include "common/rpc/server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "absl/synchronization/notification.h"
#include "common/rpc/auth.h"
#include "common/rpc/channel.h"
#include "common/rpc/unary_service.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/health.grpc.pb.h"
#include "proto/worker.grpc.pb.h"

namespace psc {
namespace rpc {
namespace {

using ::testing::HasSubstr;

constexpr char kToken[] = "test-token-0123456789abcdef";

// A Worker service whose GetStatus holds the call until Release().
class HoldingService final : public UnaryService {
 public:
  explicit HoldingService(std::string token) : UnaryService("psc.proto.Worker", std::move(token)) {
    using Context = grpc::CallbackServerContext;
    AddAsyncMethod<proto::GetStatusRequest, proto::WorkerStatus>(
        "GetStatus", [this](Context*, const auto&, auto* response, Done done) {
          response->set_task_index(7);
          done_ = std::move(done);
          arrived_.Notify();
        });
    auto unimplemented = [](Context*, const auto&, auto*) {
      return absl::UnimplementedError("not in this test");
    };
    AddMethod<proto::StartJobRequest, proto::StartJobResponse>("StartJob", unimplemented);
    AddMethod<proto::RunUnitRequest, proto::RunUnitResponse>("RunUnit", unimplemented);
    AddMethod<proto::ShutdownRequest, proto::ShutdownResponse>("Shutdown", unimplemented);
  }
  void WaitArrived() { arrived_.WaitForNotification(); }
  void Release() { done_(absl::OkStatus()); }

 private:
  absl::Notification arrived_;
  Done done_;
};

std::unique_ptr<GrpcServer> StartOnFreePort(grpc::Service* service, SecurityOptions security = {}) {
  ServerOptions options;
  options.listen = cluster::HostPort{"127.0.0.1", 0};
  options.security = std::move(security);
  auto server = GrpcServer::Start(options, {service});
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

TEST(GrpcServerTest, PortInUseIsAClearError) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int port = ntohs(addr.sin_port);

  HoldingService service("");
  auto server = GrpcServer::Start({{"127.0.0.1", port}, {}}, {&service});
  EXPECT_EQ(server.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(
      server.status().message(),
      HasSubstr("cannot listen on 127.0.0.1:" + std::to_string(port) + ": Address already in use"));
  close(fd);
}

TEST(GrpcServerTest, ServesHealthAndGuardsTheToken) {
  HoldingService service(kToken);
  auto server = StartOnFreePort(&service, {.token = kToken});
  ASSERT_NE(server, nullptr);
  auto channel = CreateChannel(server->address(), {});

  grpc::ClientContext hc;
  hc.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  grpc::health::v1::HealthCheckResponse health;
  ASSERT_TRUE(grpc::health::v1::Health::NewStub(channel)
                  ->Check(&hc, grpc::health::v1::HealthCheckRequest(), &health)
                  .ok());
  EXPECT_EQ(health.status(), grpc::health::v1::HealthCheckResponse::SERVING);

  for (const std::string token : {"", "wrong-token-0123456789abcdef"}) {
    grpc::ClientContext c;
    PrepareContext(&c, {.token = token}, absl::Seconds(10));
    proto::WorkerStatus status;
    grpc::Status s = proto::Worker::NewStub(channel)->GetStatus(&c, {}, &status);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << "token '" << token << "'";
    EXPECT_EQ(status.task_index(), 0);
  }
}

TEST(GrpcServerTest, ShutdownLetsInFlightCallsFinish) {
  HoldingService service("");
  auto server = StartOnFreePort(&service);
  ASSERT_NE(server, nullptr);
  auto channel = CreateChannel(server->address(), {});
  grpc::Status call_status;
  proto::WorkerStatus status;
  std::thread client([&] {
    grpc::ClientContext c;
    PrepareContext(&c, {}, absl::Seconds(30));
    call_status = proto::Worker::NewStub(channel)->GetStatus(&c, {}, &status);
  });
  service.WaitArrived();
  absl::Notification stopped;
  std::thread stopper([&] {
    server->Shutdown(absl::Seconds(30));
    stopped.Notify();
  });
  // The server is draining: the held call is still in flight.
  EXPECT_FALSE(stopped.WaitForNotificationWithTimeout(absl::Milliseconds(200)));
  service.Release();
  client.join();
  stopper.join();
  EXPECT_TRUE(call_status.ok()) << call_status.error_message();
  EXPECT_EQ(status.task_index(), 7);
}

TEST(GrpcServerTest, ShutdownCancelsCallsThatOutliveTheGrace) {
  HoldingService service("");
  auto server = StartOnFreePort(&service);
  ASSERT_NE(server, nullptr);
  auto channel = CreateChannel(server->address(), {});
  grpc::Status call_status;
  absl::Notification client_done;
  std::thread client([&] {
    grpc::ClientContext c;
    PrepareContext(&c, {}, absl::Seconds(30));
    proto::WorkerStatus status;
    call_status = proto::Worker::NewStub(channel)->GetStatus(&c, {}, &status);
    client_done.Notify();
  });
  service.WaitArrived();
  std::thread releaser([&] {
    // The client sees its call cancelled while the handler still holds it;
    // only then does the handler finish, so the server can stop.
    client_done.WaitForNotification();
    service.Release();
  });
  server->Shutdown(absl::Milliseconds(50));
  client.join();
  releaser.join();
  EXPECT_FALSE(call_status.ok());
}

}  // namespace
}  // namespace rpc
}  // namespace psc
