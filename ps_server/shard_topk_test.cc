// A shard under --topk_ratio: a variable declared GRADIENT_TOP_K
// (ConfigureRequest.gradients) takes its gradient as a sparse tensor of
// exactly TopKCount values, applied as the dense gradient it stands for;
// one declared dense (a moving average's statistic always) stays dense. A push
// in the other form, or of another ratio, is refused before anything
// changes. The workers' error feedback rides in shard 0's checkpoint.
#include <filesystem>
#include <string>
#include <vector>

#include "common/tensor/tensor.h"
#include "common/tensor/topk.h"
#include "common/tensor/wire_dtype.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ps_server/shard.h"

namespace psc {
namespace ps_server {
namespace {

using ::testing::HasSubstr;

proto::NamedTensor Dense(const std::string& name, const std::vector<float>& values) {
  proto::NamedTensor t;
  t.set_name(name);
  tensor::SetFloatTensor({static_cast<int64_t>(values.size())}, values, t.mutable_tensor());
  return t;
}

proto::NamedTensor Sparse(const std::string& name, const std::vector<float>& values, int64_t k,
                          proto::DataType dtype = proto::DT_FLOAT32) {
  proto::NamedTensor t;
  t.set_name(name);
  EXPECT_TRUE(tensor::SetSparseTensor({static_cast<int64_t>(values.size())}, values,
                                      tensor::SelectTopK(values, k), dtype, t.mutable_tensor())
                  .ok());
  return t;
}

class ShardTopKTest : public ::testing::Test {
 protected:
  void SetUp() override {
    proto::ConfigureRequest c;
    c.set_num_shards(1);
    c.set_num_workers(2);
    c.mutable_policy()->set_mode(proto::MODE_ASYNC);
    c.mutable_policy()->set_topk_ratio(0.25);  // 8 elements: k = 2
    c.mutable_optimizer()->set_kind(proto::OptimizerConfig::SGD);
    c.mutable_optimizer()->set_learning_rate(1.0);
    proto::GradientDeclaration* d = c.add_gradients();
    d->set_variable("w");
    d->set_encoding(proto::GRADIENT_TOP_K);
    ASSERT_TRUE(shard_.Configure(c).ok());
    proto::CreateVariablesRequest create;
    *create.add_variables() = Dense("w", std::vector<float>(8, 1.0f));
    *create.add_variables() = Dense("mean", std::vector<float>(2, 0.0f));
    proto::MovingAverage* m = create.add_moving_averages();
    m->set_variable("mean");
    m->set_momentum(0.5f);
    proto::CreateVariablesResponse created;
    ASSERT_TRUE(shard_.CreateVariables(create, &created).ok());
  }

  proto::PushRequest PushOf(proto::NamedTensor w, proto::NamedTensor mean, int64_t step = 0) {
    proto::PushRequest p;
    p.mutable_id()->set_step(step);
    *p.add_gradients() = std::move(w);
    *p.add_gradients() = std::move(mean);
    return p;
  }

  std::vector<float> Values(int i) {
    proto::PullResponse resp;
    absl::Status status = absl::UnknownError("not called");
    shard_.Pull({}, clock_.Now() + absl::Seconds(1), &resp, [&](absl::Status s) { status = s; });
    EXPECT_TRUE(status.ok()) << status;
    return tensor::FloatValues(resp.variables(i).tensor());
  }

  base::RealClock clock_;
  Shard shard_{ShardOptions{&clock_}};
};

TEST_F(ShardTopKTest, ASparseGradientIsAppliedAsTheDenseOneItStandsFor) {
  const std::vector<float> g = {0.5f, -4.0f, 0.25f, 0.0f, 2.0f, -0.125f, 1.0f, 0.75f};
  proto::PushResponse response;
  ASSERT_TRUE(shard_.Push(PushOf(Sparse("w", g, 2), Dense("mean", {4.0f, 2.0f})), &response).ok());
  EXPECT_EQ(response.outcome(), proto::PushResponse::APPLIED);
  // The plain reference: w - lr * scatter(top-2 of g), the rest untouched.
  EXPECT_EQ(Values(0), (std::vector<float>{1, 5.0f, 1, 1, -1.0f, 1, 1, 1}));
  EXPECT_EQ(Values(1), (std::vector<float>{2.0f, 1.0f}));  // 0 * 0.5 + s * 0.5
  auto stats = shard_.Stats();
  EXPECT_EQ(stats.gradients_applied(), 1);
  // Two values and two indices, and the dense statistic.
  EXPECT_EQ(stats.bytes_in(), 2 * 4 + 2 * 4 + 2 * 4);
}

TEST_F(ShardTopKTest, APushInAnotherFormIsRefusedAndChangesNothing) {
  const std::vector<float> g = {0.5f, -4.0f, 0.25f, 0.0f, 2.0f, -0.125f, 1.0f, 0.75f};
  struct Case {
    const char* why;
    proto::PushRequest push;
    const char* says;
  };
  std::vector<Case> cases = {
      {"dense under top-k", PushOf(Dense("w", g), Dense("mean", {1, 1})), "carries 0 values"},
      {"another ratio", PushOf(Sparse("w", g, 3), Dense("mean", {1, 1})), "sends 2 of its 8"},
      {"a sparse statistic", PushOf(Sparse("w", g, 2), Sparse("mean", {1, 1}, 1)),
       "moving average's statistic travels dense"},
      {"another wire dtype", PushOf(Sparse("w", g, 2, proto::DT_BFLOAT16), Dense("mean", {1, 1})),
       "--wire_dtype"},
  };
  for (Case& c : cases) {
    proto::PushResponse response;
    absl::Status s = shard_.Push(c.push, &response);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.why;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.says)) << c.why;
  }
  EXPECT_EQ(Values(0), std::vector<float>(8, 1.0f));
  EXPECT_EQ(shard_.Stats().requests_rejected(), static_cast<int64_t>(cases.size()));
  EXPECT_EQ(shard_.Stats().pushes_accepted(), 0);
}

TEST(ShardTopKConfigTest, ABadRatioIsRefused) {
  base::RealClock clock;
  Shard shard{ShardOptions{&clock}};
  for (double bad : {-0.5, 1.0, 2.0}) {
    proto::ConfigureRequest c;
    c.set_num_shards(1);
    c.set_num_workers(1);
    c.mutable_policy()->set_mode(proto::MODE_SYNC);
    c.mutable_policy()->set_topk_ratio(bad);
    c.mutable_optimizer()->set_kind(proto::OptimizerConfig::SGD);
    absl::Status s = shard.Configure(c);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(s.message()), HasSubstr("topk_ratio"));
  }
}

TEST(ShardDenseTest, ASparsePushToADenseJobIsRefused) {
  base::RealClock clock;
  Shard shard{ShardOptions{&clock}};
  proto::ConfigureRequest c;
  c.set_num_shards(1);
  c.set_num_workers(1);
  c.mutable_policy()->set_mode(proto::MODE_ASYNC);
  c.mutable_optimizer()->set_kind(proto::OptimizerConfig::SGD);
  c.mutable_optimizer()->set_learning_rate(1.0);
  ASSERT_TRUE(shard.Configure(c).ok());
  proto::CreateVariablesRequest create;
  *create.add_variables() = Dense("w", std::vector<float>(4, 1.0f));
  proto::CreateVariablesResponse created;
  ASSERT_TRUE(shard.CreateVariables(create, &created).ok());
  proto::PushRequest p;
  *p.add_gradients() = Sparse("w", {1, 2, 3, 4}, 1);
  proto::PushResponse response;
  absl::Status s = shard.Push(p, &response);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("its variable is declared dense"));
}

// A configuration whose gradient declarations cannot hold: refused whole.
TEST(ShardTopKConfigTest, BadDeclarationsAreRefused) {
  base::RealClock clock;
  Shard shard{ShardOptions{&clock}};
  struct Case {
    double ratio;
    std::vector<std::pair<std::string, int>> declared;
    const char* says;
  };
  const std::vector<Case> cases = {
      {0, {{"w", proto::GRADIENT_TOP_K}}, "top-k, and the policy has no topk_ratio"},
      {0.5, {{"w", proto::GRADIENT_TOP_K}, {"w", proto::GRADIENT_TOP_K}}, "given twice"},
      {0.5, {{"", proto::GRADIENT_TOP_K}}, "without a variable name"},
      {0.5, {{"w", 77}}, "unknown encoding 77"},
  };
  for (const Case& k : cases) {
    proto::ConfigureRequest c;
    c.set_num_shards(1);
    c.set_num_workers(1);
    c.mutable_policy()->set_mode(proto::MODE_ASYNC);
    c.mutable_policy()->set_topk_ratio(k.ratio);
    c.mutable_optimizer()->set_kind(proto::OptimizerConfig::SGD);
    for (const auto& [name, encoding] : k.declared) {
      proto::GradientDeclaration* d = c.add_gradients();
      d->set_variable(name);
      d->set_encoding(static_cast<proto::GradientEncoding>(encoding));
    }
    absl::Status s = shard.Configure(c);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << k.says;
    EXPECT_THAT(std::string(s.message()), HasSubstr(k.says));
  }
}

TEST(ShardTopKConfigTest, AMovingAverageDeclaredSparseIsNotCreated) {
  base::RealClock clock;
  Shard shard{ShardOptions{&clock}};
  proto::ConfigureRequest c;
  c.set_num_shards(1);
  c.set_num_workers(1);
  c.mutable_policy()->set_mode(proto::MODE_ASYNC);
  c.mutable_policy()->set_topk_ratio(0.5);
  c.mutable_optimizer()->set_kind(proto::OptimizerConfig::SGD);
  proto::GradientDeclaration* d = c.add_gradients();
  d->set_variable("mean");
  d->set_encoding(proto::GRADIENT_TOP_K);
  ASSERT_TRUE(shard.Configure(c).ok());
  proto::CreateVariablesRequest create;
  *create.add_variables() = Dense("mean", {0, 0});
  proto::MovingAverage* m = create.add_moving_averages();
  m->set_variable("mean");
  m->set_momentum(0.5f);
  proto::CreateVariablesResponse created;
  absl::Status s = shard.CreateVariables(create, &created);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("\"mean\" is declared a sparse gradient"));
  EXPECT_EQ(shard.Stats().num_variables(), 0);
}

TEST_F(ShardTopKTest, ACheckpointKeepsTheWorkersErrorFeedback) {
  const std::string dir = ::testing::TempDir() + "/shard_topk_ckpt";
  std::filesystem::remove_all(dir);
  proto::SaveCheckpointRequest save;
  save.set_directory(dir);
  save.set_step(7);
  proto::ErrorFeedback* f = save.mutable_worker_state()->add_workers();
  f->set_worker(1);
  f->set_step(7);
  *f->add_residuals() = Dense("w", {0.5f, 0, 0, -0.25f, 0, 0, 0, 0});
  proto::SaveCheckpointResponse saved;
  ASSERT_TRUE(shard_.SaveCheckpoint(save, &saved).ok());
  proto::RestoreCheckpointRequest restore;
  restore.set_directory(dir);
  restore.set_step(-1);
  proto::RestoreCheckpointResponse restored;
  ASSERT_TRUE(shard_.RestoreCheckpoint(restore, &restored).ok());
  EXPECT_EQ(restored.step(), 7);
  ASSERT_EQ(restored.worker_state().workers_size(), 1);
  EXPECT_EQ(restored.worker_state().workers(0).SerializeAsString(), f->SerializeAsString());

  // Residuals that are not finite float32, or a worker twice: refused, and
  // nothing written.
  proto::SaveCheckpointRequest bad = save;
  bad.set_step(8);
  *bad.mutable_worker_state()->add_workers() = *f;
  EXPECT_EQ(shard_.SaveCheckpoint(bad, &saved).code(), absl::StatusCode::kInvalidArgument);
  bad = save;
  bad.set_step(8);
  bad.mutable_worker_state()->mutable_workers(0)->mutable_residuals(0)->mutable_tensor()->set_data(
      std::string(3, 'x'));
  EXPECT_EQ(shard_.SaveCheckpoint(bad, &saved).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(std::filesystem::exists(dir + "/ckpt-8"));
}

}  // namespace
}  // namespace ps_server
}  // namespace psc
