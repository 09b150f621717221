// A shard taking pushes in parts (push_parts.h): a step in parts trains bit
// for bit as the same step in whole pushes; every part is deduplicated; a bad
// part, or parts that do not make a whole push, change nothing.
#include <string>
#include <vector>

#include "common/tensor/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ps_server/shard.h"

namespace psc {
namespace ps_server {
namespace {

using ::testing::HasSubstr;

proto::NamedTensor Floats(const std::string& name, const std::vector<float>& values) {
  proto::NamedTensor t;
  t.set_name(name);
  tensor::SetFloatTensor({static_cast<int64_t>(values.size())}, values, t.mutable_tensor());
  return t;
}

// Three variables; the gradients of worker w at step s are distinct floats
// whose sum depends on the order of addition.
std::vector<float> GradOf(int w, int64_t step, int v) {
  std::vector<float> g;
  for (int i = 0; i < 2 + v; ++i)
    g.push_back(0.1f * (w + 1) + 1e-3f * static_cast<float>(step) + 0.37f * i + 1e-7f * v);
  return g;
}
const char* kNames[] = {"a", "b", "c"};

class ShardPushPartsTest : public ::testing::TestWithParam<proto::TrainingMode> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(Configure(&parts_).ok());
    ASSERT_TRUE(Configure(&whole_).ok());
  }

  absl::Status Configure(Shard* s) {
    proto::ConfigureRequest c;
    c.set_num_shards(1);
    c.set_num_workers(2);
    c.mutable_policy()->set_mode(GetParam());
    c.mutable_optimizer()->set_kind(proto::OptimizerConfig::ADAM);
    c.mutable_optimizer()->set_learning_rate(0.01);
    if (absl::Status st = s->Configure(c); !st.ok()) return st;
    proto::CreateVariablesRequest create;
    for (int v = 0; v < 3; ++v) {
      *create.add_variables() = Floats(kNames[v], std::vector<float>(2 + v, 0.5f * (v + 1)));
    }
    proto::CreateVariablesResponse created;
    return s->CreateVariables(create, &created);
  }

  static proto::PushRequest Push(int w, int64_t step, const std::vector<int>& variables,
                                 int part = 0, int num_parts = 0) {
    proto::PushRequest p;
    p.mutable_id()->set_worker(w);
    p.mutable_id()->set_replica_slot(w);
    p.mutable_id()->set_step(step);
    p.mutable_id()->set_part(part);
    p.mutable_id()->set_num_parts(num_parts);
    p.set_computed_on_version(step);
    p.set_worker_clock(step + 1);
    for (int v : variables) *p.add_gradients() = Floats(kNames[v], GradOf(w, step, v));
    return p;
  }

  static std::vector<std::vector<float>> Values(Shard& s) {
    proto::PullRequest req;
    proto::PullResponse resp;
    absl::Status status = absl::UnknownError("not called");
    base::RealClock clock;
    s.Pull(req, clock.Now() + absl::Seconds(1), &resp, [&](absl::Status st) { status = st; });
    EXPECT_TRUE(status.ok()) << status;
    std::vector<std::vector<float>> out;
    for (const auto& t : resp.variables()) out.push_back(tensor::FloatValues(t.tensor()));
    return out;
  }

  base::RealClock clock_;
  Shard parts_{ShardOptions{&clock_}};
  Shard whole_{ShardOptions{&clock_}};
};

TEST_P(ShardPushPartsTest, AStepInPartsTrainsAsTheSameStepInOnePush) {
  proto::PushResponse r;
  for (int64_t step = 0; step < 3; ++step) {
    // Worker 1 first, then worker 0: the sync sum's order is fixed anyway.
    for (int w : {1, 0}) {
      ASSERT_TRUE(whole_.Push(Push(w, step, {0, 1, 2}), &r).ok());
      // The backward pass makes the last variables first.
      ASSERT_TRUE(parts_.Push(Push(w, step, {2}, 0, 2), &r).ok());
      EXPECT_EQ(r.outcome(), proto::PushResponse::PART_RECEIVED);
      EXPECT_EQ(parts_.Stats().pushes_accepted(), whole_.Stats().pushes_accepted() - 1);
      ASSERT_TRUE(parts_.Push(Push(w, step, {0, 1}, 1, 2), &r).ok());
      EXPECT_NE(r.outcome(), proto::PushResponse::PART_RECEIVED);
    }
  }
  EXPECT_EQ(Values(parts_), Values(whole_));  // bit for bit
  const proto::ShardStats stats = parts_.Stats();
  EXPECT_EQ(stats.version(), whole_.Stats().version());
  EXPECT_EQ(stats.pushes_accepted(), 6);
  EXPECT_EQ(stats.push_parts_received(), 12);
  EXPECT_EQ(stats.push_parts_abandoned(), 0);
  EXPECT_EQ(stats.bytes_in(), whole_.Stats().bytes_in());
}

TEST_P(ShardPushPartsTest, EveryPartOfAWholePushIsADuplicate) {
  proto::PushResponse r;
  ASSERT_TRUE(parts_.Push(Push(0, 0, {2}, 0, 2), &r).ok());
  ASSERT_TRUE(parts_.Push(Push(0, 0, {2}, 0, 2), &r).ok());  // a retry while held
  EXPECT_EQ(r.outcome(), proto::PushResponse::DUPLICATE);
  ASSERT_TRUE(parts_.Push(Push(0, 0, {0, 1}, 1, 2), &r).ok());
  const auto after = Values(parts_);
  const int64_t version = parts_.Stats().version();
  for (int part : {0, 1}) {  // retries once whole: the ledger's
    ASSERT_TRUE(
        parts_
            .Push(Push(0, 0, part == 0 ? std::vector<int>{2} : std::vector<int>{0, 1}, part, 2), &r)
            .ok());
    EXPECT_EQ(r.outcome(), proto::PushResponse::DUPLICATE) << part;
  }
  EXPECT_EQ(Values(parts_), after);
  EXPECT_EQ(parts_.Stats().version(), version);
  EXPECT_EQ(parts_.Stats().pushes_duplicate(), 3);
  EXPECT_EQ(parts_.Stats().pushes_accepted(), 1);
}

TEST_P(ShardPushPartsTest, BadPartsAreRefusedAndChangeNothing) {
  proto::PushResponse r;
  ASSERT_TRUE(parts_.Push(Push(0, 0, {0}, 0, 3), &r).ok());
  const auto before = Values(parts_);
  // An unknown variable.
  proto::PushRequest unknown = Push(0, 0, {1}, 1, 3);
  unknown.mutable_gradients(0)->set_name("nope");
  EXPECT_EQ(parts_.Push(unknown, &r).code(), absl::StatusCode::kNotFound);
  // A variable an earlier part carried.
  absl::Status again = parts_.Push(Push(0, 0, {0}, 1, 3), &r);
  EXPECT_EQ(again.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(again.message(), HasSubstr("earlier part"));
  // A part index out of range.
  EXPECT_EQ(parts_.Push(Push(0, 0, {1}, 3, 3), &r).code(), absl::StatusCode::kInvalidArgument);
  // A wrong shape.
  proto::PushRequest shape = Push(0, 0, {1}, 1, 3);
  *shape.mutable_gradients(0) = Floats("b", {1.0f});
  EXPECT_EQ(parts_.Push(shape, &r).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(parts_.Stats().requests_rejected(), 4);
  EXPECT_EQ(parts_.Stats().push_parts_received(), 1);
  EXPECT_EQ(Values(parts_), before);
  // Parts that leave a variable out: the whole push is refused, nothing applied.
  ASSERT_TRUE(parts_.Push(Push(0, 0, {1}, 1, 3), &r).ok());
  absl::Status missing = parts_.Push(Push(0, 0, {}, 2, 3), &r);
  EXPECT_EQ(missing.code(), absl::StatusCode::kInvalidArgument) << missing;
  EXPECT_THAT(missing.message(), HasSubstr("\"c\""));
  EXPECT_EQ(parts_.Stats().pushes_accepted(), 0);
  EXPECT_EQ(parts_.Stats().version(), 0);
  EXPECT_EQ(Values(parts_), before);
  // And the push, sent right, goes through.
  for (int part = 0; part < 3; ++part) {
    ASSERT_TRUE(parts_.Push(Push(0, 0, {part}, part, 3), &r).ok());
  }
  EXPECT_EQ(parts_.Stats().pushes_accepted(), 1);
}

// DISCARD is sync's.
class ShardPushPartsSyncTest : public ShardPushPartsTest {};

TEST_P(ShardPushPartsSyncTest, ADiscardedStepDropsItsUnfinishedPushes) {
  proto::PushResponse r;
  ASSERT_TRUE(parts_.Push(Push(0, 0, {0, 1, 2}), &r).ok());  // worker 0 whole
  ASSERT_TRUE(parts_.Push(Push(1, 0, {2}, 0, 2), &r).ok());  // worker 1's first part
  proto::UpdateMembershipRequest m;
  m.set_replicas_to_aggregate(1);
  m.set_partial(proto::UpdateMembershipRequest::DISCARD);
  proto::UpdateMembershipResponse mr;
  ASSERT_TRUE(parts_.UpdateMembership(m, &mr).ok());
  EXPECT_EQ(mr.discarded(), 1);
  EXPECT_EQ(parts_.Stats().push_parts_abandoned(), 1);
  // Worker 1's second part alone is now the first part of a push.
  ASSERT_TRUE(parts_.Push(Push(1, 0, {0, 1}, 1, 2), &r).ok());
  EXPECT_EQ(r.outcome(), proto::PushResponse::PART_RECEIVED);
}

// Async applies each push on arrival.
class ShardPushPartsAsyncTest : public ShardPushPartsTest {};

TEST_P(ShardPushPartsAsyncTest, AppliesOnlyTheWholePush) {
  proto::PushResponse r;
  const auto before = Values(parts_);
  ASSERT_TRUE(parts_.Push(Push(0, 0, {1, 2}, 0, 2), &r).ok());
  EXPECT_EQ(Values(parts_), before);
  EXPECT_EQ(parts_.Stats().version(), 0);
  ASSERT_TRUE(parts_.Push(Push(0, 0, {0}, 1, 2), &r).ok());
  EXPECT_EQ(r.outcome(), proto::PushResponse::APPLIED);
  EXPECT_EQ(r.version(), 1);
  ASSERT_TRUE(whole_.Push(Push(0, 0, {0, 1, 2}), &r).ok());
  EXPECT_EQ(Values(parts_), Values(whole_));
}

INSTANTIATE_TEST_SUITE_P(Modes, ShardPushPartsTest,
                         ::testing::Values(proto::MODE_SYNC, proto::MODE_ASYNC, proto::MODE_SSP),
                         [](const auto& info) { return proto::TrainingMode_Name(info.param); });
INSTANTIATE_TEST_SUITE_P(Sync, ShardPushPartsSyncTest, ::testing::Values(proto::MODE_SYNC));
INSTANTIATE_TEST_SUITE_P(Async, ShardPushPartsAsyncTest, ::testing::Values(proto::MODE_ASYNC));

}  // namespace
}  // namespace ps_server
}  // namespace psc
