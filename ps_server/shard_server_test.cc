#include "ps_server/shard_server.h"

#include "absl/synchronization/notification.h"
#include "common/tensor/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace ps_server {
namespace {

using ::testing::HasSubstr;

proto::ConfigureRequest Config(proto::TrainingMode mode, int shard, int workers) {
  proto::ConfigureRequest c;
  c.set_shard_index(shard);
  c.set_num_shards(2);
  c.set_num_workers(workers);
  c.mutable_policy()->set_mode(mode);
  c.mutable_optimizer()->set_kind(proto::OptimizerConfig::SGD);
  c.mutable_optimizer()->set_learning_rate(1.0);
  return c;
}

proto::PushRequest Push(int worker, float g, bool pull_after, int64_t pull_min_version = 0) {
  proto::PushRequest p;
  p.mutable_id()->set_worker(worker);
  p.mutable_id()->set_replica_slot(worker);
  auto* t = p.add_gradients();
  t->set_name("w");
  tensor::SetFloatTensor({2}, {g, g}, t->mutable_tensor());
  p.set_pull_after(pull_after);
  p.set_pull_min_version(pull_min_version);
  return p;
}

class ShardServerTest : public ::testing::Test {
 protected:
  void Start(proto::TrainingMode mode, int workers) {
    ShardServerOptions options;
    options.task_index = 1;
    options.shard.clock = &clock_;
    options.max_pull_wait = absl::Seconds(30);
    options.expiry_interval = absl::ZeroDuration();  // the test expires waits itself
    server_ = std::make_unique<ShardServer>(options);
    ASSERT_TRUE(server_->Configure(Config(mode, 1, workers)).ok());
    proto::CreateVariablesRequest create;
    auto* v = create.add_variables();
    v->set_name("w");
    tensor::SetFloatTensor({2}, {10, 20}, v->mutable_tensor());
    proto::CreateVariablesResponse created;
    ASSERT_TRUE(server_->CreateVariables(create, &created).ok());
  }

  base::FakeClock clock_;
  std::unique_ptr<ShardServer> server_;
};

TEST_F(ShardServerTest, ConfigureMustNameThisServersShard) {
  ShardServerOptions options;
  options.task_index = 1;
  options.shard.clock = &clock_;
  options.expiry_interval = absl::ZeroDuration();
  ShardServer server(options);
  EXPECT_EQ(server.Stats().shard_index(), 1) << "known before Configure";
  absl::Status s = server.Configure(Config(proto::MODE_ASYNC, 0, 1));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("this server is ps:1; Configure names shard 0"));
  EXPECT_TRUE(server.Configure(Config(proto::MODE_ASYNC, 1, 1)).ok());
}

TEST_F(ShardServerTest, PushWithPullAfterAnswersTheVariablesInOneRoundTrip) {
  Start(proto::MODE_ASYNC, 1);
  proto::PushResponse r;
  ASSERT_TRUE(server_->PushBlocking(Push(0, 1, true), absl::InfiniteFuture(), &r).ok());
  EXPECT_EQ(r.outcome(), proto::PushResponse::APPLIED);
  EXPECT_EQ(r.version(), 1);
  ASSERT_EQ(r.variables_size(), 1);
  EXPECT_EQ(tensor::FloatValues(r.variables(0).tensor()), (std::vector<float>{9, 19}));
  proto::PushResponse without;
  ASSERT_TRUE(server_->PushBlocking(Push(0, 1, false), absl::InfiniteFuture(), &without).ok());
  EXPECT_EQ(without.variables_size(), 0);
}

TEST_F(ShardServerTest, ASyncPushWaitsForTheStepAndAnswersItsParameters) {
  Start(proto::MODE_SYNC, 2);
  proto::PushResponse first;
  absl::Notification done;
  absl::Status status;
  server_->Push(Push(0, 2, true, 1), absl::InfiniteFuture(), &first, [&](absl::Status s) {
    status = s;
    done.Notify();
  });
  EXPECT_FALSE(done.HasBeenNotified()) << "the step needs worker 1";
  EXPECT_EQ(server_->shard().num_waiters(), 1);
  proto::PushResponse second;
  ASSERT_TRUE(server_->PushBlocking(Push(1, 4, true, 1), absl::InfiniteFuture(), &second).ok());
  ASSERT_TRUE(done.HasBeenNotified());
  ASSERT_TRUE(status.ok()) << status;
  for (const proto::PushResponse* r : {&first, &second}) {
    EXPECT_EQ(r->version(), 1);
    EXPECT_EQ(tensor::FloatValues(r->variables(0).tensor()), (std::vector<float>{7, 17}));
  }
}

TEST_F(ShardServerTest, AWaitEndsAtItsDeadlineButNoLaterThanMaxPullWait) {
  Start(proto::MODE_SYNC, 2);
  proto::PullRequest req;
  req.set_min_version(1);
  proto::PullResponse r;
  absl::Status status = absl::UnknownError("pending");
  server_->Pull(req, absl::InfiniteFuture(), &r, [&](absl::Status s) { status = s; });
  clock_.Advance(absl::Seconds(29));
  server_->ExpireWaiters();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnknown) << "still waiting";
  clock_.Advance(absl::Seconds(1));
  server_->ExpireWaiters();
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(status.message(), HasSubstr("version 1 not reached"));
}

TEST_F(ShardServerTest, StopFailsTheWaitsAndRefusesNewOnes) {
  Start(proto::MODE_SYNC, 2);
  proto::PullRequest req;
  req.set_min_version(1);
  proto::PullResponse r;
  absl::Status status;
  server_->Pull(req, absl::InfiniteFuture(), &r, [&](absl::Status s) { status = s; });
  server_->Stop();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(server_->PullBlocking(req, absl::InfiniteFuture(), &r).code(),
            absl::StatusCode::kUnavailable);
  server_->Stop();  // idempotent
}

TEST(ShardServerTimerTest, TheTimerEndsWaitsByItself) {
  base::RealClock clock;
  ShardServerOptions options;
  options.shard.clock = &clock;
  options.expiry_interval = absl::Milliseconds(5);
  ShardServer server(options);
  ASSERT_TRUE(server.Configure(Config(proto::MODE_SYNC, 0, 2)).ok());
  proto::PullRequest req;
  req.set_min_version(1);
  proto::PullResponse r;
  EXPECT_EQ(server.PullBlocking(req, clock.Now() + absl::Milliseconds(50), &r).code(),
            absl::StatusCode::kDeadlineExceeded);
}

}  // namespace
}  // namespace ps_server
}  // namespace psc
