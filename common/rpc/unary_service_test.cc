// rpc::UnaryService on a real loopback server: what every method of every
// service gets from the adapter (the token, parsing, exceptions, finishing
// once, registration checks).
#include "common/rpc/unary_service.h"

#include <new>
#include <stdexcept>

#include "absl/synchronization/notification.h"
#include "common/rpc/channel.h"
#include "common/rpc/server.h"
#include "gmock/gmock.h"
#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"
#include "proto/worker.grpc.pb.h"

namespace psc {
namespace rpc {
namespace {

using ::testing::HasSubstr;
using Context = grpc::CallbackServerContext;

constexpr char kToken[] = "unary-token-0123456789abcdef";

// StartJob throws std::bad_alloc, RunUnit a std::runtime_error after it
// changed `touched`, GetStatus answers twice, Shutdown answers OK.
class ThrowingService final : public UnaryService {
 public:
  ThrowingService() : UnaryService("psc.proto.Worker", kToken) {
    AddMethod<proto::StartJobRequest, proto::StartJobResponse>(
        "StartJob", [](Context*, const auto&, auto*) -> absl::Status { throw std::bad_alloc(); });
    AddMethod<proto::RunUnitRequest, proto::RunUnitResponse>(
        "RunUnit", [](Context*, const auto&, auto*) -> absl::Status {
          throw std::runtime_error("the core broke its promise");
        });
    AddAsyncMethod<proto::GetStatusRequest, proto::WorkerStatus>(
        "GetStatus", [](Context*, const auto&, auto* response, Done done) {
          response->set_task_index(3);
          done(absl::OkStatus());
          done(absl::InternalError("a second answer"));  // ignored
        });
    AddMethod<proto::ShutdownRequest, proto::ShutdownResponse>(
        "Shutdown", [](Context*, const auto& request, auto*) {
          return request.reason() == "ok" ? absl::OkStatus()
                                          : absl::InvalidArgumentError("want reason ok");
        });
  }
};

class UnaryServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions options;
    options.listen = cluster::HostPort{"127.0.0.1", 0};
    auto server = GrpcServer::Start(options, {&service_});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    channel_ = CreateChannel(absl::StrCat("127.0.0.1:", server_->port()), {});
  }
  void TearDown() override { server_->Shutdown(absl::Seconds(1)); }

  // Sends `body` as it is to `method` of psc.proto.Worker.
  grpc::Status CallRaw(const std::string& method, const std::string& body,
                       const std::string& token = kToken, grpc::ByteBuffer* reply = nullptr) {
    grpc::GenericStub stub(channel_);
    grpc::ClientContext context;
    PrepareContext(&context, {.token = token}, absl::Seconds(20));
    grpc::Slice slice(body);
    grpc::ByteBuffer request(&slice, 1), response;
    absl::Notification done;
    grpc::Status status;
    stub.UnaryCall(&context, "/psc.proto.Worker/" + method, grpc::StubOptions(), &request,
                   &response, [&](grpc::Status s) {
                     status = std::move(s);
                     done.Notify();
                   });
    done.WaitForNotification();
    if (reply != nullptr) *reply = response;
    return status;
  }

  ThrowingService service_;
  std::unique_ptr<GrpcServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(UnaryServiceTest, BadAllocIsResourceExhausted) {
  grpc::Status s = CallRaw("StartJob", "");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_EQ(s.error_message(), "/psc.proto.Worker/StartJob: out of memory");
}

TEST_F(UnaryServiceTest, OtherExceptionsAreInternalWithTheirMessage) {
  grpc::Status s = CallRaw("RunUnit", "");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INTERNAL) << s.error_message();
  EXPECT_EQ(s.error_message(),
            "/psc.proto.Worker/RunUnit: unexpected exception: the core broke its promise");
}

TEST_F(UnaryServiceTest, AnUndecodableBodyIsInvalidArgument) {
  // 0xff 0xff ...: a varint that never ends, and field number 0 after it.
  for (const std::string& body : {std::string("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", 11),
                                  std::string("\x00", 1), std::string("\x0a\x05x", 3)}) {
    grpc::Status s = CallRaw("Shutdown", body);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_EQ(
        s.error_message(),
        "/psc.proto.Worker/Shutdown: the request body is not a valid psc.proto.ShutdownRequest");
  }
  // A body that parses reaches the handler.
  proto::ShutdownRequest ok;
  ok.set_reason("ok");
  EXPECT_TRUE(CallRaw("Shutdown", ok.SerializeAsString()).ok());
  EXPECT_EQ(CallRaw("Shutdown", "").error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(UnaryServiceTest, TheTokenIsCheckedBeforeTheBodyIsRead) {
  grpc::Status s = CallRaw("Shutdown", std::string("\xff\xff", 2), "");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("missing cluster token"));
}

TEST_F(UnaryServiceTest, ACallIsFinishedOnceWithItsFirstAnswer) {
  grpc::ByteBuffer reply;
  grpc::Status s = CallRaw("GetStatus", "", kToken, &reply);
  ASSERT_TRUE(s.ok()) << s.error_message();
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(reply.Dump(&slices).ok());
  std::string bytes;
  for (const auto& slice : slices)
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  proto::WorkerStatus status;
  ASSERT_TRUE(status.ParseFromString(bytes));
  EXPECT_EQ(status.task_index(), 3);
}

// A service that forgets a method, or registers the wrong types, is refused
// before it serves.
class IncompleteService final : public UnaryService {
 public:
  explicit IncompleteService(bool wrong_types) : UnaryService("psc.proto.Worker", "") {
    auto unimplemented = [](Context*, const auto&, auto*) { return absl::UnimplementedError(""); };
    AddMethod<proto::StartJobRequest, proto::StartJobResponse>("StartJob", unimplemented);
    AddMethod<proto::RunUnitRequest, proto::RunUnitResponse>("RunUnit", unimplemented);
    if (wrong_types) {
      AddMethod<proto::ShutdownRequest, proto::WorkerStatus>("GetStatus", unimplemented);
    } else {
      AddMethod<proto::GetStatusRequest, proto::WorkerStatus>("GetStatus", unimplemented);
    }
  }
};

TEST(UnaryServiceRegistrationTest, EveryMethodWithItsTypesOrTheServerDoesNotStart) {
  IncompleteService missing(false);
  EXPECT_THAT(missing.Check().message(),
              HasSubstr("methods without exactly one handler: Shutdown"));
  IncompleteService wrong(true);
  EXPECT_THAT(wrong.Check().message(),
              HasSubstr("psc.proto.Worker.GetStatus is registered with psc.proto.ShutdownRequest"));
  ServerOptions options;
  options.listen = cluster::HostPort{"127.0.0.1", 0};
  auto server = GrpcServer::Start(options, {&missing});
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace rpc
}  // namespace psc
