// Loss scaling on the shards (optimizer/loss_scale.h): a fake cluster of
// two shards, pushes flagged as overflows injected, and every shard
// deciding alike: sync skips the whole step, async and ssp the push; the
// scale halves, doubles after its growth steps, travels in pulls and push
// replies, and survives an exported and imported state.
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "common/base/clock.h"
#include "common/tensor/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ps_server/shard.h"
#include "ps_server/shard_server.h"

namespace psc {
namespace ps_server {
namespace {

using ::testing::HasSubstr;

proto::NamedTensor Named(const std::string& name, const std::vector<float>& values) {
  proto::NamedTensor t;
  t.set_name(name);
  tensor::SetFloatTensor({static_cast<int64_t>(values.size())}, values, t.mutable_tensor());
  return t;
}

proto::ConfigureRequest Config(int shard, proto::TrainingMode mode, int workers, bool loss_scale,
                               int64_t growth = 2) {
  proto::ConfigureRequest c;
  c.set_shard_index(shard);
  c.set_num_shards(2);
  c.set_num_workers(workers);
  c.mutable_policy()->set_mode(mode);
  if (mode == proto::MODE_SYNC) c.mutable_policy()->set_replicas_to_aggregate(workers);
  if (loss_scale) {
    c.mutable_policy()->mutable_loss_scale()->set_initial_scale(1024);
    c.mutable_policy()->mutable_loss_scale()->set_growth_steps(growth);
  }
  // Adam: a skipped step must not advance the optimizer's iterations
  // (its bias correction would show it).
  c.mutable_optimizer()->set_kind(proto::OptimizerConfig::ADAM);
  c.mutable_optimizer()->set_learning_rate(0.1);
  return c;
}

// A fake cluster of two shards; shard s holds one variable, "v<s>", of 3
// elements.
class TwoShards {
 public:
  void Start(proto::TrainingMode mode, int workers, bool loss_scale, int64_t growth = 2) {
    for (int s = 0; s < 2; ++s) {
      shards_[s] = std::make_unique<Shard>(ShardOptions{&clock_});
      ASSERT_TRUE(shards_[s]->Configure(Config(s, mode, workers, loss_scale, growth)).ok());
      proto::CreateVariablesRequest create;
      *create.add_variables() = Named(Var(s), {1.0f, 2.0f, 3.0f});
      proto::CreateVariablesResponse created;
      ASSERT_TRUE(shards_[s]->CreateVariables(create, &created).ok());
    }
  }
  static std::string Var(int s) { return absl::StrCat("v", s); }

  // Worker `worker`'s push of `step` to shard `s`, computed on `version`.
  proto::PushRequest PushOf(int s, int worker, int64_t step, int64_t version,
                            const std::vector<float>& grad, bool overflow) {
    proto::PushRequest p;
    p.mutable_id()->set_worker(worker);
    p.mutable_id()->set_step(step);
    p.mutable_id()->set_replica_slot(worker);
    p.set_computed_on_version(version);
    p.set_worker_clock(step + 1);
    *p.add_gradients() = Named(Var(s), grad);
    p.set_gradients_overflow(overflow);
    return p;
  }
  // The same push to both shards; the replies.
  std::vector<proto::PushResponse> PushBoth(int worker, int64_t step, int64_t version,
                                            const std::vector<float>& grad, bool overflow) {
    std::vector<proto::PushResponse> out(2);
    for (int s = 0; s < 2; ++s) {
      const absl::Status st =
          shards_[s]->Push(PushOf(s, worker, step, version, grad, overflow), &out[s]);
      EXPECT_TRUE(st.ok()) << st;
    }
    return out;
  }
  proto::PullResponse Pull(int s) {
    proto::PullRequest req;
    proto::PullResponse resp;
    absl::Status status = absl::UnknownError("not called");
    shards_[s]->Pull(req, clock_.Now() + absl::Seconds(1), &resp,
                     [&](absl::Status st) { status = st; });
    EXPECT_TRUE(status.ok()) << status;
    return resp;
  }
  std::vector<float> Values(int s) { return tensor::FloatValues(Pull(s).variables(0).tensor()); }

  base::FakeClock clock_;
  std::unique_ptr<Shard> shards_[2];
};

class ShardLossScaleTest : public ::testing::Test, public TwoShards {};

TEST_F(ShardLossScaleTest, SyncSkipsAStepWithAnOverflowOnEveryShardAlike) {
  Start(proto::MODE_SYNC, 2, true);
  // A twin cluster without loss scaling gets only the finite steps: the
  // skipped step must leave no trace (values, Adam's iterations).
  TwoShards twin;
  twin.Start(proto::MODE_SYNC, 2, false);
  const std::vector<float> g0 = {0.5f, -1.0f, 2.0f}, g1 = {1.5f, 0.25f, -2.0f};

  PushBoth(0, 0, 0, g0, false);
  PushBoth(1, 0, 0, g1, false);
  twin.PushBoth(0, 0, 0, g0, false);
  twin.PushBoth(1, 0, 0, g1, false);
  for (int s = 0; s < 2; ++s) EXPECT_EQ(Pull(s).loss_scale(), 1024.0) << "one finite step of 2";

  // Step 1: worker 0's gradient overflowed, worker 1's did not. Its values
  // are never read (they may even be Inf).
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<proto::PushResponse> first = PushBoth(0, 1, 1, {inf, 0.0f, 0.0f}, true);
  for (int s = 0; s < 2; ++s) EXPECT_EQ(first[s].outcome(), proto::PushResponse::ACCUMULATED);
  std::vector<proto::PushResponse> last = PushBoth(1, 1, 1, g1, false);
  for (int s = 0; s < 2; ++s) {
    EXPECT_EQ(last[s].outcome(), proto::PushResponse::SKIPPED_OVERFLOW) << s;
    EXPECT_EQ(last[s].version(), 2) << "the version advances: step 2 may be pulled";
    EXPECT_EQ(last[s].loss_scale(), 512.0) << "halved";
    const proto::PullResponse pulled = Pull(s);
    EXPECT_EQ(pulled.version(), 2);
    EXPECT_EQ(pulled.loss_scale(), 512.0);
    EXPECT_EQ(tensor::FloatValues(pulled.variables(0).tensor()), twin.Values(s))
        << "the skipped step changed nothing";
    const proto::ShardStats st = shards_[s]->Stats();
    EXPECT_EQ(st.steps_skipped_overflow(), 1);
    EXPECT_EQ(st.gradients_skipped_overflow(), 2) << "the finite gradient of the step too";
    EXPECT_EQ(st.updates(), 1);
    EXPECT_EQ(st.loss_scale(), 512.0);
    EXPECT_EQ(st.pushes_accepted(), st.gradients_applied() + st.gradients_dropped_stale() +
                                        st.gradients_discarded() + st.gradients_skipped_overflow() +
                                        st.gradients_pending());
  }

  // Steps 2 and 3 finite: the second doubles the scale (2 growth steps).
  for (int64_t step = 2; step < 4; ++step) {
    PushBoth(0, step, step, g0, false);
    PushBoth(1, step, step, g1, false);
    twin.PushBoth(0, step - 1, step - 1, g0, false);
    twin.PushBoth(1, step - 1, step - 1, g1, false);
  }
  for (int s = 0; s < 2; ++s) {
    EXPECT_EQ(Pull(s).loss_scale(), 1024.0) << "doubled after 2 finite steps";
    EXPECT_EQ(Values(s), twin.Values(s)) << "Adam's iterations skipped the overflow too";
    EXPECT_EQ(shards_[s]->Stats().updates(), 3);
  }
}

TEST_F(ShardLossScaleTest, AsyncSkipsTheFlaggedPushAndCountsItOnce) {
  Start(proto::MODE_ASYNC, 2, true, 3);
  const std::vector<float> g = {0.5f, -1.0f, 2.0f};
  PushBoth(0, 0, 0, g, false);
  const std::vector<float> before = Values(0);
  std::vector<proto::PushResponse> r = PushBoth(1, 0, 0, {0.0f, 0.0f, 0.0f}, true);
  for (int s = 0; s < 2; ++s) {
    EXPECT_EQ(r[s].outcome(), proto::PushResponse::SKIPPED_OVERFLOW);
    EXPECT_EQ(r[s].version(), 1) << "nothing applied";
    EXPECT_EQ(r[s].loss_scale(), 512.0);
  }
  EXPECT_EQ(Values(0), before);
  // The same push again (a retry): acknowledged, not counted again.
  r = PushBoth(1, 0, 0, {0.0f, 0.0f, 0.0f}, true);
  for (int s = 0; s < 2; ++s) {
    EXPECT_EQ(r[s].outcome(), proto::PushResponse::DUPLICATE);
    const proto::ShardStats st = shards_[s]->Stats();
    EXPECT_EQ(st.steps_skipped_overflow(), 1);
    EXPECT_EQ(st.gradients_skipped_overflow(), 1);
    EXPECT_EQ(st.loss_scale(), 512.0);
    EXPECT_EQ(st.pushes_accepted(), st.gradients_applied() + st.gradients_skipped_overflow());
  }
}

// Async: the other workers' steps in flight when the scale halved were
// computed at the old scale and overflow too; they are skipped, and do not
// halve it again.
TEST_F(ShardLossScaleTest, AsyncOverflowsAtAScaleAlreadyHalvedHalveItOnce) {
  Start(proto::MODE_ASYNC, 3, true, 2);
  for (int worker = 0; worker < 3; ++worker) {
    for (int s = 0; s < 2; ++s) {
      proto::PushRequest p = PushOf(s, worker, 0, 0, {0, 0, 0}, true);
      p.set_loss_scale(1024);  // what each computed with
      proto::PushResponse r;
      ASSERT_TRUE(shards_[s]->Push(p, &r).ok());
      EXPECT_EQ(r.outcome(), proto::PushResponse::SKIPPED_OVERFLOW);
    }
  }
  for (int s = 0; s < 2; ++s) {
    EXPECT_EQ(shards_[s]->Stats().loss_scale(), 512.0) << "halved once, not three times";
    EXPECT_EQ(shards_[s]->Stats().steps_skipped_overflow(), 3);
  }
  // A finite push computed at 1024 does not count toward doubling 512;
  // two at 512 do.
  for (int s = 0; s < 2; ++s) {
    proto::PushResponse r;
    proto::PushRequest old = PushOf(s, 0, 1, 0, {0.5f, 0.5f, 0.5f}, false);
    old.set_loss_scale(1024);
    ASSERT_TRUE(shards_[s]->Push(old, &r).ok());
    EXPECT_EQ(r.outcome(), proto::PushResponse::APPLIED);
    for (int worker = 1; worker < 3; ++worker) {
      proto::PushRequest now = PushOf(s, worker, 1, 1, {0.5f, 0.5f, 0.5f}, false);
      now.set_loss_scale(512);
      ASSERT_TRUE(shards_[s]->Push(now, &r).ok());
    }
    EXPECT_EQ(shards_[s]->Stats().loss_scale(), 1024.0);
  }
}

TEST_F(ShardLossScaleTest, AFlagWithoutLossScalingIsRefusedAndChangesNothing) {
  Start(proto::MODE_ASYNC, 1, false);
  proto::PushResponse r;
  const absl::Status st = shards_[0]->Push(PushOf(0, 0, 0, 0, {0, 0, 0}, true), &r);
  EXPECT_TRUE(absl::IsInvalidArgument(st)) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("no loss scaling"));
  EXPECT_EQ(shards_[0]->Stats().pushes_accepted(), 0);
  EXPECT_EQ(shards_[0]->Stats().version(), 0);
  EXPECT_EQ(Pull(0).loss_scale(), 0.0) << "none without loss scaling";
}

TEST_F(ShardLossScaleTest, ABadUsedScaleIsRefusedAndChangesNothing) {
  Start(proto::MODE_ASYNC, 1, true);
  for (float bad : {-1.0f, std::nanf(""), std::numeric_limits<float>::infinity()}) {
    proto::PushRequest p = PushOf(0, 0, 0, 0, {0, 0, 0}, true);
    p.set_loss_scale(bad);
    proto::PushResponse r;
    const absl::Status st = shards_[0]->Push(p, &r);
    EXPECT_TRUE(absl::IsInvalidArgument(st)) << bad;
    EXPECT_THAT(std::string(st.message()), HasSubstr("loss_scale")) << bad;
  }
  EXPECT_EQ(shards_[0]->Stats().loss_scale(), 1024.0);
  EXPECT_EQ(shards_[0]->Stats().pushes_accepted(), 0);
}

TEST_F(ShardLossScaleTest, AnUnflaggedNonFiniteGradientIsStillRefused) {
  Start(proto::MODE_ASYNC, 1, true);
  proto::PushResponse r;
  const absl::Status st = shards_[0]->Push(PushOf(0, 0, 0, 0, {std::nanf(""), 0, 0}, false), &r);
  EXPECT_TRUE(absl::IsInvalidArgument(st)) << st;
  EXPECT_EQ(shards_[0]->Stats().loss_scale(), 1024.0) << "not an overflow: the scale stays";
}

TEST_F(ShardLossScaleTest, BadConfigurationIsRefused) {
  Shard shard(ShardOptions{&clock_});
  proto::ConfigureRequest c = Config(0, proto::MODE_SYNC, 1, true);
  c.mutable_policy()->mutable_loss_scale()->set_initial_scale(0);
  absl::Status st = shard.Configure(c);
  EXPECT_TRUE(absl::IsInvalidArgument(st)) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("policy.loss_scale"));
  c = Config(0, proto::MODE_SYNC, 1, true);
  c.mutable_policy()->mutable_loss_scale()->set_growth_steps(0);
  EXPECT_TRUE(absl::IsInvalidArgument(shard.Configure(c)));
}

TEST_F(ShardLossScaleTest, TheScaleIsCheckpointedJobState) {
  Start(proto::MODE_SYNC, 1, true, 5);
  const std::vector<float> g = {0.5f, -1.0f, 2.0f};
  proto::PushResponse r;
  ASSERT_TRUE(shards_[0]->Push(PushOf(0, 0, 0, 0, g, true), &r).ok());   // halved: 512
  ASSERT_TRUE(shards_[0]->Push(PushOf(0, 0, 1, 1, g, false), &r).ok());  // 1 of 5
  ASSERT_TRUE(shards_[0]->Push(PushOf(0, 0, 2, 2, g, false), &r).ok());  // 2 of 5
  proto::ExportStateRequest req;
  req.set_step(3);
  proto::ExportStateResponse exported;
  ASSERT_TRUE(shards_[0]->ExportState(req, &exported).ok());

  Shard fresh(ShardOptions{&clock_});
  ASSERT_TRUE(fresh.Configure(Config(0, proto::MODE_SYNC, 1, true, 5)).ok());
  proto::ImportStateRequest import;
  import.set_state(exported.state());
  import.set_step(3);
  proto::ImportStateResponse imported;
  ASSERT_TRUE(fresh.ImportState(import, &imported).ok());
  EXPECT_EQ(fresh.Stats().loss_scale(), 512.0);
  EXPECT_EQ(fresh.Stats().steps_skipped_overflow(), 1);
  // Three more finite steps complete the 5 and double it, as on the
  // original.
  for (int64_t step = 3; step < 6; ++step) {
    ASSERT_TRUE(fresh.Push(PushOf(0, 0, step, step, g, false), &r).ok());
    ASSERT_TRUE(shards_[0]->Push(PushOf(0, 0, step, step, g, false), &r).ok());
  }
  EXPECT_EQ(fresh.Stats().loss_scale(), 1024.0);
  EXPECT_EQ(shards_[0]->Stats().loss_scale(), 1024.0);

  // A damaged state (a scale of 0) is refused and changes nothing.
  proto::ShardCheckpoint ckpt;
  ASSERT_TRUE(ckpt.ParseFromString(exported.state()));
  ckpt.mutable_loss_scale()->set_scale(0);
  import.set_state(ckpt.SerializeAsString());
  const absl::Status st = fresh.ImportState(import, &imported);
  EXPECT_TRUE(absl::IsDataLoss(st)) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("loss scale"));
  EXPECT_EQ(fresh.Stats().version(), 6);
}

TEST_F(ShardLossScaleTest, APushWithPullAfterBringsTheScale) {
  ShardServerOptions options;
  options.shard.clock = &clock_;
  options.expiry_interval = absl::ZeroDuration();
  ShardServer server(options);
  proto::ConfigureRequest c = Config(0, proto::MODE_SYNC, 1, true);
  c.set_num_shards(1);
  ASSERT_TRUE(server.Configure(c).ok());
  proto::CreateVariablesRequest create;
  *create.add_variables() = Named("v0", {1.0f, 2.0f, 3.0f});
  proto::CreateVariablesResponse created;
  ASSERT_TRUE(server.CreateVariables(create, &created).ok());
  proto::PushRequest p = PushOf(0, 0, 0, 0, {1, 1, 1}, true);
  p.set_pull_after(true);
  p.set_pull_min_version(1);
  proto::PushResponse r;
  ASSERT_TRUE(server.PushBlocking(p, absl::InfiniteFuture(), &r).ok());
  EXPECT_EQ(r.version(), 1);
  EXPECT_EQ(r.loss_scale(), 512.0);
  EXPECT_EQ(r.variables_size(), 1);
}

}  // namespace
}  // namespace ps_server
}  // namespace psc
