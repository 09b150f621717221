// Integration: every method of every service refuses a call without the
// cluster token or with a wrong one (UNAUTHENTICATED), and such calls change
// nothing. Methods are enumerated from the service descriptors, so a method
// added later is covered without touching this test.
#include "common/rpc/auth.h"

#include <signal.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/rpc/channel.h"
#include "gmock/gmock.h"
#include "google/protobuf/descriptor.h"
#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"
#include "proto/coordinator.grpc.pb.h"
#include "proto/parameter_server.grpc.pb.h"
#include "proto/worker.grpc.pb.h"
#include "tests/testing/local_cluster.h"

namespace psc {
namespace testing {
namespace {

using ::testing::HasSubstr;

constexpr char kToken[] = "cluster-token-for-auth-test-0123456789";

grpc::Status CallRaw(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
                     const std::string& token, const std::string& body = "") {
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  rpc::PrepareContext(&context, {.token = token}, absl::Seconds(20));
  grpc::Slice slice(body);
  grpc::ByteBuffer request(&slice, 1), response;
  absl::Notification done;
  grpc::Status status;
  stub.UnaryCall(&context, method, grpc::StubOptions(), &request, &response, [&](grpc::Status s) {
    status = std::move(s);
    done.Notify();
  });
  done.WaitForNotification();
  return status;
}

class AuthTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(MakeTempDir("auth"));
    WriteFile(*dir_ + "/token", std::string(kToken) + "\n");
    spec_ = new ClusterSpec(1, 3);  // worker:2 never starts, so the chief keeps serving
    const std::vector<std::string> flags = {"--auth_token_file=" + *dir_ + "/token"};
    daemons_ = new std::vector<std::unique_ptr<Daemon>>();
    auto start = [&](const char* binary, cluster::TaskType type, int index,
                     std::vector<std::string> f) {
      auto d = Daemon::Start(binary, spec_->TfConfig(type, index), f, *dir_);
      ASSERT_TRUE(d.ok()) << d.status();
      daemons_->push_back(*std::move(d));
    };
    start("ps_server", cluster::TaskType::kPs, 0, flags);
    start("worker", cluster::TaskType::kWorker, 0, flags);
    start("worker", cluster::TaskType::kWorker, 1, flags);
    std::vector<std::string> chief_flags = flags;
    chief_flags.push_back("--startup_timeout=600s");
    chief_flags.push_back("--batch_size=126");  // splits over the 3 workers (checked at start)
    start("chief", cluster::TaskType::kChief, 0, chief_flags);
  }
  static void TearDownTestSuite() {
    delete daemons_;  // kills the daemons
    delete spec_;
    delete dir_;
  }

  void SetUp() override {
    for (cluster::TaskType t :
         {cluster::TaskType::kPs, cluster::TaskType::kWorker, cluster::TaskType::kChief}) {
      ASSERT_TRUE(WaitForServing(spec_->Address(t, 0), {.token = kToken}, absl::Seconds(30)).ok());
    }
  }

  static std::string* dir_;
  static ClusterSpec* spec_;
  static std::vector<std::unique_ptr<Daemon>>* daemons_;
};
std::string* AuthTest::dir_;
ClusterSpec* AuthTest::spec_;
std::vector<std::unique_ptr<Daemon>>* AuthTest::daemons_;

TEST_F(AuthTest, EveryMethodOfEveryServiceRejectsMissingAndWrongTokens) {
  struct Target {
    const google::protobuf::ServiceDescriptor* service;
    cluster::TaskType task;
  };
  const Target targets[] = {
      {proto::ShardStats::descriptor()->file()->FindServiceByName("ParameterServer"),
       cluster::TaskType::kPs},
      {proto::WorkerStatus::descriptor()->file()->FindServiceByName("Worker"),
       cluster::TaskType::kWorker},
      {proto::RegisterRequest::descriptor()->file()->FindServiceByName("Coordinator"),
       cluster::TaskType::kChief},
  };
  int methods = 0;
  for (const Target& t : targets) {
    ASSERT_NE(t.service, nullptr);
    auto channel = rpc::CreateChannel(spec_->Address(t.task, 0), {});
    for (int i = 0; i < t.service->method_count(); ++i) {
      const std::string method =
          absl::StrCat("/", t.service->full_name(), "/", t.service->method(i)->name());
      for (const std::string& token :
           {std::string(), std::string("wrong-token-0123456789abcdef")}) {
        grpc::Status s = CallRaw(channel, method, token);
        EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED)
            << method << " with token '" << token << "': " << s.error_message();
        EXPECT_THAT(s.error_message(),
                    HasSubstr(token.empty() ? "missing cluster token" : "wrong cluster token"));
      }
      // With the token the guard lets the call through (Shutdown excepted:
      // it would end the daemon this test still needs).
      if (t.service->method(i)->name() != "Shutdown") {
        grpc::Status s = CallRaw(channel, method, kToken);
        EXPECT_NE(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << method;
      }
      ++methods;
    }
  }
  EXPECT_GE(methods, 9 + 4 + 3);
  // The refused Shutdown calls changed nothing: every daemon still runs.
  for (auto& d : *daemons_) EXPECT_FALSE(d->process().Poll().has_value()) << d->Log();
}

// A body that does not parse is INVALID_ARGUMENT naming the message, on
// every method of every daemon (gRPC's own handler answered UNIMPLEMENTED
// with an empty message), and changes nothing: Shutdown included.
TEST_F(AuthTest, EveryMethodAnswersAnUndecodableBodyWithInvalidArgument) {
  const google::protobuf::ServiceDescriptor* services[] = {
      proto::ShardStats::descriptor()->file()->FindServiceByName("ParameterServer"),
      proto::WorkerStatus::descriptor()->file()->FindServiceByName("Worker"),
      proto::RegisterRequest::descriptor()->file()->FindServiceByName("Coordinator"),
  };
  const cluster::TaskType tasks[] = {cluster::TaskType::kPs, cluster::TaskType::kWorker,
                                     cluster::TaskType::kChief};
  const std::string garbage("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", 11);
  int methods = 0;
  for (int t = 0; t < 3; ++t) {
    ASSERT_NE(services[t], nullptr);
    auto channel = rpc::CreateChannel(spec_->Address(tasks[t], 0), {});
    for (int i = 0; i < services[t]->method_count(); ++i) {
      const google::protobuf::MethodDescriptor* m = services[t]->method(i);
      const std::string method = absl::StrCat("/", services[t]->full_name(), "/", m->name());
      grpc::Status s = CallRaw(channel, method, kToken, garbage);
      EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
          << method << ": " << s.error_message();
      EXPECT_EQ(s.error_message(), absl::StrCat(method, ": the request body is not a valid ",
                                                m->input_type()->full_name()));
      ++methods;
    }
  }
  EXPECT_EQ(methods, 12 + 4 + 8);  // ps, worker, coordinator
  for (auto& d : *daemons_) EXPECT_FALSE(d->process().Poll().has_value()) << d->Log();
}

TEST_F(AuthTest, ChiefProbesWithItsTokenAndReportsAWrongOneAtOnce) {
  const std::string good = *dir_ + "/token";
  const std::string bad = *dir_ + "/bad_token";
  WriteFile(bad, "a-different-token-0123456789\n");
  auto run = [&](const std::string& token_file, const std::string& timeout) {
    return RunProgram({BinPath("chief"), "--check_cluster", "--startup_timeout=" + timeout,
                       "--auth_token_file=" + token_file},
                      {{"TF_CONFIG", spec_->TfConfig(cluster::TaskType::kChief, 0)}},
                      absl::Seconds(60));
  };
  // Right token: ps:0, worker:0 and worker:1 answer; only worker:2 is missing.
  auto r = run(good, "2s");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit.ToString(), "exit 1");
  EXPECT_THAT(r->err, HasSubstr("1 of 4 tasks did not answer within 2s: worker:2 at"));
  // Wrong token: refused, and reported without waiting out the deadline.
  r = run(bad, "60s");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit.ToString(), "exit 1");
  EXPECT_THAT(r->err, HasSubstr("cannot be used"));
  EXPECT_THAT(r->err, HasSubstr("ps:0 at " + spec_->Address(cluster::TaskType::kPs, 0) +
                                " (UNAUTHENTICATED: wrong cluster token)"));
  EXPECT_LT(r->wall, absl::Seconds(30));
}

}  // namespace
}  // namespace testing
}  // namespace psc
