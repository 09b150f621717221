// The ParameterServer service on 127.0.0.1 over real gRPC, with a token.
#include "ps_server/ps_service.h"

#include <thread>
#include <utility>
#include <vector>

#include "common/rpc/channel.h"
#include "common/rpc/grpc_parameter_client.h"
#include "common/rpc/server.h"
#include "common/tensor/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/parameter_server.grpc.pb.h"

namespace psc {
namespace ps_server {
namespace {

using ::testing::HasSubstr;

constexpr char kToken[] = "ps-service-test-token-0123456789";
constexpr int64_t kSeedCnnFloats = 435306;

class PsServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ShardServerOptions shard_options;
    shard_options.shard.clock = &clock_;
    shard_options.max_pull_wait = absl::Minutes(1);
    shard_server_ = std::make_unique<ShardServer>(shard_options);
    service_ = std::make_unique<ParameterServerService>(shard_server_.get(), kToken, &shutdown_);
    rpc::ServerOptions options;
    options.listen = cluster::HostPort{"127.0.0.1", 0};
    options.security.token = kToken;
    auto server = rpc::GrpcServer::Start(options, {service_.get()});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = proto::ParameterServer::NewStub(rpc::CreateChannel(server_->address(), {}));
  }
  void TearDown() override {
    shard_server_->Stop();
    server_->Shutdown(absl::Seconds(5));
  }

  std::unique_ptr<grpc::ClientContext> Context(absl::Duration timeout = absl::Seconds(30),
                                               const std::string& token = kToken) {
    auto c = std::make_unique<grpc::ClientContext>();
    rpc::PrepareContext(c.get(), {.token = token}, timeout);
    return c;
  }

  static proto::ConfigureRequest Config(proto::TrainingMode mode, int workers) {
    proto::ConfigureRequest config;
    config.set_num_shards(1);
    config.set_num_workers(workers);
    config.mutable_policy()->set_mode(mode);
    config.mutable_optimizer()->set_kind(proto::OptimizerConfig::SGD);
    config.mutable_optimizer()->set_learning_rate(0.5);
    return config;
  }

  void Setup(proto::TrainingMode mode, int workers, int64_t n) {
    proto::ConfigureResponse cr;
    ASSERT_TRUE(stub_->Configure(Context().get(), Config(mode, workers), &cr).ok());
    proto::CreateVariablesRequest create;
    auto* v = create.add_variables();
    v->set_name("w");
    tensor::SetFloatTensor({n}, std::vector<float>(n, 1.0f), v->mutable_tensor());
    proto::CreateVariablesResponse created;
    ASSERT_TRUE(stub_->CreateVariables(Context().get(), create, &created).ok());
  }

  proto::PushRequest Push(int worker, int64_t step, int64_t version, int64_t n, float g) {
    proto::PushRequest p;
    p.mutable_id()->set_worker(worker);
    p.mutable_id()->set_step(step);
    p.set_computed_on_version(version);
    auto* t = p.add_gradients();
    t->set_name("w");
    tensor::SetFloatTensor({n}, std::vector<float>(n, g), t->mutable_tensor());
    return p;
  }

  base::RealClock clock_;
  base::ShutdownSignal shutdown_;
  std::unique_ptr<ShardServer> shard_server_;
  std::unique_ptr<ParameterServerService> service_;
  std::unique_ptr<rpc::GrpcServer> server_;
  std::unique_ptr<proto::ParameterServer::Stub> stub_;
};

TEST_F(PsServiceTest, PushAndPullTheReferenceModelInOneRoundTrip) {
  Setup(proto::MODE_ASYNC, 1, kSeedCnnFloats);
  proto::PushRequest p = Push(0, 0, 0, kSeedCnnFloats, 2.0f);
  p.set_pull_after(true);
  proto::PushResponse r;
  grpc::Status s = stub_->Push(Context().get(), p, &r);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(r.outcome(), proto::PushResponse::APPLIED);
  EXPECT_EQ(r.version(), 1);
  ASSERT_EQ(r.variables_size(), 1);
  EXPECT_EQ(tensor::FloatValues(r.variables(0).tensor()), std::vector<float>(kSeedCnnFloats, 0.0f));
  proto::ShardStats stats;
  ASSERT_TRUE(stub_->GetStats(Context().get(), {}, &stats).ok());
  EXPECT_EQ(stats.bytes_in(), kSeedCnnFloats * 4);
  EXPECT_EQ(stats.bytes_out(), kSeedCnnFloats * 4);
}

TEST_F(PsServiceTest, WaitingPullsHoldNoThreadAndAreReleasedByTheStep) {
  Setup(proto::MODE_SYNC, 2, 8);
  // Far more waiting pulls than gRPC has callback threads.
  constexpr int kWaiters = 64;
  std::vector<std::thread> pullers;
  std::vector<grpc::Status> statuses(kWaiters);
  std::vector<proto::PullResponse> responses(kWaiters);
  for (int i = 0; i < kWaiters; ++i) {
    pullers.emplace_back([&, i] {
      proto::PullRequest req;
      req.set_min_version(1);
      statuses[i] = stub_->Pull(Context().get(), req, &responses[i]);
    });
  }
  // Poll (bounded) until every pull waits in the shard.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (shard_server_->shard().num_waiters() < kWaiters && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  ASSERT_EQ(shard_server_->shard().num_waiters(), kWaiters);
  // The server still serves other calls while they wait.
  proto::ShardStats stats;
  ASSERT_TRUE(stub_->GetStats(Context().get(), {}, &stats).ok());
  proto::PushResponse r;
  ASSERT_TRUE(stub_->Push(Context().get(), Push(0, 0, 0, 8, 1.0f), &r).ok());
  ASSERT_TRUE(stub_->Push(Context().get(), Push(1, 0, 0, 8, 3.0f), &r).ok());
  for (auto& t : pullers) t.join();
  for (int i = 0; i < kWaiters; ++i) {
    ASSERT_TRUE(statuses[i].ok()) << statuses[i].error_message();
    EXPECT_EQ(responses[i].version(), 1);
    EXPECT_EQ(tensor::FloatValues(responses[i].variables(0).tensor()), std::vector<float>(8, 0.0f));
  }
}

TEST_F(PsServiceTest, AWaitingPullEndsAtItsDeadline) {
  Setup(proto::MODE_SYNC, 2, 4);
  proto::PullRequest req;
  req.set_min_version(5);
  proto::PullResponse resp;
  const absl::Time start = absl::Now();
  grpc::Status s = stub_->Pull(Context(absl::Milliseconds(300)).get(), req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  // The shard dropped its waiter by itself.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (shard_server_->shard().num_waiters() > 0 && absl::Now() < deadline)
    absl::SleepFor(absl::Milliseconds(5));
  EXPECT_EQ(shard_server_->shard().num_waiters(), 0);
}

TEST_F(PsServiceTest, ShutdownWakesWaitingPulls) {
  Setup(proto::MODE_SYNC, 2, 4);
  grpc::Status status;
  std::thread puller([&] {
    proto::PullRequest req;
    req.set_min_version(1);
    proto::PullResponse resp;
    status = stub_->Pull(Context().get(), req, &resp);
  });
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (shard_server_->shard().num_waiters() < 1 && absl::Now() < deadline)
    absl::SleepFor(absl::Milliseconds(5));
  shard_server_->Stop();
  puller.join();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(status.error_message(), HasSubstr("shutting down"));
}

TEST_F(PsServiceTest, ConfigureMustNameThisServersShard) {
  proto::ConfigureRequest config;
  config.set_shard_index(1);
  config.set_num_shards(2);
  config.set_num_workers(1);
  config.mutable_policy()->set_mode(proto::MODE_ASYNC);
  config.mutable_optimizer()->set_kind(proto::OptimizerConfig::SGD);
  proto::ConfigureResponse cr;
  grpc::Status s = stub_->Configure(Context().get(), config, &cr);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("this server is ps:0; Configure names shard 1"));
}

TEST_F(PsServiceTest, ErrorsTravelAsTheirCanonicalCodes) {
  Setup(proto::MODE_ASYNC, 1, 4);
  proto::PushRequest p = Push(0, 0, 0, 4, 1.0f);
  p.mutable_gradients(0)->set_name("nope");
  proto::PushResponse r;
  EXPECT_EQ(stub_->Push(Context().get(), p, &r).error_code(), grpc::StatusCode::NOT_FOUND);
  p = Push(0, 0, 0, 3, 1.0f);
  EXPECT_EQ(stub_->Push(Context().get(), p, &r).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  p = Push(0, 0, 0, 4, 1.0f);
  EXPECT_EQ(stub_->Push(Context(absl::Seconds(10), "").get(), p, &r).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  proto::ShardStats stats;
  ASSERT_TRUE(stub_->GetStats(Context().get(), {}, &stats).ok());
  EXPECT_EQ(stats.pushes_accepted(), 0) << "the unauthenticated push must not count";
  EXPECT_EQ(stats.requests_rejected(), 2);
}

// A shard's state from one server to another over gRPC, through the
// production client (ParameterServerClient over GrpcShardTransport): a state
// of over 64 MiB fits in one message each way.
TEST_F(PsServiceTest, AStateOfOver64MiBTravelsToAnotherServerThroughTheClient) {
  constexpr int64_t kFloats = (int64_t{64} << 20) / 4 + 1024;
  Setup(proto::MODE_ASYNC, 1, kFloats);
  proto::PushResponse pushed;
  ASSERT_TRUE(stub_->Push(Context().get(), Push(0, 0, 0, kFloats, 3.0f), &pushed).ok());
  // A second server, configured alike, with no variables.
  ShardServerOptions peer_options;
  peer_options.shard.clock = &clock_;
  ShardServer peer(peer_options);
  ParameterServerService peer_service(&peer, kToken, &shutdown_);
  rpc::ServerOptions server_options;
  server_options.listen = cluster::HostPort{"127.0.0.1", 0};
  server_options.security.token = kToken;
  auto peer_server = rpc::GrpcServer::Start(server_options, {&peer_service});
  ASSERT_TRUE(peer_server.ok()) << peer_server.status();
  rpc::GrpcParameterClient client({server_->address(), (*peer_server)->address()},
                                  {.token = kToken}, absl::Seconds(10), /*data_channel=*/false);
  ASSERT_TRUE(client.Configure(1, Config(proto::MODE_ASYNC, 1)).ok());

  proto::ExportStateRequest export_request;
  export_request.set_step(1);
  proto::ExportStateResponse exported;
  absl::Status s = client.ExportState(0, export_request, &exported);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_GT(exported.state().size(), size_t{64} << 20);
  EXPECT_EQ(exported.version(), 1);
  proto::ImportStateRequest import_request;
  import_request.set_state(std::move(*exported.mutable_state()));
  import_request.set_step(1);
  proto::ImportStateResponse imported;
  s = client.ImportState(1, import_request, &imported);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(imported.version(), 1);
  EXPECT_EQ(imported.step(), 1);
  std::vector<proto::PullResponse> pulled;
  ASSERT_TRUE(client.PullAll(std::vector<proto::PullRequest>(2), &pulled, absl::Seconds(30)).ok());
  ASSERT_EQ(pulled[1].variables_size(), 1);
  EXPECT_EQ(pulled[1].version(), 1);
  EXPECT_TRUE(pulled[0].SerializeAsString() == pulled[1].SerializeAsString())
      << "the peer answers what the exporter answers";

  // A bad state travels back as its code, naming the call; the peer keeps
  // what it has.
  import_request.set_state("not a checkpoint");
  s = client.ImportState(1, import_request, &imported);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(s.message(), HasSubstr("ImportState: imported state of step 1 for shard 0 of 1"));
  EXPECT_EQ(peer.Stats().version(), 1);
  (*peer_server)->Shutdown(absl::Seconds(5));
  peer.Stop();
}

}  // namespace
}  // namespace ps_server
}  // namespace psc
