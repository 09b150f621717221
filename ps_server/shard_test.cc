#include "ps_server/shard.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <thread>

#include "absl/synchronization/notification.h"
#include "common/checkpoint/checkpoint_files.h"
#include "common/io/faulty_file_system.h"
#include "common/tensor/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace ps_server {
namespace {

using ::testing::HasSubstr;

// Two variables: "a" [2,3] and "b" [4].
const std::vector<int64_t> kShapeA = {2, 3};
const std::vector<int64_t> kShapeB = {4};

proto::ConfigureRequest Config(proto::TrainingMode mode, int workers, int r = 0, int s = 0,
                               proto::OptimizerConfig::Kind kind = proto::OptimizerConfig::SGD,
                               double lr = 0.5) {
  proto::ConfigureRequest c;
  c.set_shard_index(0);
  c.set_num_shards(1);
  c.set_num_workers(workers);
  c.mutable_policy()->set_mode(mode);
  c.mutable_policy()->set_replicas_to_aggregate(r);
  c.mutable_policy()->set_staleness(s);
  c.mutable_optimizer()->set_kind(kind);
  c.mutable_optimizer()->set_learning_rate(lr);
  return c;
}

proto::NamedTensor Named(const std::string& name, const std::vector<int64_t>& shape,
                         const std::vector<float>& values) {
  proto::NamedTensor t;
  t.set_name(name);
  tensor::SetFloatTensor(shape, values, t.mutable_tensor());
  return t;
}

proto::PushRequest Push(int worker, int64_t step, int64_t version, const std::vector<float>& a,
                        const std::vector<float>& b, int slot = 0, int64_t clock = 0) {
  proto::PushRequest p;
  p.mutable_id()->set_worker(worker);
  p.mutable_id()->set_unit(0);
  p.mutable_id()->set_step(step);
  p.mutable_id()->set_replica_slot(slot);
  p.set_computed_on_version(version);
  p.set_worker_clock(clock);
  *p.add_gradients() = Named("a", kShapeA, a);
  *p.add_gradients() = Named("b", kShapeB, b);
  return p;
}

std::vector<float> Fill(size_t n, float v) { return std::vector<float>(n, v); }

// Keras's moving-average update as a plain float expression.
float KerasMovingAverage(float v, float s, float momentum) {
  const float one_minus = static_cast<float>(1.0 - static_cast<double>(momentum));
  const float kept = v * momentum;
  const float added = s * one_minus;
  return kept + added;
}

class ShardTest : public ::testing::Test {
 protected:
  // "b" is a moving average of `b_momentum` when given.
  void Start(const proto::ConfigureRequest& config, float a0 = 1.0f, float b0 = 2.0f,
             std::optional<float> b_momentum = std::nullopt) {
    shard_ = std::make_unique<Shard>(ShardOptions{&clock_});
    ASSERT_TRUE(shard_->Configure(config).ok());
    proto::CreateVariablesRequest create;
    *create.add_variables() = Named("a", kShapeA, Fill(6, a0));
    *create.add_variables() = Named("b", kShapeB, Fill(4, b0));
    if (b_momentum) {
      proto::MovingAverage* m = create.add_moving_averages();
      m->set_variable("b");
      m->set_momentum(*b_momentum);
    }
    proto::CreateVariablesResponse created;
    ASSERT_TRUE(shard_->CreateVariables(create, &created).ok());
    ASSERT_EQ(created.created(), 2);
  }

  // Pulls everything now; fails the test if it would wait.
  proto::PullResponse PullNow(int64_t min_version = 0) { return PullFrom(*shard_, min_version); }
  proto::PullResponse PullFrom(Shard& shard, int64_t min_version = 0) {
    proto::PullRequest req;
    req.set_min_version(min_version);
    proto::PullResponse resp;
    absl::Status status = absl::UnknownError("not called");
    shard.Pull(req, clock_.Now() + absl::Seconds(1), &resp, [&](absl::Status s) { status = s; });
    EXPECT_TRUE(status.ok()) << status;
    return resp;
  }

  std::vector<float> Values(const std::string& name) {
    const proto::PullResponse pulled = PullNow();
    for (const auto& v : pulled.variables()) {
      if (v.name() == name) return tensor::FloatValues(v.tensor());
    }
    return {};
  }

  proto::PushResponse PushOk(const proto::PushRequest& p) {
    proto::PushResponse r;
    absl::Status s = shard_->Push(p, &r);
    EXPECT_TRUE(s.ok()) << s;
    return r;
  }

  void ExpectInvariant() {
    proto::ShardStats s = shard_->Stats();
    EXPECT_EQ(s.pushes_accepted(), s.gradients_applied() + s.gradients_dropped_stale() +
                                       s.gradients_discarded() + s.gradients_pending())
        << s.DebugString();
  }

  base::FakeClock clock_;
  std::unique_ptr<Shard> shard_;
};

// ---------------------------------------------------------------- configure

TEST_F(ShardTest, ConfigureValidatesAndIsIdempotent) {
  Shard shard(ShardOptions{&clock_});
  auto bad = [&](proto::ConfigureRequest c, const char* msg) {
    absl::Status s = shard.Configure(c);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << msg;
    EXPECT_THAT(s.message(), HasSubstr(msg));
  };
  auto c = Config(proto::MODE_SYNC, 2);
  c.set_num_shards(0);
  bad(c, "num_shards");
  c = Config(proto::MODE_SYNC, 2);
  c.set_shard_index(1);
  bad(c, "shard_index 1 out of range");
  bad(Config(proto::MODE_SYNC, 0), "num_workers");
  bad(Config(proto::MODE_UNSPECIFIED, 2), "policy.mode");
  bad(Config(proto::MODE_SSP, 2, 0, -1), "staleness -1");
  bad(Config(proto::MODE_SYNC, 2, -3), "replicas_to_aggregate -3");
  bad(Config(proto::MODE_SYNC, 2, 0, 0, proto::OptimizerConfig::SGD, -1), "learning_rate");
  c = Config(proto::MODE_SSP, 2);
  c.mutable_policy()->add_live_workers(5);
  bad(c, "live worker 5");
  // Unconfigured: data-plane calls are refused.
  proto::PushResponse pr;
  EXPECT_EQ(shard.Push(Push(0, 0, 0, Fill(6, 1), Fill(4, 1)), &pr).code(),
            absl::StatusCode::kFailedPrecondition);

  ASSERT_TRUE(shard.Configure(Config(proto::MODE_SYNC, 2)).ok());
  EXPECT_TRUE(shard.Configure(Config(proto::MODE_SYNC, 2)).ok());
  EXPECT_TRUE(shard.Configure(Config(proto::MODE_SYNC, 2, 2)).ok()) << "defaults are filled in";
  proto::CreateVariablesRequest create;
  *create.add_variables() = Named("a", kShapeA, Fill(6, 0));
  proto::CreateVariablesResponse created;
  ASSERT_TRUE(shard.CreateVariables(create, &created).ok());
  EXPECT_EQ(shard.Configure(Config(proto::MODE_ASYNC, 2)).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(ShardTest, CreateVariablesIsAllOrNothing) {
  Start(Config(proto::MODE_ASYNC, 1));
  proto::CreateVariablesRequest again;
  *again.add_variables() = Named("a", kShapeA, Fill(6, 9.0f));  // same spec: left as it is
  *again.add_variables() = Named("c", {2}, Fill(2, 0));
  proto::CreateVariablesResponse r;
  ASSERT_TRUE(shard_->CreateVariables(again, &r).ok());
  EXPECT_EQ(r.created(), 1);
  EXPECT_EQ(r.existing(), 1);
  EXPECT_EQ(Values("a"), Fill(6, 1.0f));

  proto::CreateVariablesRequest conflict;
  *conflict.add_variables() = Named("d", {3}, Fill(3, 0));
  *conflict.add_variables() = Named("b", {5}, Fill(5, 0));  // b is [4]
  absl::Status s = shard_->CreateVariables(conflict, &r);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("\"b\" exists with shape [4]"));
  EXPECT_EQ(shard_->Stats().num_variables(), 3) << "\"d\" must not have been created";

  proto::CreateVariablesRequest bad;
  *bad.add_variables() = Named("e", {2}, {1.0f, NAN});
  EXPECT_THAT(shard_->CreateVariables(bad, &r).message(), HasSubstr("non-finite"));
  bad.Clear();
  *bad.add_variables() = Named("has space", {1}, {1.0f});
  EXPECT_EQ(shard_->CreateVariables(bad, &r).code(), absl::StatusCode::kInvalidArgument);
  bad.Clear();
  auto t = Named("f", {3}, Fill(3, 0));
  t.mutable_tensor()->mutable_data()->pop_back();
  *bad.add_variables() = t;
  EXPECT_THAT(shard_->CreateVariables(bad, &r).message(), HasSubstr("bytes of data"));
}

// ---------------------------------------------------------------- sync

TEST_F(ShardTest, SyncAppliesTheMeanOnceWhenReplicasArrive) {
  Start(Config(proto::MODE_SYNC, 2));  // replicas_to_aggregate defaults to 2 workers
  EXPECT_EQ(PushOk(Push(0, 0, 0, Fill(6, 1), Fill(4, 2))).outcome(),
            proto::PushResponse::ACCUMULATED);
  EXPECT_EQ(shard_->Stats().version(), 0);
  EXPECT_EQ(Values("a"), Fill(6, 1.0f)) << "nothing applied before the step is complete";
  auto r = PushOk(Push(1, 0, 0, Fill(6, 3), Fill(4, 4)));
  EXPECT_EQ(r.outcome(), proto::PushResponse::APPLIED);
  EXPECT_EQ(r.version(), 1);
  // mean a = 2, b = 3; lr 0.5
  EXPECT_EQ(Values("a"), Fill(6, 1.0f - 0.5f * 2));
  EXPECT_EQ(Values("b"), Fill(4, 2.0f - 0.5f * 3));
  proto::ShardStats s = shard_->Stats();
  EXPECT_EQ(s.updates(), 1);
  EXPECT_EQ(s.gradients_applied(), 2);
  ExpectInvariant();
}

// A moving average's statistics travel as its gradients: the step's mean
// of them is one momentum update, while "a" takes the optimizer's.
TEST_F(ShardTest, SyncUpdatesAMovingAverageFromTheMeanOfTheStep) {
  Start(Config(proto::MODE_SYNC, 2), 1.0f, 2.0f, /*b_momentum=*/0.9f);
  EXPECT_EQ(PushOk(Push(1, 0, 0, Fill(6, 3), Fill(4, 31), /*slot=*/1)).outcome(),
            proto::PushResponse::ACCUMULATED);
  EXPECT_EQ(Values("b"), Fill(4, 2.0f)) << "nothing applied before the step is complete";
  EXPECT_EQ(PushOk(Push(0, 0, 0, Fill(6, 1), Fill(4, 10), /*slot=*/0)).outcome(),
            proto::PushResponse::APPLIED);
  EXPECT_EQ(Values("a"), Fill(6, 1.0f - 0.5f * 2)) << "SGD with the mean gradient";
  float b = KerasMovingAverage(2.0f, (10.0f + 31.0f) / 2.0f, 0.9f);
  EXPECT_EQ(Values("b"), Fill(4, b)) << "one momentum update from the mean 20.5";
  EXPECT_NEAR(b, 3.85f, 1e-5f);
  // The next step: again once, from that step's mean.
  PushOk(Push(0, 1, 1, Fill(6, 0), Fill(4, 4), 0));
  PushOk(Push(1, 1, 1, Fill(6, 0), Fill(4, 8), 1));
  b = KerasMovingAverage(b, 6.0f, 0.9f);
  EXPECT_EQ(Values("b"), Fill(4, b));
  proto::ShardStats s = shard_->Stats();
  EXPECT_EQ(s.version(), 2);
  EXPECT_EQ(s.updates(), 2);
  EXPECT_EQ(s.gradients_applied(), 4);
  ExpectInvariant();
}

TEST_F(ShardTest, SyncDropsStaleGradientsAndBackupsDoNotStall) {
  Start(Config(proto::MODE_SYNC, 3, 2));  // 3 workers, 2 to aggregate: one backup
  PushOk(Push(0, 0, 0, Fill(6, 1), Fill(4, 1)));
  EXPECT_EQ(PushOk(Push(2, 0, 0, Fill(6, 1), Fill(4, 1))).outcome(), proto::PushResponse::APPLIED);
  // The straggler's gradient for step 0 arrives late.
  auto late = PushOk(Push(1, 0, 0, Fill(6, 100), Fill(4, 100)));
  EXPECT_EQ(late.outcome(), proto::PushResponse::DROPPED_STALE);
  EXPECT_EQ(Values("a"), Fill(6, 0.5f));
  proto::ShardStats s = shard_->Stats();
  EXPECT_EQ(s.gradients_dropped_stale(), 1);
  EXPECT_EQ(s.pushes_accepted(), 3);
  EXPECT_EQ(s.version(), 1);
  ExpectInvariant();
}

TEST_F(ShardTest, SyncSumIsBitIdenticalInEveryArrivalOrder) {
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0, 1);
  std::vector<std::vector<float>> a(4, std::vector<float>(6)), b(4, std::vector<float>(4));
  for (auto& v : a)
    for (float& x : v) x = dist(rng) * 1e3f;
  for (auto& v : b)
    for (float& x : v) x = dist(rng) * 1e-3f;
  std::vector<int> order = {0, 1, 2, 3};
  std::string reference;
  int permutations = 0;
  do {
    Start(Config(proto::MODE_SYNC, 4), 0.1f, 0.2f);
    for (int w : order) PushOk(Push(w, 0, 0, a[w], b[w], /*slot=*/w));
    proto::PullResponse pulled = PullNow(1);
    std::string bytes = pulled.variables(0).tensor().data() + pulled.variables(1).tensor().data();
    if (reference.empty()) reference = bytes;
    EXPECT_EQ(bytes, reference) << "order " << order[0] << order[1] << order[2] << order[3];
    ++permutations;
  } while (std::next_permutation(order.begin(), order.end()));
  EXPECT_EQ(permutations, 24);
}

// A refused replica never sends another gradient for the step: the pulls
// waiting for it fail at once (not after --max_pull_wait), naming the
// refusing worker, the step and the refusal; with a backup the step still
// completes without it.
TEST_F(ShardTest, SyncStepThatCannotCompleteFailsItsWaitingPullsAtOnce) {
  Start(Config(proto::MODE_SYNC, 2));
  PushOk(Push(0, 0, 0, Fill(6, 1), Fill(4, 1)));
  proto::PullRequest req;
  req.set_min_version(1);
  proto::PullResponse resp;
  absl::Status waiting = absl::UnknownError("not called");
  shard_->Pull(req, clock_.Now() + absl::Minutes(10), &resp, [&](absl::Status s) { waiting = s; });
  ASSERT_EQ(shard_->num_waiters(), 1);
  proto::PushResponse r;
  const absl::Status refused = shard_->Push(Push(1, 0, 0, {1, 1, NAN, 1, 1, 1}, Fill(4, 1)), &r);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_EQ(waiting.code(), absl::StatusCode::kFailedPrecondition) << waiting;
  EXPECT_THAT(waiting.message(), HasSubstr("sync step 0 cannot complete: worker:1's gradient "
                                           "was refused"));
  EXPECT_THAT(waiting.message(), HasSubstr("non-finite"));
  EXPECT_EQ(shard_->num_waiters(), 0);
  // A pull that comes later for that step fails at once too; one for the
  // current version is served.
  absl::Status later = absl::UnknownError("not called");
  shard_->Pull(req, clock_.Now() + absl::Minutes(10), &resp, [&](absl::Status s) { later = s; });
  EXPECT_EQ(later.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(PullNow(0).variables_size() == 2);
  EXPECT_EQ(shard_->Stats().requests_rejected(), 1);
  ExpectInvariant();

  // A worker that refuses its own step (a non-finite loss, finite
  // gradients) dooms it the same way, naming why; nothing is applied.
  Start(Config(proto::MODE_SYNC, 2));
  absl::Status own = absl::UnknownError("not called");
  shard_->Pull(req, clock_.Now() + absl::Minutes(10), &resp, [&](absl::Status s) { own = s; });
  proto::PushRequest self_refused = Push(1, 0, 0, Fill(6, 1), Fill(4, 1));
  self_refused.set_step_refused("the loss is inf");
  const absl::Status refused_itself = shard_->Push(self_refused, &r);
  EXPECT_EQ(refused_itself.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused_itself.message(),
              HasSubstr("worker:1 refused its own step 0: the loss is inf"));
  EXPECT_EQ(own.code(), absl::StatusCode::kFailedPrecondition) << own;
  EXPECT_THAT(own.message(), HasSubstr("the loss is inf"));
  EXPECT_EQ(shard_->Stats().pushes_accepted(), 0);

  // 3 workers, 2 to aggregate: one refusal leaves the step able to complete.
  Start(Config(proto::MODE_SYNC, 3, 2));
  absl::Status backup = absl::UnknownError("not called");
  shard_->Pull(req, clock_.Now() + absl::Minutes(10), &resp, [&](absl::Status s) { backup = s; });
  EXPECT_FALSE(shard_->Push(Push(2, 0, 0, Fill(6, NAN), Fill(4, 1)), &r).ok());
  EXPECT_EQ(backup.code(), absl::StatusCode::kUnknown) << "still waiting: " << backup;
  PushOk(Push(0, 0, 0, Fill(6, 1), Fill(4, 1)));
  PushOk(Push(1, 0, 0, Fill(6, 1), Fill(4, 1)));
  EXPECT_TRUE(backup.ok()) << backup;
  EXPECT_EQ(resp.version(), 1);
}

TEST_F(ShardTest, SyncPullWaitsForTheNextVersion) {
  Start(Config(proto::MODE_SYNC, 2));
  proto::PullRequest req;
  req.set_min_version(1);
  proto::PullResponse resp;
  absl::Status status = absl::UnknownError("not called");
  shard_->Pull(req, clock_.Now() + absl::Seconds(10), &resp, [&](absl::Status s) { status = s; });
  EXPECT_EQ(status.code(), absl::StatusCode::kUnknown) << "must wait";
  EXPECT_EQ(shard_->num_waiters(), 1);
  PushOk(Push(0, 0, 0, Fill(6, 1), Fill(4, 1)));
  EXPECT_EQ(shard_->num_waiters(), 1);
  PushOk(Push(1, 0, 0, Fill(6, 1), Fill(4, 1)));
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(resp.version(), 1);
  EXPECT_EQ(tensor::FloatValues(resp.variables(0).tensor()), Fill(6, 0.5f));
}

TEST_F(ShardTest, WaitingPullsExpireAtTheirDeadlineAndOnShutdown) {
  Start(Config(proto::MODE_SYNC, 2));
  proto::PullRequest req;
  req.set_min_version(1);
  proto::PullResponse r1, r2;
  absl::Status s1 = absl::UnknownError(""), s2 = absl::UnknownError("");
  shard_->Pull(req, clock_.Now() + absl::Seconds(1), &r1, [&](absl::Status s) { s1 = s; });
  shard_->Pull(req, clock_.Now() + absl::Seconds(5), &r2, [&](absl::Status s) { s2 = s; });
  clock_.Advance(absl::Seconds(2));
  shard_->ExpireWaiters();
  EXPECT_EQ(s1.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(s1.message(), HasSubstr("version 1 not reached (the shard is at 0)"));
  EXPECT_EQ(s2.code(), absl::StatusCode::kUnknown);
  shard_->Shutdown();
  EXPECT_EQ(s2.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(shard_->num_waiters(), 0);
  // After shutdown nothing waits.
  absl::Status s3 = absl::UnknownError("");
  shard_->Pull(req, clock_.Now() + absl::Seconds(5), &r1, [&](absl::Status s) { s3 = s; });
  EXPECT_EQ(s3.code(), absl::StatusCode::kUnavailable);
}

TEST_F(ShardTest, MembershipCompletesOrDiscardsAHalfFilledStep) {
  Start(Config(proto::MODE_SYNC, 3));
  PushOk(Push(0, 0, 0, Fill(6, 2), Fill(4, 2)));
  PushOk(Push(1, 0, 0, Fill(6, 4), Fill(4, 4)));
  // worker 2 died: the chief lowers replicas_to_aggregate to 2.
  proto::UpdateMembershipRequest m;
  m.set_replicas_to_aggregate(2);
  proto::UpdateMembershipResponse mr;
  ASSERT_TRUE(shard_->UpdateMembership(m, &mr).ok());
  EXPECT_EQ(mr.version(), 1);
  EXPECT_EQ(Values("a"), Fill(6, 1.0f - 0.5f * 3));
  // The job ends with a half-filled step: the chief discards it.
  PushOk(Push(0, 1, 1, Fill(6, 2), Fill(4, 2)));
  m.Clear();
  m.set_partial(proto::UpdateMembershipRequest::DISCARD);
  ASSERT_TRUE(shard_->UpdateMembership(m, &mr).ok());
  EXPECT_EQ(mr.discarded(), 1);
  EXPECT_EQ(shard_->Stats().gradients_discarded(), 1);
  EXPECT_EQ(shard_->Stats().version(), 1);
  ExpectInvariant();
  m.Clear();
  m.set_replicas_to_aggregate(-1);
  EXPECT_EQ(shard_->UpdateMembership(m, &mr).code(), absl::StatusCode::kInvalidArgument);
  m.Clear();
  m.add_live_workers(7);
  EXPECT_EQ(shard_->UpdateMembership(m, &mr).code(), absl::StatusCode::kInvalidArgument);
}

// A membership change with one valid and one invalid part changes nothing:
// the accumulator still waits for 3 replicas.
TEST_F(ShardTest, AnInvalidMembershipChangeIsAllOrNothing) {
  Start(Config(proto::MODE_SYNC, 3));
  PushOk(Push(0, 0, 0, Fill(6, 2), Fill(4, 2)));
  PushOk(Push(1, 0, 0, Fill(6, 4), Fill(4, 4)));
  proto::UpdateMembershipRequest m;
  proto::UpdateMembershipResponse mr;
  m.set_replicas_to_aggregate(2);  // valid: would complete the step
  m.add_live_workers(0);
  m.add_live_workers(9);  // invalid
  EXPECT_EQ(shard_->UpdateMembership(m, &mr).code(), absl::StatusCode::kInvalidArgument);
  m.clear_live_workers();
  m.set_partial(static_cast<proto::UpdateMembershipRequest::Partial>(7));  // not an enum value
  absl::Status s = shard_->UpdateMembership(m, &mr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("partial 7 is not COMPLETE or DISCARD"));
  EXPECT_EQ(shard_->Stats().version(), 0);
  EXPECT_EQ(shard_->Stats().gradients_pending(), 2);
  // The third replica still completes the step.
  EXPECT_EQ(PushOk(Push(2, 0, 0, Fill(6, 0), Fill(4, 0))).outcome(), proto::PushResponse::APPLIED);
  EXPECT_EQ(shard_->Stats().version(), 1);
  ExpectInvariant();
}

// ---------------------------------------------------------------- async / ssp

TEST_F(ShardTest, AsyncAppliesOnArrivalAndRecordsStaleness) {
  Start(Config(proto::MODE_ASYNC, 2));
  EXPECT_EQ(PushOk(Push(0, 0, 0, Fill(6, 1), Fill(4, 1))).version(), 1);
  EXPECT_EQ(PushOk(Push(1, 0, 0, Fill(6, 1), Fill(4, 1))).version(),
            2);  // computed on 0: stale by 1
  EXPECT_EQ(PushOk(Push(0, 1, 1, Fill(6, 1), Fill(4, 1))).version(), 3);  // stale by 1
  EXPECT_EQ(PushOk(Push(1, 1, 3, Fill(6, 1), Fill(4, 1))).version(), 4);  // fresh
  proto::ShardStats s = shard_->Stats();
  EXPECT_EQ(s.staleness_histogram(0), 2);
  EXPECT_EQ(s.staleness_histogram(1), 2);
  EXPECT_EQ(s.staleness_max(), 1);
  EXPECT_DOUBLE_EQ(s.staleness_sum(), 2);
  EXPECT_EQ(Values("a"), Fill(6, 1.0f - 4 * 0.5f));
  ExpectInvariant();
}

TEST_F(ShardTest, AsyncUpdatesAMovingAverageOnEveryPush) {
  Start(Config(proto::MODE_ASYNC, 2), 1.0f, 2.0f, /*b_momentum=*/0.75f);
  const auto first = Push(0, 0, 0, Fill(6, 1), Fill(4, 10));
  EXPECT_EQ(PushOk(first).outcome(), proto::PushResponse::APPLIED);
  float b = KerasMovingAverage(2.0f, 10.0f, 0.75f);
  EXPECT_EQ(Values("b"), Fill(4, b));
  // Stale by one: still applied on arrival, with its own statistic.
  EXPECT_EQ(PushOk(Push(1, 0, 0, Fill(6, 1), Fill(4, -6))).outcome(), proto::PushResponse::APPLIED);
  b = KerasMovingAverage(b, -6.0f, 0.75f);
  EXPECT_EQ(Values("b"), Fill(4, b));
  EXPECT_EQ(Values("a"), Fill(6, 0.0f)) << "SGD twice: 1 - 0.5 - 0.5";
  // A retried push is not applied again; a non-finite statistic is refused.
  EXPECT_EQ(PushOk(first).outcome(), proto::PushResponse::DUPLICATE);
  proto::PushResponse r;
  EXPECT_EQ(shard_->Push(Push(0, 1, 2, Fill(6, 1), Fill(4, NAN)), &r).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Values("b"), Fill(4, b));
  proto::ShardStats s = shard_->Stats();
  EXPECT_EQ(s.version(), 2);
  EXPECT_EQ(s.gradients_applied(), 2);
  EXPECT_EQ(s.staleness_histogram(1), 1);
  ExpectInvariant();
}

// A frozen variable (a layer's with trainable=False) is a moving average of
// momentum 1: pushes are accepted and applied (the ledger and versions as
// usual), and it never changes, whatever its "gradient".
// A push without the frozen variable's gradient: pushes carry none.
proto::PushRequest PushWithoutB(int worker, int64_t step, int64_t version,
                                const std::vector<float>& a) {
  proto::PushRequest p = Push(worker, step, version, a, {});
  p.mutable_gradients()->RemoveLast();
  return p;
}

TEST_F(ShardTest, AFrozenVariableTakesNoGradientAndNeverChanges) {
  for (proto::TrainingMode mode : {proto::MODE_ASYNC, proto::MODE_SYNC}) {
    SCOPED_TRACE(proto::TrainingMode_Name(mode));
    Start(Config(mode, 2), 1.0f, 2.0f, /*b_momentum=*/1.0f);
    // A gradient for it is refused, whole: the trainable one's is not applied.
    proto::PushResponse r;
    absl::Status s = shard_->Push(Push(0, 0, 0, Fill(6, 1), Fill(4, 7)), &r);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr("\"b\": the variable is frozen"));
    EXPECT_EQ(Values("a"), Fill(6, 1.0f));
    // Pushes without it are applied; it keeps its value.
    PushOk(PushWithoutB(0, 0, 0, Fill(6, 1)));
    EXPECT_EQ(PushOk(PushWithoutB(1, 0, 0, Fill(6, 1))).outcome(), proto::PushResponse::APPLIED);
    EXPECT_EQ(Values("b"), Fill(4, 2.0f));
    // lr 0.5: async applies both pushes, sync their mean once.
    EXPECT_EQ(Values("a"), Fill(6, mode == proto::MODE_ASYNC ? 0.0f : 0.5f))
        << "the trainable one still trains";
    EXPECT_EQ(shard_->Stats().gradients_applied(), 2);
    ExpectInvariant();
    // A pull may leave it out (the worker holds it); a plain one brings it.
    proto::PullRequest skip;
    skip.set_skip_frozen(true);
    proto::PullResponse pulled;
    absl::Status status = absl::UnknownError("not called");
    shard_->Pull(skip, clock_.Now() + absl::Seconds(1), &pulled,
                 [&](absl::Status st) { status = st; });
    ASSERT_TRUE(status.ok()) << status;
    ASSERT_EQ(pulled.variables_size(), 1);
    EXPECT_EQ(pulled.variables(0).name(), "a");
    EXPECT_EQ(PullNow().variables_size(), 2);
  }
}

TEST_F(ShardTest, BadMovingAveragesAreInvalidAndChangeNothing) {
  Start(Config(proto::MODE_ASYNC, 1));
  auto create = [&](const std::string& name, float momentum, int times = 1) {
    proto::CreateVariablesRequest req;
    *req.add_variables() = Named("c", {2}, {1, 1});
    for (int i = 0; i < times; ++i) {
      proto::MovingAverage* m = req.add_moving_averages();
      m->set_variable(name);
      m->set_momentum(momentum);
    }
    proto::CreateVariablesResponse resp;
    return shard_->CreateVariables(req, &resp);
  };
  const std::string before = PullNow().SerializeAsString();
  EXPECT_EQ(create("unknown", 0.9f).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(create("unknown", 0.9f).message(), HasSubstr("\"unknown\""));
  EXPECT_EQ(create("c", 0.9f, 2).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(create("c", NAN).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(create("c", 1.5f).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(create("c", -0.1f).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(shard_->Stats().num_variables(), 2) << "\"c\" must not be created";
  EXPECT_EQ(PullNow().SerializeAsString(), before);
  // "b" exists as trainable: as a moving average it is another spec.
  proto::CreateVariablesRequest req;
  *req.add_variables() = Named("b", kShapeB, Fill(4, 0));
  req.add_moving_averages()->set_variable("b");
  proto::CreateVariablesResponse resp;
  absl::Status s = shard_->CreateVariables(req, &resp);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("exists as trainable"));
  ASSERT_TRUE(create("c", 0.9f).ok());
  EXPECT_EQ(shard_->Stats().num_variables(), 3);
}

// The pull that starts a unit of `worker` at `clock` (ssp: it runs from
// then on); it must not wait.
void StartUnit(ps_server::Shard* shard, base::Clock* clock, int worker, int64_t at) {
  proto::PullRequest req;
  req.set_worker(worker);
  req.set_worker_clock(at);
  req.set_starts_unit(true);
  absl::Status started = absl::UnknownError("");
  proto::PullResponse resp;
  shard->Pull(req, clock->Now() + absl::Seconds(5), &resp,
              [&started](absl::Status st) { started = st; });
  EXPECT_TRUE(started.ok()) << started;
}

TEST_F(ShardTest, SspBlocksTheLeaderUntilTheSlowestCatchesUp) {
  Start(Config(proto::MODE_SSP, 2, 0, /*staleness=*/1));
  auto pull = [&](int worker, int64_t clock, absl::Status* status, proto::PullResponse* resp) {
    proto::PullRequest req;
    req.set_worker(worker);
    req.set_worker_clock(clock);
    shard_->Pull(req, clock_.Now() + absl::Seconds(30), resp,
                 [status](absl::Status s) { *status = s; });
  };
  // Both start a unit at step 0 (the pull that starts it).
  StartUnit(shard_.get(), &clock_, 0, 0);
  StartUnit(shard_.get(), &clock_, 1, 0);
  // Worker 0 finishes steps 0 and 1; worker 1 has finished none.
  PushOk(Push(0, 0, 0, Fill(6, 1), Fill(4, 1), 0, /*clock=*/1));
  PushOk(Push(0, 1, 1, Fill(6, 1), Fill(4, 1), 0, /*clock=*/2));
  proto::PullResponse r;
  absl::Status s = absl::UnknownError("");
  pull(0, 1, &s, &r);  // 1 ahead of the slowest (0): allowed
  EXPECT_TRUE(s.ok());
  s = absl::UnknownError("");
  pull(0, 2, &s, &r);  // 2 ahead: blocks
  EXPECT_EQ(s.code(), absl::StatusCode::kUnknown);
  // A push never blocks, and worker 1's push releases worker 0.
  PushOk(Push(1, 0, 0, Fill(6, 1), Fill(4, 1), 0, /*clock=*/1));
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(r.version(), 3);

  // The blocked pull expires on the fake clock; losing the slowest releases.
  s = absl::UnknownError("");
  pull(0, 3, &s, &r);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnknown);
  clock_.Advance(absl::Seconds(31));
  shard_->ExpireWaiters();
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(s.message(), HasSubstr("more than 1 steps ahead"));
  s = absl::UnknownError("");
  pull(0, 3, &s, &r);
  proto::UpdateMembershipRequest m;
  m.add_live_workers(0);  // worker 1 is lost
  proto::UpdateMembershipResponse mr;
  ASSERT_TRUE(shard_->UpdateMembership(m, &mr).ok());
  EXPECT_TRUE(s.ok()) << s;
}

TEST_F(ShardTest, SspZeroIsLockStepAndLargeIsAsync) {
  Start(Config(proto::MODE_SSP, 2, 0, 0));
  StartUnit(shard_.get(), &clock_, 0, 0);
  StartUnit(shard_.get(), &clock_, 1, 0);
  PushOk(Push(0, 0, 0, Fill(6, 1), Fill(4, 1), 0, 1));
  proto::PullRequest req;
  req.set_worker(0);
  req.set_worker_clock(1);
  proto::PullResponse r;
  absl::Status s = absl::UnknownError("");
  shard_->Pull(req, clock_.Now() + absl::Seconds(5), &r, [&](absl::Status st) { s = st; });
  EXPECT_EQ(s.code(), absl::StatusCode::kUnknown) << "s=0: one step ahead must wait";
  PushOk(Push(1, 0, 0, Fill(6, 1), Fill(4, 1), 0, 1));
  EXPECT_TRUE(s.ok());

  Start(Config(proto::MODE_SSP, 2, 0, 1 << 30));
  StartUnit(shard_.get(), &clock_, 0, 0);
  StartUnit(shard_.get(), &clock_, 1, 0);
  for (int step = 0; step < 50; ++step)
    PushOk(Push(0, step, 0, Fill(6, 1), Fill(4, 1), 0, step + 1));
  req.set_worker_clock(50);
  s = absl::UnknownError("");
  shard_->Pull(req, clock_.Now() + absl::Seconds(5), &r, [&](absl::Status st) { s = st; });
  EXPECT_TRUE(s.ok()) << "a huge staleness never waits";
}

// The work queue: a worker whose unit ended holds no one back, and one
// that pushes as a lost worker (an heir) moves its own clock.
TEST_F(ShardTest, SspCountsOnlyRunningWorkersAndTheHeirsOwnClock) {
  Start(Config(proto::MODE_SSP, 3, 0, /*staleness=*/1));
  for (int w = 0; w < 3; ++w) StartUnit(shard_.get(), &clock_, w, 0);
  auto pushed = Push(1, 0, 0, Fill(6, 1), Fill(4, 1), 0, 1);
  pushed.set_ends_unit(true);  // worker 1's unit was one step
  PushOk(pushed);
  proto::PullRequest req;
  req.set_worker(0);
  req.set_worker_clock(2);
  proto::PullResponse r;
  absl::Status s = absl::UnknownError("");
  shard_->Pull(req, clock_.Now() + absl::Seconds(5), &r, [&](absl::Status st) { s = st; });
  EXPECT_EQ(s.code(), absl::StatusCode::kUnknown) << "workers 0 and 2 run at 0";
  // Worker 2 redoes worker 1's unit as worker 1: the push (a duplicate of
  // step 0) moves worker 2's clock, and ends its unit.
  auto heir = Push(1, 0, 0, Fill(6, 1), Fill(4, 1), 0, 1);
  heir.set_clock_worker(2);
  heir.set_ends_unit(true);
  proto::PushResponse out;
  ASSERT_TRUE(shard_->Push(heir, &out).ok());
  EXPECT_EQ(out.outcome(), proto::PushResponse::DUPLICATE);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnknown) << "worker 0 itself still runs at 0";
  PushOk(Push(0, 0, 0, Fill(6, 1), Fill(4, 1), 0, 1));
  EXPECT_TRUE(s.ok()) << "every other worker is idle: " << s;
  // Units started further on count from their first steps.
  auto last = Push(0, 1, 1, Fill(6, 1), Fill(4, 1), 0, 2);
  last.set_ends_unit(true);
  PushOk(last);
  StartUnit(shard_.get(), &clock_, 2, 10);
  req.set_worker_clock(12);
  req.set_starts_unit(true);
  s = absl::UnknownError("");
  shard_->Pull(req, clock_.Now() + absl::Seconds(5), &r, [&](absl::Status st) { s = st; });
  EXPECT_EQ(s.code(), absl::StatusCode::kUnknown) << "2 ahead of worker 2 at 10";
  StartUnit(shard_.get(), &clock_, 2, 11);
  EXPECT_TRUE(s.ok()) << s;
}

// ---------------------------------------------------------------- exactly once

TEST_F(ShardTest, RetriedPushesAreAppliedOnce) {
  for (proto::TrainingMode mode : {proto::MODE_ASYNC, proto::MODE_SYNC}) {
    Start(Config(mode, 1));
    auto p = Push(0, 0, 0, Fill(6, 1), Fill(4, 1));
    PushOk(p);
    for (int retry = 0; retry < 3; ++retry) {
      EXPECT_EQ(PushOk(p).outcome(), proto::PushResponse::DUPLICATE);
    }
    EXPECT_EQ(Values("a"), Fill(6, 0.5f));
    proto::ShardStats s = shard_->Stats();
    EXPECT_EQ(s.pushes_duplicate(), 3);
    EXPECT_EQ(s.pushes_accepted(), 1);
    EXPECT_EQ(s.gradients_applied(), 1);
    ExpectInvariant();
  }
}

TEST_F(ShardTest, StressSixteenThreadsOfAsyncPushes) {
  Start(Config(proto::MODE_ASYNC, 16, 0, 0, proto::OptimizerConfig::SGD, 1.0), 0.0f, 0.0f);
  constexpr int kThreads = 16, kPushes = 1000;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPushes; ++i) {
        // Integers: every order of float additions gives the exact sum.
        auto p =
            Push(t, /*step=*/i, /*version=*/0, Fill(6, static_cast<float>(t + 1)), Fill(4, 1.0f));
        proto::PushResponse r;
        if (!shard_->Push(p, &r).ok()) ++failures;
        if (i % 100 == 0 && !shard_->Push(p, &r).ok()) ++failures;  // an injected retry
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  proto::ShardStats s = shard_->Stats();
  EXPECT_EQ(s.pushes_accepted(), kThreads * kPushes);
  EXPECT_EQ(s.gradients_applied(), kThreads * kPushes);
  EXPECT_EQ(s.pushes_duplicate(), kThreads * kPushes / 100);
  EXPECT_EQ(s.version(), kThreads * kPushes);
  ExpectInvariant();
  // sum over threads of (t+1) * 1000 = 136 * 1000
  EXPECT_EQ(Values("a"), Fill(6, -136000.0f));
  EXPECT_EQ(Values("b"), Fill(4, -16000.0f));
}

// ---------------------------------------------------------------- validation

TEST_F(ShardTest, BadPushesAreRejectedAndChangeNothing) {
  Start(Config(proto::MODE_ASYNC, 2));
  PushOk(Push(0, 0, 0, Fill(6, 1), Fill(4, 1)));
  const std::string before = PullNow().SerializeAsString();
  const proto::ShardStats stats_before = shard_->Stats();
  struct Case {
    const char* name;
    std::function<void(proto::PushRequest*)> mutate;
    absl::StatusCode code;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"unknown variable", [](proto::PushRequest* p) { p->mutable_gradients(1)->set_name("zzz"); },
       absl::StatusCode::kNotFound, "no such variable"},
      {"shape",
       [](proto::PushRequest* p) { p->mutable_gradients(0)->mutable_tensor()->set_shape(0, 3); },
       absl::StatusCode::kInvalidArgument, "bytes of data for shape"},
      {"shape same size",
       [](proto::PushRequest* p) {
         p->mutable_gradients(0)->mutable_tensor()->set_shape(0, 3);
         p->mutable_gradients(0)->mutable_tensor()->set_shape(1, 2);
       },
       absl::StatusCode::kInvalidArgument, "has shape [3,2]; the variable has [2,3]"},
      {"dtype",
       [](proto::PushRequest* p) {
         p->mutable_gradients(0)->mutable_tensor()->set_dtype(proto::DT_INVALID);
       },
       absl::StatusCode::kInvalidArgument, "dtype"},
      {"bytes",
       [](proto::PushRequest* p) {
         p->mutable_gradients(1)->mutable_tensor()->mutable_data()->append("x");
       },
       absl::StatusCode::kInvalidArgument, "bytes of data"},
      {"missing", [](proto::PushRequest* p) { p->mutable_gradients()->RemoveLast(); },
       absl::StatusCode::kInvalidArgument, "lacks a gradient for \"b\""},
      {"twice", [](proto::PushRequest* p) { *p->mutable_gradients(1) = p->gradients(0); },
       absl::StatusCode::kInvalidArgument, "two gradients for \"a\""},
      {"nan",
       [](proto::PushRequest* p) {
         float nan = NAN;
         p->mutable_gradients(1)->mutable_tensor()->mutable_data()->replace(
             8, 4, reinterpret_cast<char*>(&nan), 4);
       },
       absl::StatusCode::kInvalidArgument, "non-finite value at element 2"},
      {"inf",
       [](proto::PushRequest* p) {
         float inf = INFINITY;
         p->mutable_gradients(0)->mutable_tensor()->mutable_data()->replace(
             0, 4, reinterpret_cast<char*>(&inf), 4);
       },
       absl::StatusCode::kInvalidArgument, "non-finite"},
      {"worker", [](proto::PushRequest* p) { p->mutable_id()->set_worker(2); },
       absl::StatusCode::kInvalidArgument, "worker 2 out of range"},
      {"negative step", [](proto::PushRequest* p) { p->mutable_id()->set_step(-1); },
       absl::StatusCode::kInvalidArgument, "push id: step -1 out of range"},
      // The ids a hostile client once got accepted (docs/reliability.md: Bounds).
      {"huge slot", [](proto::PushRequest* p) { p->mutable_id()->set_replica_slot(INT32_MAX); },
       absl::StatusCode::kInvalidArgument,
       "push id: replica_slot 2147483647 out of range [0, 65535]"},
      {"huge step", [](proto::PushRequest* p) { p->mutable_id()->set_step(INT64_MAX); },
       absl::StatusCode::kInvalidArgument, "push id: step 9223372036854775807 out of range"},
      {"huge unit", [](proto::PushRequest* p) { p->mutable_id()->set_unit(kMaxCount + 1); },
       absl::StatusCode::kInvalidArgument, "push id: unit"},
      {"clock worker", [](proto::PushRequest* p) { p->set_clock_worker(2); },
       absl::StatusCode::kInvalidArgument, "clock_worker 2 out of range [0, 2)"},
      {"negative clock worker", [](proto::PushRequest* p) { p->set_clock_worker(-1); },
       absl::StatusCode::kInvalidArgument, "clock_worker -1 out of range"},
      {"huge clock", [](proto::PushRequest* p) { p->set_worker_clock(kMaxCount + 1); },
       absl::StatusCode::kInvalidArgument, "worker_clock"},
      {"wrapping shape",
       [](proto::PushRequest* p) {
         p->mutable_gradients(0)->mutable_tensor()->set_shape(0, (int64_t{1} << 62) + 1);
         p->mutable_gradients(0)->mutable_tensor()->mutable_data()->resize(4);
       },
       absl::StatusCode::kInvalidArgument, "exceeds the limit"},
      {"negative version", [](proto::PushRequest* p) { p->set_computed_on_version(-1); },
       absl::StatusCode::kInvalidArgument, "computed_on_version"},
      {"future version", [](proto::PushRequest* p) { p->set_computed_on_version(99); },
       absl::StatusCode::kFailedPrecondition, "pull again"},
  };
  int rejected = 0;
  for (const Case& c : cases) {
    auto p = Push(1, 5, 1, Fill(6, 7), Fill(4, 7));
    c.mutate(&p);
    proto::PushResponse r;
    absl::Status s = shard_->Push(p, &r);
    EXPECT_EQ(s.code(), c.code) << c.name << ": " << s;
    EXPECT_THAT(s.message(), HasSubstr(c.message)) << c.name;
    ++rejected;
    EXPECT_EQ(PullNow().SerializeAsString(), before) << c.name << " changed the store";
  }
  proto::ShardStats s = shard_->Stats();
  EXPECT_EQ(s.requests_rejected(), rejected);
  EXPECT_EQ(s.pushes_accepted(), stats_before.pushes_accepted());
  // The same push, valid, is then accepted: no exactly-once state was spent.
  EXPECT_EQ(PushOk(Push(1, 5, 1, Fill(6, 7), Fill(4, 7))).outcome(), proto::PushResponse::APPLIED);
}

TEST_F(ShardTest, OversizedPushIsInvalidArgument) {
  proto::ConfigureRequest c = Config(proto::MODE_ASYNC, 1);
  c.mutable_policy()->set_max_request_bytes(30);  // a push is 40 bytes of gradients
  Start(c);
  const std::string before = PullNow().SerializeAsString();
  proto::PushResponse r;
  absl::Status s = shard_->Push(Push(0, 0, 0, Fill(6, 1), Fill(4, 1)), &r);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("push of 40 bytes exceeds the limit of 30"));
  EXPECT_EQ(PullNow().SerializeAsString(), before);
}

TEST_F(ShardTest, NonFiniteGradientsCanBeSkippedAndCounted) {
  proto::ConfigureRequest c = Config(proto::MODE_ASYNC, 1);
  c.mutable_policy()->set_skip_nonfinite(true);
  Start(c);
  auto r = PushOk(Push(0, 0, 0, {1, 1, 1, 1, 1, NAN}, Fill(4, 1)));
  EXPECT_EQ(r.outcome(), proto::PushResponse::SKIPPED_NONFINITE);
  EXPECT_EQ(Values("a"), Fill(6, 1.0f));
  EXPECT_EQ(shard_->Stats().gradients_nonfinite_skipped(), 1);
  EXPECT_EQ(shard_->Stats().pushes_accepted(), 0);
  ExpectInvariant();
}

TEST_F(ShardTest, BadPullsAreRejected) {
  Start(Config(proto::MODE_SSP, 2, 0, 1));
  auto pull = [&](proto::PullRequest req) {
    proto::PullResponse r;
    absl::Status status;
    shard_->Pull(req, clock_.Now() + absl::Seconds(1), &r, [&](absl::Status s) { status = s; });
    return status;
  };
  proto::PullRequest req;
  req.add_names("nope");
  EXPECT_EQ(pull(req).code(), absl::StatusCode::kNotFound);
  req.Clear();
  req.add_names("a");
  req.add_names("a");
  EXPECT_EQ(pull(req).code(), absl::StatusCode::kInvalidArgument);
  req.Clear();
  req.set_min_version(-1);
  EXPECT_EQ(pull(req).code(), absl::StatusCode::kInvalidArgument);
  req.Clear();
  req.set_worker(9);
  EXPECT_EQ(pull(req).code(), absl::StatusCode::kInvalidArgument);
  req.Clear();
  req.add_names("b");
  proto::PullResponse r;
  absl::Status status;
  shard_->Pull(req, clock_.Now() + absl::Seconds(1), &r, [&](absl::Status s) { status = s; });
  ASSERT_TRUE(status.ok());
  ASSERT_EQ(r.variables_size(), 1);
  EXPECT_EQ(r.variables(0).name(), "b");
}

// ReduceLROnPlateau: UpdateMembership sets the learning rate from the next
// step on; the stats say it; the configuration (and a chief's identical
// Configure) keeps the job's.
TEST_F(ShardTest, UpdateMembershipSetsTheLearningRate) {
  Start(Config(proto::MODE_ASYNC, 1));  // SGD, lr 0.5
  EXPECT_EQ(shard_->Stats().learning_rate(), 0.5);
  proto::UpdateMembershipRequest m;
  m.set_learning_rate(0.25);
  proto::UpdateMembershipResponse r;
  ASSERT_TRUE(shard_->UpdateMembership(m, &r).ok());
  EXPECT_EQ(shard_->Stats().learning_rate(), 0.25);
  PushOk(Push(0, 0, 0, Fill(6, 2), Fill(4, 2)));
  EXPECT_EQ(Values("a"), Fill(6, 1.0f - 0.25f * 2));
  proto::ConfigureRequest again = Config(proto::MODE_ASYNC, 1);
  EXPECT_TRUE(shard_->Configure(again).ok()) << "the same job's configuration";
  EXPECT_EQ(shard_->Stats().learning_rate(), 0.25);
  for (double bad : {-1.0, std::nan("")}) {
    m.set_learning_rate(bad);
    EXPECT_EQ(shard_->UpdateMembership(m, &r).code(), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(shard_->Stats().learning_rate(), 0.25);
}

// ---------------------------------------------------------------- checkpoints

class ShardCheckpointTest : public ShardTest {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/shard_ckpt_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
  }
  absl::Status Save(int64_t step) {
    proto::SaveCheckpointRequest req;
    req.set_directory(dir_);
    req.set_step(step);
    req.mutable_placement()->set_num_shards(1);
    proto::SaveCheckpointResponse resp;
    return shard_->SaveCheckpoint(req, &resp);
  }
  absl::Status Restore(int64_t step, proto::RestoreCheckpointResponse* resp = nullptr) {
    proto::RestoreCheckpointRequest req;
    req.set_directory(dir_);
    req.set_step(step);
    proto::RestoreCheckpointResponse local;
    return shard_->RestoreCheckpoint(req, resp ? resp : &local);
  }
  std::string dir_;
};

TEST_F(ShardCheckpointTest, RoundTripWithSlotsVersionAndExactlyOnceState) {
  Start(Config(proto::MODE_ASYNC, 2, 0, 0, proto::OptimizerConfig::ADAM, 0.01));
  PushOk(Push(0, 0, 0, Fill(6, 1), Fill(4, 2)));
  PushOk(Push(1, 0, 0, Fill(6, 3), Fill(4, 4)));
  ASSERT_TRUE(Save(2).ok());
  const std::string at_checkpoint = PullNow().SerializeAsString();
  // Work after the checkpoint...
  auto after = Push(0, 1, 1, Fill(6, 5), Fill(4, 5));
  PushOk(after);
  PushOk(Push(1, 1, 1, Fill(6, 5), Fill(4, 5)));
  ASSERT_NE(PullNow().SerializeAsString(), at_checkpoint);
  // ...is forgotten by the restore,
  proto::RestoreCheckpointResponse resp;
  ASSERT_TRUE(Restore(-1, &resp).ok());
  EXPECT_EQ(resp.step(), 2);
  EXPECT_EQ(resp.version(), 2);
  EXPECT_EQ(resp.placement().num_shards(), 1);
  EXPECT_EQ(PullNow().SerializeAsString(), at_checkpoint);
  // and redone work is applied, not mistaken for a duplicate,
  EXPECT_EQ(PushOk(after).outcome(), proto::PushResponse::APPLIED);
  // while a push from before the checkpoint still is one.
  EXPECT_EQ(PushOk(Push(0, 0, 0, Fill(6, 1), Fill(4, 2))).outcome(),
            proto::PushResponse::DUPLICATE);
  // The Adam slots came back too: replaying the same push after the same
  // restore gives the same values.
  const std::string once = PullNow().SerializeAsString();
  ASSERT_TRUE(Restore(2).ok());
  PushOk(after);
  EXPECT_EQ(PullNow().SerializeAsString(), once);
}

TEST_F(ShardCheckpointTest, CorruptFilesAreCaughtAndTheLiveStateStays) {
  Start(Config(proto::MODE_ASYNC, 1));
  ASSERT_TRUE(Save(1).ok());
  PushOk(Push(0, 0, 0, Fill(6, 1), Fill(4, 1)));
  const std::string live = PullNow().SerializeAsString();
  const std::string data = dir_ + "/ckpt-1/shard-0-of-1.data";
  const std::string index = dir_ + "/ckpt-1/shard-0-of-1.index";
  auto read = [](const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  auto write = [](const std::string& p, const std::string& c) {
    std::ofstream(p, std::ios::binary) << c;
  };
  const std::string good_data = read(data), good_index = read(index);
  struct Case {
    const char* name;
    std::function<void()> damage;
    absl::StatusCode code;
  };
  const std::vector<Case> cases = {
      {"data truncated", [&] { write(data, good_data.substr(0, good_data.size() / 2)); },
       absl::StatusCode::kDataLoss},
      {"data flipped",
       [&] {
         std::string d = good_data;
         d[d.size() / 2] ^= 0x40;
         write(data, d);
       },
       absl::StatusCode::kDataLoss},
      {"data missing", [&] { std::filesystem::remove(data); }, absl::StatusCode::kDataLoss},
      {"index corrupt", [&] { write(index, "{not json"); }, absl::StatusCode::kDataLoss},
      {"index missing", [&] { std::filesystem::remove(index); }, absl::StatusCode::kNotFound},
  };
  for (const Case& c : cases) {
    write(data, good_data);
    write(index, good_index);
    c.damage();
    absl::Status s = Restore(1);
    EXPECT_EQ(s.code(), c.code) << c.name << ": " << s;
    EXPECT_THAT(s.message(), HasSubstr("shard-0-of-1")) << c.name;
    EXPECT_EQ(PullNow().SerializeAsString(), live) << c.name << " changed the live state";
  }
  write(data, good_data);
  write(index, good_index);
  EXPECT_TRUE(Restore(1).ok());
}

TEST_F(ShardCheckpointTest, AnotherShardCountOrOptimizerIsAClearError) {
  Start(Config(proto::MODE_ASYNC, 1));
  ASSERT_TRUE(Save(3).ok());
  // The same directory seen by a cluster of 2 shards.
  Shard two(ShardOptions{&clock_});
  auto c = Config(proto::MODE_ASYNC, 1);
  c.set_num_shards(2);
  ASSERT_TRUE(two.Configure(c).ok());
  proto::RestoreCheckpointRequest req;
  req.set_directory(dir_);
  req.set_step(3);
  proto::RestoreCheckpointResponse resp;
  absl::Status s = two.RestoreCheckpoint(req, &resp);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("1 shard"));
  // Another optimizer.
  Shard adam(ShardOptions{&clock_});
  ASSERT_TRUE(
      adam.Configure(Config(proto::MODE_ASYNC, 1, 0, 0, proto::OptimizerConfig::ADAM)).ok());
  s = adam.RestoreCheckpoint(req, &resp);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("written with optimizer SGD; this job uses ADAM"));
  // A fresh shard of the right shape restores (a restarted server).
  Shard fresh(ShardOptions{&clock_});
  ASSERT_TRUE(fresh.Configure(Config(proto::MODE_ASYNC, 1)).ok());
  EXPECT_TRUE(fresh.RestoreCheckpoint(req, &resp).ok());
  EXPECT_EQ(fresh.Stats().num_variables(), 2);
}

TEST_F(ShardCheckpointTest, ARestoredShardKeepsTheMovingAverageRule) {
  Start(Config(proto::MODE_ASYNC, 1), 1.0f, 2.0f, /*b_momentum=*/0.9f);
  PushOk(Push(0, 0, 0, Fill(6, 1), Fill(4, 10)));
  ASSERT_TRUE(Save(1).ok());
  const float b = Values("b")[0];
  // A restarted server restores without CreateVariables.
  shard_ = std::make_unique<Shard>(ShardOptions{&clock_});
  ASSERT_TRUE(shard_->Configure(Config(proto::MODE_ASYNC, 1)).ok());
  ASSERT_TRUE(Restore(1).ok());
  PushOk(Push(0, 1, 1, Fill(6, 1), Fill(4, 30)));
  EXPECT_EQ(Values("b"), Fill(4, KerasMovingAverage(b, 30.0f, 0.9f)));
  EXPECT_EQ(Values("a"), Fill(6, 0.0f)) << "SGD twice";
  // The rule is part of the restored spec.
  proto::CreateVariablesRequest req;
  *req.add_variables() = Named("b", kShapeB, Fill(4, 0));
  proto::CreateVariablesResponse resp;
  EXPECT_EQ(shard_->CreateVariables(req, &resp).code(), absl::StatusCode::kFailedPrecondition);
  proto::MovingAverage* m = req.add_moving_averages();
  m->set_variable("b");
  m->set_momentum(0.9f);
  ASSERT_TRUE(shard_->CreateVariables(req, &resp).ok());
  EXPECT_EQ(resp.existing(), 1);
}

// A reduced learning rate is part of the checkpoint: a restarted shard
// (configured with the job's rate) restores at the reduced one; a
// checkpoint from before the reduction brings the job's back.
TEST_F(ShardCheckpointTest, ALearningRateSetSinceConfigureIsInTheCheckpoint) {
  Start(Config(proto::MODE_ASYNC, 1));  // lr 0.5
  ASSERT_TRUE(Save(0).ok());
  proto::UpdateMembershipRequest m;
  m.set_learning_rate(0.125);
  proto::UpdateMembershipResponse r;
  ASSERT_TRUE(shard_->UpdateMembership(m, &r).ok());
  ASSERT_TRUE(Save(1).ok());
  Start(Config(proto::MODE_ASYNC, 1));  // a restarted shard: the job's rate
  EXPECT_EQ(shard_->Stats().learning_rate(), 0.5);
  ASSERT_TRUE(Restore(1).ok());
  EXPECT_EQ(shard_->Stats().learning_rate(), 0.125);
  PushOk(Push(0, 0, 0, Fill(6, 8), Fill(4, 8)));
  EXPECT_EQ(Values("a"), Fill(6, 1.0f - 0.125f * 8));
  ASSERT_TRUE(Restore(0).ok());
  EXPECT_EQ(shard_->Stats().learning_rate(), 0.5);
}

TEST_F(ShardCheckpointTest, KeepsTheNewestCheckpoints) {
  Start(Config(proto::MODE_ASYNC, 1));
  for (int step = 1; step <= 8; ++step) ASSERT_TRUE(Save(step).ok());
  std::vector<std::string> dirs;
  for (const auto& e : std::filesystem::directory_iterator(dir_))
    dirs.push_back(e.path().filename());
  std::sort(dirs.begin(), dirs.end());
  EXPECT_THAT(dirs, ::testing::ElementsAre("ckpt-4", "ckpt-5", "ckpt-6", "ckpt-7", "ckpt-8"));
  EXPECT_EQ(Restore(2).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Save(-1).code(), absl::StatusCode::kInvalidArgument);
}

// Through the file-system seam: a checkpoint that cannot be written is the
// caller's error, the live state goes on, and the older checkpoint stays.
TEST_F(ShardCheckpointTest, AFailedSaveLeavesTheStateAndTheOlderCheckpoint) {
  io::FaultyFileSystem fs;
  ShardOptions options{&clock_};
  options.fs = &fs;
  shard_ = std::make_unique<Shard>(options);
  ASSERT_TRUE(shard_->Configure(Config(proto::MODE_ASYNC, 1)).ok());
  proto::CreateVariablesRequest create;
  *create.add_variables() = Named("a", kShapeA, Fill(6, 1));
  *create.add_variables() = Named("b", kShapeB, Fill(4, 2));
  proto::CreateVariablesResponse created;
  ASSERT_TRUE(shard_->CreateVariables(create, &created).ok());
  ASSERT_TRUE(Save(1).ok());
  const std::string at_one = PullNow().SerializeAsString();
  PushOk(Push(0, 0, 0, Fill(6, 1), Fill(4, 1)));
  fs.Fail(io::Op::kWriteAtomically, "ckpt-2", absl::InternalError("No space left on device"));
  absl::Status saved = Save(2);
  EXPECT_EQ(saved.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(saved.message(), HasSubstr("No space left"));
  EXPECT_EQ(shard_->Stats().version(), 1) << "the live state is untouched";
  proto::RestoreCheckpointResponse resp;
  ASSERT_TRUE(Restore(-1, &resp).ok());
  EXPECT_EQ(resp.step(), 1);
  EXPECT_EQ(PullNow().SerializeAsString(), at_one);
}

// The bytes ExportState answers are the bytes SaveCheckpoint writes.
TEST_F(ShardCheckpointTest, AnExportedStateIsTheCheckpointsData) {
  Start(Config(proto::MODE_ASYNC, 2, 0, 0, proto::OptimizerConfig::ADAM, 0.01), 1.0f, 2.0f,
        /*b_momentum=*/0.9f);
  PushOk(Push(0, 0, 0, Fill(6, 1), Fill(4, 10)));
  PushOk(Push(1, 0, 0, Fill(6, 3), Fill(4, 20), /*slot=*/1));
  ASSERT_TRUE(Save(5).ok());
  auto file = checkpoint::ReadShardCheckpoint(dir_, 5, 0, 1);
  ASSERT_TRUE(file.ok()) << file.status();
  proto::ExportStateRequest req;
  req.set_step(5);
  req.mutable_placement()->set_num_shards(1);
  proto::ExportStateResponse resp;
  ASSERT_TRUE(shard_->ExportState(req, &resp).ok());
  EXPECT_EQ(resp.state(), file->data);
  EXPECT_EQ(resp.version(), 2);
}

// ---------------------------------------------------------------- exported state

class ShardStateTest : public ShardTest {
 protected:
  proto::ExportStateResponse Export(Shard& shard, int64_t step) {
    proto::ExportStateRequest req;
    req.set_step(step);
    req.mutable_placement()->set_num_shards(1);
    proto::ExportStateResponse resp;
    absl::Status s = shard.ExportState(req, &resp);
    EXPECT_TRUE(s.ok()) << s;
    return resp;
  }
  absl::Status Import(Shard& shard, const std::string& state, int64_t step,
                      proto::ImportStateResponse* resp = nullptr) {
    proto::ImportStateRequest req;
    req.set_state(state);
    req.set_step(step);
    proto::ImportStateResponse local;
    return shard.ImportState(req, resp != nullptr ? resp : &local);
  }
  // A shard configured with `config` and nothing else.
  std::unique_ptr<Shard> Configured(const proto::ConfigureRequest& config) {
    auto shard = std::make_unique<Shard>(ShardOptions{&clock_});
    EXPECT_TRUE(shard->Configure(config).ok());
    return shard;
  }
};

// A trained shard (Adam slots, a moving average, the ledger) exported and
// imported into a fresh shard of the same configuration: the two answer the
// same pull and give the same result for the same next push.
TEST_F(ShardStateTest, AnImportedShardAnswersAndTrainsAsTheExportingOne) {
  const proto::ConfigureRequest config =
      Config(proto::MODE_ASYNC, 2, 0, 0, proto::OptimizerConfig::ADAM, 0.01);
  Start(config, 1.0f, 2.0f, /*b_momentum=*/0.9f);
  const proto::PushRequest first = Push(0, 0, 0, Fill(6, 1), Fill(4, 10));
  PushOk(first);
  PushOk(Push(1, 0, 0, Fill(6, 3), Fill(4, 20), /*slot=*/1));
  PushOk(Push(0, 1, 2, Fill(6, -2), Fill(4, 30)));
  const proto::PullResponse trained = PullNow();
  ASSERT_EQ(trained.version(), 3);
  const proto::ExportStateResponse exported = Export(*shard_, 7);
  EXPECT_EQ(exported.version(), 3);
  // The state is a checkpoint: the slots are not zero, the rule is there.
  proto::ShardCheckpoint ckpt;
  ASSERT_TRUE(ckpt.ParseFromString(exported.state()));
  EXPECT_EQ(ckpt.step(), 7);
  EXPECT_EQ(ckpt.updates(), 3);
  ASSERT_EQ(ckpt.variables_size(), 2);
  for (const auto& v : ckpt.variables()) {
    if (v.name() == "a") {
      ASSERT_EQ(v.slots_size(), 2);  // Adam's m and v
      for (const proto::Tensor& slot : v.slots()) {
        EXPECT_NE(tensor::FloatValues(slot), Fill(6, 0.0f)) << "slots not trained";
      }
    } else {
      EXPECT_EQ(v.moving_average_momentum(), 0.9f);
    }
  }

  std::unique_ptr<Shard> peer = Configured(config);
  // A pull waiting on the peer for the exporter's version is served by the import.
  proto::PullRequest wait;
  wait.set_min_version(3);
  proto::PullResponse waited;
  absl::Status waited_status = absl::UnknownError("not called");
  peer->Pull(wait, clock_.Now() + absl::Seconds(30), &waited,
             [&](absl::Status s) { waited_status = s; });
  EXPECT_EQ(waited_status.code(), absl::StatusCode::kUnknown) << "version 0 waits";
  proto::ImportStateResponse imported;
  ASSERT_TRUE(Import(*peer, exported.state(), 7, &imported).ok());
  EXPECT_EQ(imported.version(), 3);
  EXPECT_EQ(imported.step(), 7);
  EXPECT_TRUE(waited_status.ok()) << waited_status;
  EXPECT_EQ(waited.SerializeAsString(), trained.SerializeAsString());
  EXPECT_EQ(PullFrom(*peer).SerializeAsString(), trained.SerializeAsString());
  EXPECT_EQ(peer->Stats().version(), 3);
  EXPECT_EQ(peer->Stats().num_variables(), 2);

  // The same next push on both: the same answer and the same variables.
  const proto::PushRequest next = Push(1, 1, 3, Fill(6, 0.5), Fill(4, 40), /*slot=*/1);
  proto::PushResponse here, there;
  ASSERT_TRUE(shard_->Push(next, &here).ok());
  ASSERT_TRUE(peer->Push(next, &there).ok());
  EXPECT_EQ(there.SerializeAsString(), here.SerializeAsString());
  EXPECT_EQ(there.outcome(), proto::PushResponse::APPLIED);
  EXPECT_NE(PullNow().SerializeAsString(), trained.SerializeAsString());
  EXPECT_EQ(PullFrom(*peer).SerializeAsString(), PullNow().SerializeAsString());
  // The exactly-once ledger came too.
  proto::PushResponse again;
  ASSERT_TRUE(peer->Push(first, &again).ok());
  EXPECT_EQ(again.outcome(), proto::PushResponse::DUPLICATE);
}

// ssp: the workers' clocks travel with the state.
TEST_F(ShardStateTest, TheSspClocksTravelWithTheState) {
  const proto::ConfigureRequest config = Config(proto::MODE_SSP, 2, 0, /*staleness=*/0);
  Start(config);
  PushOk(Push(0, 0, 0, Fill(6, 1), Fill(4, 1), 0, /*clock=*/1));
  PushOk(Push(1, 0, 0, Fill(6, 1), Fill(4, 1), 0, /*clock=*/1));
  std::unique_ptr<Shard> peer = Configured(config);
  ASSERT_TRUE(Import(*peer, Export(*shard_, 1).state(), 1).ok());
  // Worker 0 at clock 1 is not ahead of the slowest (clock 1, not 0).
  proto::PullRequest req;
  req.set_worker(0);
  req.set_worker_clock(1);
  proto::PullResponse resp;
  absl::Status status = absl::UnknownError("not called");
  peer->Pull(req, clock_.Now() + absl::Seconds(5), &resp, [&](absl::Status s) { status = s; });
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(resp.version(), 2);
}

// Bytes that do not verify, a snapshot of another step, another optimizer or
// shard: an error, and the importing shard stays exactly as it was.
TEST_F(ShardStateTest, ABadStateIsRefusedAndChangesNothing) {
  const proto::ConfigureRequest config = Config(proto::MODE_ASYNC, 1);
  Start(config);
  PushOk(Push(0, 0, 0, Fill(6, 1), Fill(4, 1)));
  const std::string state = Export(*shard_, 7).state();
  // The importing shard has a life of its own.
  std::unique_ptr<Shard> source = std::move(shard_);
  Start(config, 5.0f, 6.0f);
  const proto::PushRequest mine = Push(0, 3, 0, Fill(6, 2), Fill(4, 2));
  PushOk(mine);
  const std::string live = PullNow().SerializeAsString();
  auto unchanged = [&](const std::string& what) {
    EXPECT_EQ(PullNow().SerializeAsString(), live) << what << " changed the live state";
    EXPECT_EQ(shard_->Stats().version(), 1) << what;
    proto::PushResponse r;
    EXPECT_TRUE(shard_->Push(mine, &r).ok());
    EXPECT_EQ(r.outcome(), proto::PushResponse::DUPLICATE) << what << " replaced the ledger";
  };
  struct Case {
    const char* name;
    std::string state;
    int64_t step;
    absl::StatusCode code;
  };
  proto::ShardCheckpoint other_shard;
  ASSERT_TRUE(other_shard.ParseFromString(state));
  other_shard.set_num_shards(2);
  const std::vector<Case> cases = {
      {"garbage", "\xff\xfe not a checkpoint", 7, absl::StatusCode::kDataLoss},
      {"empty", "", 7, absl::StatusCode::kDataLoss},
      {"truncated", state.substr(0, state.size() / 2), 7, absl::StatusCode::kDataLoss},
      {"another step", state, 8, absl::StatusCode::kDataLoss},
      {"another shard count", other_shard.SerializeAsString(), 7, absl::StatusCode::kDataLoss},
      {"a negative step", state, -1, absl::StatusCode::kInvalidArgument},
  };
  for (const Case& c : cases) {
    absl::Status s = Import(*shard_, c.state, c.step);
    EXPECT_EQ(s.code(), c.code) << c.name << ": " << s;
    unchanged(c.name);
  }
  absl::Status s = Import(*shard_, state, 8);
  EXPECT_THAT(s.message(), HasSubstr("imported state of step 8 for shard 0 of 1"));

  // Another optimizer: FAILED_PRECONDITION, as a restore.
  Shard adam(ShardOptions{&clock_});
  ASSERT_TRUE(
      adam.Configure(Config(proto::MODE_ASYNC, 1, 0, 0, proto::OptimizerConfig::ADAM)).ok());
  s = Import(adam, state, 7);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("written with optimizer SGD; this job uses ADAM"));
  EXPECT_EQ(adam.Stats().num_variables(), 0);
  // The good state still imports.
  ASSERT_TRUE(Import(*shard_, state, 7).ok());
  EXPECT_EQ(PullNow().SerializeAsString(), PullFrom(*source).SerializeAsString());
}

TEST_F(ShardStateTest, AnUnconfiguredShardNeitherExportsNorImports) {
  Start(Config(proto::MODE_ASYNC, 1));
  const std::string state = Export(*shard_, 1).state();
  Shard fresh(ShardOptions{&clock_});
  proto::ExportStateRequest export_request;
  export_request.set_step(1);
  proto::ExportStateResponse exported;
  EXPECT_EQ(fresh.ExportState(export_request, &exported).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(exported.state().empty());
  EXPECT_EQ(Import(fresh, state, 1).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(fresh.Stats().num_variables(), 0);
  export_request.set_step(-1);
  EXPECT_EQ(shard_->ExportState(export_request, &exported).code(),
            absl::StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------- the ledger over a long job

// A push of (worker w, unit, step s) as a worker of the job sends it: slot w,
// units of 50 steps named by their first step.
proto::PushRequest JobPush(int worker, int64_t step) {
  proto::PushRequest p = Push(worker, step, 0, Fill(6, 0), Fill(4, 0), /*slot=*/worker);
  p.mutable_id()->set_unit(step / 50 * 50);
  return p;
}

// 200,000 async pushes from 4 workers through one shard: the ledger holds a
// watermark and one id per worker and slot, never one entry per push, and it
// rejects every duplicate before and after a checkpoint and its restore.
TEST_F(ShardCheckpointTest, TheLedgerStaysBoundedOverALongJob) {
  Start(Config(proto::MODE_ASYNC, 4));
  constexpr int kWorkers = 4;
  constexpr int64_t kSteps = 50000;  // per worker: 200,000 pushes in all
  constexpr int64_t kCheckpointAt = 30000;
  constexpr int64_t kBound = 2 * kWorkers;
  std::atomic<int64_t> largest{0}, failures{0}, duplicates{0};
  auto run = [&](int64_t from, int64_t to) {
    std::vector<std::thread> workers;
    for (int w = 0; w < kWorkers; ++w) {
      workers.emplace_back([&, w] {
        for (int64_t step = from; step < to; ++step) {
          proto::PushResponse r;
          if (!shard_->Push(JobPush(w, step), &r).ok() ||
              r.outcome() != proto::PushResponse::APPLIED) {
            ++failures;
          }
          if (step % 1000 == 999) {
            // A retry of this step and a late copy of an older one.
            for (int64_t again : {step, step - 500}) {
              if (!shard_->Push(JobPush(w, again), &r).ok()) ++failures;
              if (r.outcome() == proto::PushResponse::DUPLICATE) ++duplicates;
            }
            const int64_t held = shard_->Stats().ledger_entries();
            int64_t seen = largest.load();
            while (held > seen && !largest.compare_exchange_weak(seen, held)) {
            }
          }
        }
      });
    }
    for (auto& t : workers) t.join();
  };
  run(0, kCheckpointAt);
  ASSERT_TRUE(Save(kCheckpointAt).ok());
  run(kCheckpointAt, kSteps);
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(duplicates.load(), kWorkers * (kSteps / 1000) * 2);
  EXPECT_LE(largest.load(), kBound) << "the ledger grew with the steps";
  proto::ShardStats s = shard_->Stats();
  EXPECT_EQ(s.ledger_entries(), kBound);
  EXPECT_EQ(s.gradients_applied(), kWorkers * kSteps);
  EXPECT_EQ(s.pushes_duplicate(), kWorkers * (kSteps / 1000) * 2);
  ExpectInvariant();
  auto outcome = [&](int w, int64_t step) {
    proto::PushResponse r;
    EXPECT_TRUE(shard_->Push(JobPush(w, step), &r).ok());
    return r.outcome();
  };
  for (int w = 0; w < kWorkers; ++w) {
    EXPECT_EQ(outcome(w, 0), proto::PushResponse::DUPLICATE);
    EXPECT_EQ(outcome(w, kSteps - 1), proto::PushResponse::DUPLICATE);
  }
  // The restore forgets exactly what came after the checkpoint.
  ASSERT_TRUE(Restore(kCheckpointAt).ok());
  EXPECT_EQ(shard_->Stats().ledger_entries(), kBound);
  for (int w = 0; w < kWorkers; ++w) {
    EXPECT_EQ(outcome(w, 7), proto::PushResponse::DUPLICATE);
    EXPECT_EQ(outcome(w, kCheckpointAt - 1), proto::PushResponse::DUPLICATE);
    EXPECT_EQ(outcome(w, kCheckpointAt), proto::PushResponse::APPLIED) << "redone work is applied";
    EXPECT_EQ(outcome(w, kCheckpointAt), proto::PushResponse::DUPLICATE);
  }
  EXPECT_EQ(shard_->Stats().ledger_entries(), kBound);
  ExpectInvariant();
}

// A lost worker's unit redone by an heir under its ids while the lost
// worker, not dead but cut off, still pushes: the two send the same steps of
// the same unit in their own order, and each step of the slot is applied
// exactly once, whoever is first.
TEST_F(ShardTest, AnHeirAndTheWorkerItReplacesApplyEachStepOnce) {
  Start(Config(proto::MODE_ASYNC, 2));
  // Worker 1's unit at step 50: it pushed 50..53 before it was declared lost.
  for (int64_t step = 50; step < 54; ++step) PushOk(JobPush(1, step));
  int applied = 0, duplicates = 0;
  auto push = [&](int64_t step) {
    switch (PushOk(JobPush(1, step)).outcome()) {
      case proto::PushResponse::APPLIED:
        ++applied;
        break;
      case proto::PushResponse::DUPLICATE:
        ++duplicates;
        break;
      default:
        ADD_FAILURE() << "step " << step;
    }
  };
  // The heir redoes the unit from its first step; the old worker goes on
  // from step 54 meanwhile. Interleaved: heir 50..55, old 54..57, heir 56..59.
  for (int64_t step = 50; step < 56; ++step) push(step);
  for (int64_t step = 54; step < 58; ++step) push(step);
  for (int64_t step = 56; step < 60; ++step) push(step);
  EXPECT_EQ(applied, 6) << "steps 54..59, once each";
  EXPECT_EQ(duplicates, 4 + 2 + 2)
      << "the heir's 50..53, the old worker's 54..55, the heir's 56..57";
  EXPECT_EQ(shard_->Stats().gradients_applied(), 4 + 6);
  ExpectInvariant();
}

// A checkpoint whose ledger is malformed is DATA_LOSS naming the file, and
// the live state stays as it was.
TEST_F(ShardCheckpointTest, AMalformedLedgerIsDataLossAndChangesNothing) {
  Start(Config(proto::MODE_ASYNC, 2));
  PushOk(JobPush(0, 0));
  ASSERT_TRUE(Save(1).ok());
  PushOk(JobPush(0, 1));
  const std::string live = PullNow().SerializeAsString();
  auto file = checkpoint::ReadShardCheckpoint(dir_, 1, 0, 1);
  ASSERT_TRUE(file.ok()) << file.status();
  proto::ShardCheckpoint ckpt;
  ASSERT_TRUE(ckpt.ParseFromString(file->data));
  ckpt.mutable_ledger(0)->set_worker(-3);
  ASSERT_TRUE(checkpoint::WriteShardCheckpoint(dir_, 1, 0, 1, ckpt.SerializeAsString()).ok());
  absl::Status s = Restore(1);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("ckpt-1 shard 0 of 1"));
  EXPECT_EQ(PullNow().SerializeAsString(), live);
  EXPECT_EQ(PushOk(JobPush(0, 1)).outcome(), proto::PushResponse::DUPLICATE)
      << "the live ledger is the one before the failed restore";
}

// A checkpoint as builds before the ledger's watermarks wrote it: the list of
// every push seen, and no ledger. It restores, with the same verdicts.
TEST_F(ShardCheckpointTest, RestoresACheckpointWrittenBeforeTheLedgerHadWatermarks) {
  Start(Config(proto::MODE_ASYNC, 2, 0, 0, proto::OptimizerConfig::ADAM, 0.01));
  std::vector<proto::PushRequest> pushed;
  for (int64_t step = 0; step < 6; ++step) {
    for (int w = 0; w < 2; ++w) {
      pushed.push_back(JobPush(w, step));
      PushOk(pushed.back());
    }
  }
  ASSERT_TRUE(Save(6).ok());
  const std::string at_checkpoint = PullNow().SerializeAsString();
  // Rewrite the checkpoint in the old form.
  auto file = checkpoint::ReadShardCheckpoint(dir_, 6, 0, 1);
  ASSERT_TRUE(file.ok()) << file.status();
  proto::ShardCheckpoint ckpt;
  ASSERT_TRUE(ckpt.ParseFromString(file->data));
  ASSERT_EQ(ckpt.ledger_size(), 2);
  ckpt.clear_ledger();
  for (const proto::PushRequest& p : pushed) *ckpt.add_seen_pushes() = p.id();
  ASSERT_TRUE(checkpoint::WriteShardCheckpoint(dir_, 6, 0, 1, ckpt.SerializeAsString()).ok());
  // Work after it, then the restore.
  PushOk(JobPush(0, 6));
  ASSERT_TRUE(Restore(6).ok());
  EXPECT_EQ(PullNow().SerializeAsString(), at_checkpoint);
  for (const proto::PushRequest& p : pushed) {
    EXPECT_EQ(PushOk(p).outcome(), proto::PushResponse::DUPLICATE) << p.id().ShortDebugString();
  }
  EXPECT_EQ(PushOk(JobPush(0, 6)).outcome(), proto::PushResponse::APPLIED);
  EXPECT_EQ(PushOk(JobPush(1, 6)).outcome(), proto::PushResponse::APPLIED);
  EXPECT_EQ(shard_->Stats().ledger_entries(), 4);
}

}  // namespace
}  // namespace ps_server
}  // namespace psc
