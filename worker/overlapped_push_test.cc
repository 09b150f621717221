#include "worker/overlapped_push.h"

#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/ps_client/testing/fake_parameter_client.h"
#include "common/tensor/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace worker {
namespace {

using ::testing::HasSubstr;

// "k" [4,2] split over two shards by rows (3 + 1), "b" [2] on shard 1.
proto::Placement TwoShards(bool b_on_shard_0 = false) {
  proto::Placement p;
  p.set_num_shards(2);
  proto::VariablePlacement* k = p.add_variables();
  k->set_name("k");
  k->add_shape(4);
  k->add_shape(2);
  for (int s = 0; s < 2; ++s) {
    auto* part = k->add_parts();
    part->set_shard_variable(s == 0 ? "k/part_0" : "k/part_1");
    part->set_shard(b_on_shard_0 ? 0 : s);
    part->set_first_axis_offset(s == 0 ? 0 : 3);
    part->set_first_axis_size(s == 0 ? 3 : 1);
  }
  proto::VariablePlacement* b = p.add_variables();
  b->set_name("b");
  b->add_shape(2);
  auto* b0 = b->add_parts();
  b0->set_shard_variable("b");
  b0->set_shard(b_on_shard_0 ? 0 : 1);
  b0->set_first_axis_size(2);
  return p;
}

const std::vector<tensor::VariableShape> kVariables = {{"k", {4, 2}}, {"b", {2}}};

// Records every part and pull; answers each part with its part index as the
// version, and each pull with its variables' values from values_ (filled
// with 100 * shard + the element's index) at version 8 + shard; with
// skip_frozen, without "k"'s pieces (frozen where a test makes it so).
class Recorder : public ps_client::testing::FakeParameterClient {
 public:
  Recorder() : FakeParameterClient(2) {}
  absl::Status Push(int shard, const proto::PushRequest& request, proto::PushResponse* response,
                    absl::Duration) override {
    absl::MutexLock lock(&mu_);
    sent_[shard].push_back(request);
    response->set_version(100 + request.id().part());
    return absl::OkStatus();
  }
  absl::Status Pull(int shard, const proto::PullRequest& request, proto::PullResponse* response,
                    absl::Duration) override {
    absl::MutexLock lock(&mu_);
    pulls_[shard].push_back(request);
    if (fail_pulls_) return absl::UnavailableError("ps gone");
    response->set_version(8 + shard);
    for (const std::string& name : request.names()) {
      if (request.skip_frozen() && name.rfind("k/", 0) == 0) continue;
      const int64_t n = name == "b" ? 2 : name == "k/part_0" ? 6 : 2;
      const std::vector<int64_t> shape =
          name == "b" ? std::vector<int64_t>{2} : std::vector<int64_t>{n / 2, 2};
      std::vector<float> values(n);
      for (int64_t i = 0; i < n; ++i) values[i] = static_cast<float>(100 * shard + i);
      proto::NamedTensor* t = response->add_variables();
      t->set_name(name);
      tensor::SetFloatTensor(shape, values, t->mutable_tensor());
    }
    return absl::OkStatus();
  }
  std::vector<proto::PushRequest> sent(int shard) {
    absl::MutexLock lock(&mu_);
    return sent_[shard];
  }
  std::vector<proto::PullRequest> pulls(int shard) {
    absl::MutexLock lock(&mu_);
    return pulls_[shard];
  }
  void set_fail_pulls(bool fail) {
    absl::MutexLock lock(&mu_);
    fail_pulls_ = fail;
  }

 private:
  absl::Mutex mu_;
  std::vector<proto::PushRequest> sent_[2] ABSL_GUARDED_BY(mu_);
  std::vector<proto::PullRequest> pulls_[2] ABSL_GUARDED_BY(mu_);
  bool fail_pulls_ ABSL_GUARDED_BY(mu_) = false;
};

std::vector<proto::PushRequest> Headers(bool pull = true) {
  std::vector<proto::PushRequest> h(2);
  for (int s = 0; s < 2; ++s) {
    h[s].mutable_id()->set_worker(1);
    h[s].mutable_id()->set_step(7);
    h[s].set_computed_on_version(7 + s);
    h[s].set_worker_clock(8);
    if (!pull) continue;
    h[s].set_pull_after(true);
    h[s].set_pull_min_version(8);
    h[s].set_pull_wire_dtype(proto::DT_BFLOAT16);
  }
  return h;
}

TEST(OverlappedPushTest, EachBucketGoesOutWhenReadyAndThePullFollowsInParts) {
  auto sharded = ps_client::ShardedParameters::Create(TwoShards(), kVariables);
  ASSERT_TRUE(sharded.ok());
  Recorder client;
  // "b" is made first; 4-byte buckets: one variable each.
  auto push = OverlappedPush::Create(&*sharded, {1, 0}, 4, &client, absl::Seconds(10));
  ASSERT_TRUE(push.ok()) << push.status();
  EXPECT_EQ((*push)->num_buckets(), 2);
  EXPECT_EQ((*push)->num_parts(0), 1);  // k/part_0
  EXPECT_EQ((*push)->num_parts(1), 2);  // b, then k/part_1
  std::vector<std::vector<float>> grads = {{1, 2, 3, 4, 5, 6, 7, 8}, {9, 10}};
  std::vector<std::vector<float>> params = {std::vector<float>(8, -1), {-1, -1}};
  for (int step = 0; step < 2; ++step) {
    (*push)->Begin(Headers(), proto::DT_FLOAT32, &grads);
    ASSERT_TRUE((*push)->Ready(1).ok());
    std::vector<proto::PushResponse> replies;
    ASSERT_TRUE((*push)->Ready(0).ok());
    ASSERT_TRUE((*push)->Finish(&replies).ok());
    EXPECT_EQ(replies[0].version(), 100);
    EXPECT_EQ(replies[1].version(), 101);
    EXPECT_EQ(replies[1].variables_size(), 0) << "the parts do not pull";
    ASSERT_TRUE((*push)->pulls_pending());
    EXPECT_EQ((*push)->pulled_version(0), 8);
    EXPECT_EQ((*push)->pulled_version(1), 9);
    // A new step's gradients cannot go out before the parameters are in.
    (*push)->Begin(Headers(), proto::DT_FLOAT32, &grads);
    EXPECT_EQ((*push)->Ready(1).code(), absl::StatusCode::kFailedPrecondition);
    // The forward pass takes "k" (both shards' pieces), then "b".
    ASSERT_TRUE((*push)->TakeVariable(0, &params).ok());
    EXPECT_EQ(params[0], (std::vector<float>{0, 1, 2, 3, 4, 5, 100, 101}));
    EXPECT_EQ(params[1], (std::vector<float>{-1, -1})) << "not taken yet";
    ASSERT_TRUE((*push)->TakeVariable(0, &params).ok()) << "taken once, then a no-op";
    ASSERT_TRUE((*push)->TakeVariable(1, &params).ok());
    EXPECT_EQ(params[1], (std::vector<float>{100, 101}));
    EXPECT_FALSE((*push)->pulls_pending());
    absl::Duration comm, exposed;
    (*push)->TakeTimes(&comm, &exposed);
    EXPECT_GE(comm, absl::ZeroDuration());
    params = {std::vector<float>(8, -1), {-1, -1}};
  }
  const std::vector<proto::PushRequest> s0 = client.sent(0), s1 = client.sent(1);
  ASSERT_EQ(s0.size(), 2u);
  ASSERT_EQ(s1.size(), 4u);
  EXPECT_EQ(s1[0].id().part(), 0);
  EXPECT_EQ(s1[0].id().num_parts(), 2);
  EXPECT_EQ(s1[0].gradients(0).name(), "b");
  EXPECT_EQ(s1[0].computed_on_version(), 8);
  EXPECT_EQ(s1[0].id().step(), 7);
  EXPECT_EQ(s1[1].id().part(), 1);
  EXPECT_EQ(s1[1].gradients(0).name(), "k/part_1");
  for (const auto& p : {s0[0], s1[0], s1[1]}) {
    EXPECT_FALSE(p.pull_after());
    EXPECT_EQ(p.pull_min_version(), 0);
  }
  EXPECT_EQ(s0[0].id().num_parts(), 1);
  EXPECT_EQ(s0[0].computed_on_version(), 7);
  // Each shard's pull, in parts, the first layers' first, as the header asked.
  const std::vector<proto::PullRequest> p0 = client.pulls(0), p1 = client.pulls(1);
  ASSERT_EQ(p0.size(), 2u);
  ASSERT_EQ(p1.size(), 4u);
  EXPECT_THAT(p0[0].names(), ::testing::ElementsAre("k/part_0"));
  EXPECT_THAT(p1[0].names(), ::testing::ElementsAre("k/part_1"));
  EXPECT_THAT(p1[1].names(), ::testing::ElementsAre("b"));
  for (const auto& p : {p0[0], p1[0], p1[1]}) {
    EXPECT_EQ(p.min_version(), 8);
    EXPECT_EQ(p.worker(), 1);
    EXPECT_EQ(p.worker_clock(), 8);
    EXPECT_EQ(p.wire_dtype(), proto::DT_BFLOAT16);
  }
}

// A frozen variable's pieces are still parts (their pulls bring them) but
// carry no gradient.
TEST(OverlappedPushTest, AFrozenVariablesPartsCarryNoGradientAndArePulled) {
  auto sharded = ps_client::ShardedParameters::Create(TwoShards(), kVariables, {true, false});
  ASSERT_TRUE(sharded.ok());
  Recorder client;
  auto push = OverlappedPush::Create(&*sharded, {1, 0}, 4, &client, absl::Seconds(10));
  ASSERT_TRUE(push.ok()) << push.status();
  EXPECT_EQ((*push)->num_parts(0), 1);                    // k/part_0, frozen
  EXPECT_EQ((*push)->num_parts(1), 2);                    // b, then k/part_1
  std::vector<std::vector<float>> grads = {{}, {9, 10}};  // "k"'s is never read
  (*push)->Begin(Headers(), proto::DT_FLOAT32, &grads);
  ASSERT_TRUE((*push)->Ready(1).ok());
  ASSERT_TRUE((*push)->Ready(0).ok());
  std::vector<proto::PushResponse> replies;
  ASSERT_TRUE((*push)->Finish(&replies).ok());
  const std::vector<proto::PushRequest> s0 = client.sent(0), s1 = client.sent(1);
  ASSERT_EQ(s0.size(), 1u);
  EXPECT_EQ(s0[0].gradients_size(), 0);
  EXPECT_EQ(s0[0].id().num_parts(), 1);
  ASSERT_EQ(s1.size(), 2u);
  ASSERT_EQ(s1[0].gradients_size(), 1);
  EXPECT_EQ(s1[0].gradients(0).name(), "b");
  EXPECT_EQ(s1[1].gradients_size(), 0) << "k/part_1 is frozen";
  EXPECT_EQ(s1[1].id().part(), 1);
  std::vector<std::vector<float>> params = {std::vector<float>(8, -1), {-1, -1}};
  ASSERT_TRUE((*push)->TakeVariable(0, &params).ok());
  EXPECT_EQ(params[0], (std::vector<float>{0, 1, 2, 3, 4, 5, 100, 101})) << "pulled all the same";
  EXPECT_THAT(client.pulls(0)[0].names(), ::testing::ElementsAre("k/part_0"));
  ASSERT_TRUE((*push)->TakeVariable(1, &params).ok());
  // Once the worker holds it, its pulls skip it and it stays as it is.
  std::vector<proto::PushRequest> headers = Headers();
  for (auto& h : headers) h.set_pull_skip_frozen(true);
  (*push)->Begin(headers, proto::DT_FLOAT32, &grads);
  ASSERT_TRUE((*push)->Ready(1).ok());
  ASSERT_TRUE((*push)->Ready(0).ok());
  ASSERT_TRUE((*push)->Finish(&replies).ok());
  params = {std::vector<float>(8, -1), {-1, -1}};
  ASSERT_TRUE((*push)->TakeVariable(0, &params).ok());
  ASSERT_TRUE((*push)->TakeVariable(1, &params).ok());
  EXPECT_EQ(params[0], std::vector<float>(8, -1)) << "kept";
  EXPECT_EQ(params[1], (std::vector<float>{100, 101}));
  EXPECT_TRUE(client.pulls(1).back().skip_frozen());
  EXPECT_FALSE(client.sent(1).back().pull_skip_frozen()) << "parts do not pull";
}

// Headers that do not pull: the parts alone, nothing pending after Finish.
TEST(OverlappedPushTest, WithoutAPullNothingIsPending) {
  auto sharded = ps_client::ShardedParameters::Create(TwoShards(), kVariables);
  ASSERT_TRUE(sharded.ok());
  Recorder client;
  auto push = OverlappedPush::Create(&*sharded, {1, 0}, 4, &client, absl::Seconds(10));
  ASSERT_TRUE(push.ok());
  std::vector<std::vector<float>> grads = {{1, 2, 3, 4, 5, 6, 7, 8}, {9, 10}};
  (*push)->Begin(Headers(/*pull=*/false), proto::DT_FLOAT32, &grads);
  ASSERT_TRUE((*push)->Ready(1).ok());
  ASSERT_TRUE((*push)->Ready(0).ok());
  std::vector<proto::PushResponse> replies;
  ASSERT_TRUE((*push)->Finish(&replies).ok());
  EXPECT_FALSE((*push)->pulls_pending());
  EXPECT_TRUE(client.pulls(0).empty());
  EXPECT_TRUE(client.pulls(1).empty());
}

// A pull that fails fails Finish (the first part) and leaves nothing
// pending; the next step runs normally.
TEST(OverlappedPushTest, AFailedPullEndsTheStep) {
  auto sharded = ps_client::ShardedParameters::Create(TwoShards(), kVariables);
  ASSERT_TRUE(sharded.ok());
  Recorder client;
  auto push = OverlappedPush::Create(&*sharded, {1, 0}, 4, &client, absl::Seconds(10));
  ASSERT_TRUE(push.ok());
  std::vector<std::vector<float>> grads = {{1, 2, 3, 4, 5, 6, 7, 8}, {9, 10}};
  std::vector<std::vector<float>> params(2);
  client.set_fail_pulls(true);
  (*push)->Begin(Headers(), proto::DT_FLOAT32, &grads);
  ASSERT_TRUE((*push)->Ready(1).ok());
  ASSERT_TRUE((*push)->Ready(0).ok());
  std::vector<proto::PushResponse> replies;
  EXPECT_EQ((*push)->Finish(&replies).code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE((*push)->pulls_pending());
  client.set_fail_pulls(false);
  (*push)->Begin(Headers(), proto::DT_FLOAT32, &grads);
  ASSERT_TRUE((*push)->Ready(1).ok());
  ASSERT_TRUE((*push)->Ready(0).ok());
  ASSERT_TRUE((*push)->Finish(&replies).ok());
  ASSERT_TRUE((*push)->TakeAll(&params).ok());
  EXPECT_EQ(params[1], (std::vector<float>{100, 101}));
  EXPECT_FALSE((*push)->pulls_pending());
  // Abandon with pulls pending: nothing pending afterwards.
  (*push)->Begin(Headers(), proto::DT_FLOAT32, &grads);
  ASSERT_TRUE((*push)->Ready(1).ok());
  ASSERT_TRUE((*push)->Ready(0).ok());
  ASSERT_TRUE((*push)->Finish(&replies).ok());
  ASSERT_TRUE((*push)->pulls_pending());
  (*push)->Abandon();
  EXPECT_FALSE((*push)->pulls_pending());
  absl::Duration comm = absl::Seconds(1), exposed = absl::Seconds(1);
  (*push)->TakeTimes(&comm, &exposed);
  EXPECT_EQ(comm, absl::ZeroDuration()) << "an abandoned unit's times are dropped";
  EXPECT_EQ(exposed, absl::ZeroDuration());
}

TEST(OverlappedPushTest, AMissingOrRepeatedGradientIsAnError) {
  auto sharded = ps_client::ShardedParameters::Create(TwoShards(), kVariables);
  ASSERT_TRUE(sharded.ok());
  Recorder client;
  auto push = OverlappedPush::Create(&*sharded, {1, 0}, 4, &client, absl::Seconds(10));
  ASSERT_TRUE(push.ok());
  std::vector<std::vector<float>> grads = {{1, 2, 3, 4, 5, 6, 7, 8}, {9, 10}};
  (*push)->Begin(Headers(), proto::DT_FLOAT32, &grads);
  ASSERT_TRUE((*push)->Ready(1).ok());
  EXPECT_EQ((*push)->Ready(1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*push)->Ready(2).code(), absl::StatusCode::kInvalidArgument);
  std::vector<proto::PushResponse> replies;
  absl::Status s = (*push)->Finish(&replies);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(s.message(), HasSubstr("1 of 2 gradient buckets"));
  EXPECT_EQ(client.sent(1).size(), 1u);  // the bucket that was ready went out
}

TEST(OverlappedPushTest, BadPlansAreRefused) {
  Recorder client;
  auto sharded = ps_client::ShardedParameters::Create(TwoShards(), kVariables);
  ASSERT_TRUE(sharded.ok());
  EXPECT_EQ(OverlappedPush::Create(&*sharded, {0}, 4, &client, absl::Seconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(OverlappedPush::Create(&*sharded, {0, 0}, 4, &client, absl::Seconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(OverlappedPush::Create(&*sharded, {0, 1}, 0, &client, absl::Seconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Everything on shard 0: shard 1 would get no part.
  auto lopsided = ps_client::ShardedParameters::Create(TwoShards(true), kVariables);
  ASSERT_TRUE(lopsided.ok()) << lopsided.status();
  absl::Status s =
      OverlappedPush::Create(&*lopsided, {0, 1}, 4, &client, absl::Seconds(1)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("ps:1 holds no variable"));
}

}  // namespace
}  // namespace worker
}  // namespace psc
