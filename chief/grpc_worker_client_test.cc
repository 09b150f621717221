// GrpcWorkerClient against a fake Worker service on 127.0.0.1: a StartJob
// whose call breaks because the worker died (UNAVAILABLE) is made again
// until the worker answers (what bench/soak.sh found: a worker killed while
// it started the job failed the whole job).
#include "chief/grpc_worker_client.h"

#include <atomic>

#include "common/rpc/server.h"
#include "common/rpc/unary_service.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace chief {
namespace {

using Context = grpc::CallbackServerContext;

// StartJob answers UNAVAILABLE `failures` times, then OK (or, with
// `fatal`, FAILED_PRECONDITION once).
class FlakyWorker final : public rpc::UnaryService {
 public:
  FlakyWorker(int failures, bool fatal) : UnaryService("psc.proto.Worker", "") {
    AddMethod<proto::StartJobRequest, proto::StartJobResponse>(
        "StartJob", [this, failures, fatal](Context*, const auto&, auto*) -> absl::Status {
          const int call = calls_++;
          if (fatal) return absl::FailedPreconditionError("not this job");
          if (call < failures) return absl::UnavailableError("Socket closed");
          return absl::OkStatus();
        });
    auto unimplemented = [](Context*, const auto&, auto*) { return absl::UnimplementedError(""); };
    AddMethod<proto::RunUnitRequest, proto::RunUnitResponse>("RunUnit", unimplemented);
    AddMethod<proto::GetStatusRequest, proto::WorkerStatus>("GetStatus", unimplemented);
    AddMethod<proto::ShutdownRequest, proto::ShutdownResponse>("Shutdown", unimplemented);
  }
  int calls() const { return calls_.load(); }

 private:
  std::atomic<int> calls_{0};
};

std::unique_ptr<rpc::GrpcServer> Serve(grpc::Service* service) {
  rpc::ServerOptions options;
  options.listen = cluster::HostPort{"127.0.0.1", 0};
  auto server = rpc::GrpcServer::Start(options, {service});
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

TEST(GrpcWorkerClientTest, AStartJobThatBrokeIsMadeAgain) {
  FlakyWorker worker(/*failures=*/2, /*fatal=*/false);
  auto server = Serve(&worker);
  ASSERT_NE(server, nullptr);
  GrpcWorkerClient client({server->address()}, {});
  EXPECT_TRUE(client.StartJob(0, proto::JobSpec()).ok());
  EXPECT_EQ(worker.calls(), 3);
  server->Shutdown(absl::Seconds(1));
}

// A worker restarted since StartJob: RunUnit answers "no job" and GetStatus
// IDLE until it gets the job again.
class RestartedWorker final : public rpc::UnaryService {
 public:
  RestartedWorker() : UnaryService("psc.proto.Worker", "") {
    AddMethod<proto::StartJobRequest, proto::StartJobResponse>(
        "StartJob", [this](Context*, const auto&, auto*) {
          ++starts_;
          return absl::OkStatus();
        });
    AddMethod<proto::RunUnitRequest, proto::RunUnitResponse>(
        "RunUnit", [this](Context*, const auto& unit, auto* response) {
          ++runs_;
          if (starts_ < 2) return absl::FailedPreconditionError("no job: call StartJob first");
          response->mutable_metrics()->set_examples(unit.num_steps());
          return absl::OkStatus();
        });
    AddMethod<proto::GetStatusRequest, proto::WorkerStatus>(
        "GetStatus", [this](Context*, const auto&, auto* status) {
          status->set_state(starts_ < 2 ? proto::WorkerStatus::IDLE : proto::WorkerStatus::READY);
          return absl::OkStatus();
        });
    AddMethod<proto::ShutdownRequest, proto::ShutdownResponse>(
        "Shutdown", [](Context*, const auto&, auto*) { return absl::UnimplementedError(""); });
  }
  std::atomic<int> starts_{0}, runs_{0};
};

// What bench/soak.sh found: a worker killed after StartJob and restarted
// answered every unit "no job", which the chief took for a server failure
// until it gave up.
TEST(GrpcWorkerClientTest, AWorkerRestartedWithoutTheJobGetsItAgain) {
  RestartedWorker worker;
  auto server = Serve(&worker);
  ASSERT_NE(server, nullptr);
  GrpcWorkerClient client({server->address()}, {});
  ASSERT_TRUE(client.StartJob(0, proto::JobSpec()).ok());  // the worker's first life
  proto::RunUnitRequest unit;
  unit.set_num_steps(5);
  auto metrics = client.RunUnit(0, unit);
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_EQ(metrics->examples(), 5);
  EXPECT_EQ(worker.starts_.load(), 2);
  EXPECT_EQ(worker.runs_.load(), 2);
  server->Shutdown(absl::Seconds(1));
}

TEST(GrpcWorkerClientTest, OtherStartJobErrorsAreNotRetried) {
  FlakyWorker worker(0, /*fatal=*/true);
  auto server = Serve(&worker);
  ASSERT_NE(server, nullptr);
  GrpcWorkerClient client({server->address()}, {});
  absl::Status s = client.StartJob(0, proto::JobSpec());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), ::testing::HasSubstr("StartJob: not this job"));
  EXPECT_EQ(worker.calls(), 1);
  server->Shutdown(absl::Seconds(1));
}

}  // namespace
}  // namespace chief
}  // namespace psc
