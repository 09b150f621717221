// The chief's evaluation of a model whose table is trained by rows: real
// shards (ps_server::ShardServer) make the table from the seed; the chief
// pulls the dense variables and each batch's rows, and reads the table in
// chunks for the digest. The results are a whole model's on the seed's
// variables.
#include "chief/evaluation_parameters.h"

#include <memory>
#include <string>
#include <vector>

#include "chief/shard_control.h"
#include "common/base/clock.h"
#include "common/base/status_macros.h"
#include "common/compute/cpu_backend.h"
#include "common/job/job_result.h"
#include "common/keras/keras_config.h"
#include "common/placement/placement.h"
#include "common/ps_client/testing/fake_parameter_client.h"
#include "gtest/gtest.h"
#include "ps_server/shard_server.h"

namespace psc {
namespace chief {
namespace {

// Every call of the chief's reaches a real shard, in this process.
class LocalShards : public ps_client::testing::FakeParameterClient {
 public:
  explicit LocalShards(int n) : FakeParameterClient(n) {
    for (int s = 0; s < n; ++s) {
      ps_server::ShardServerOptions o;
      o.task_index = s;
      o.shard.clock = &clock_;
      o.expiry_interval = absl::ZeroDuration();
      servers_.push_back(std::make_unique<ps_server::ShardServer>(o));
    }
  }
  absl::Status Configure(int s, const proto::ConfigureRequest& r) override {
    return servers_[s]->Configure(r);
  }
  absl::Status CreateVariables(int s, const proto::CreateVariablesRequest& r) override {
    proto::CreateVariablesResponse response;
    return servers_[s]->CreateVariables(r, &response);
  }
  absl::Status Pull(int s, const proto::PullRequest& r, proto::PullResponse* response,
                    absl::Duration) override {
    ++pulls_;
    return servers_[s]->PullBlocking(r, absl::InfiniteFuture(), response);
  }
  absl::Status PullAll(const std::vector<proto::PullRequest>& requests,
                       std::vector<proto::PullResponse>* responses, absl::Duration t) override {
    responses->resize(requests.size());
    for (size_t s = 0; s < requests.size(); ++s) {
      PSC_RETURN_IF_ERROR(Pull(static_cast<int>(s), requests[s], &(*responses)[s], t));
    }
    return absl::OkStatus();
  }
  int pulls() const { return pulls_; }

 private:
  base::RealClock clock_;
  std::vector<std::unique_ptr<ps_server::ShardServer>> servers_;
  int pulls_ = 0;
};

// Ids (3,) of a table of 10 rows of 2, flattened into a Dense.
constexpr char kModel[] = R"({"class_name": "Sequential", "config": {"name": "bag", "layers": [
  {"class_name": "InputLayer", "config": {"name": "ids", "batch_shape": [null, 3], "dtype": "int32"}},
  {"class_name": "Embedding", "config": {"name": "emb", "input_dim": 10, "output_dim": 2}},
  {"class_name": "Flatten", "config": {"name": "flat"}},
  {"class_name": "Dense", "config": {"name": "out", "units": 2}}]}})";

TEST(EvaluationParametersTest, ByRowsTheChiefEvaluatesAndDigestsAsAWholeModel) {
  auto model = keras::ModelFromKerasConfig(kModel, "bag");
  ASSERT_TRUE(model.ok()) << model.status();
  placement::PlacementOptions options;
  options.num_shards = 2;
  options.min_shard_bytes = 16;  // the table split over both
  proto::JobSpec job;
  job.set_seed(5);
  job.mutable_policy()->set_mode(proto::MODE_ASYNC);
  job.mutable_optimizer()->set_kind(proto::OptimizerConfig::SGD);
  job.mutable_optimizer()->set_learning_rate(0.1);
  auto placement = placement::PlaceVariables(model->variables(), options);
  ASSERT_TRUE(placement.ok()) << placement.status();
  ASSERT_EQ(placement->variables(0).parts_size(), 2);
  ASSERT_TRUE(placement::DeclareGradients(0, model->moving_averages(), &*placement,
                                          model->table_variables())
                  .ok());
  *job.mutable_placement() = *placement;
  auto sharded = ps_client::ShardedParameters::Create(*placement, model->variables());
  ASSERT_TRUE(sharded.ok()) << sharded.status();
  LocalShards servers(2);
  ShardControl control(&job, 1, &servers, &*sharded, &*model);
  ASSERT_TRUE(control.ConfigureAll().ok());
  ASSERT_TRUE(control.InitializeOrRestore("").ok());

  auto backend = compute::CreateCpuBackend({});
  ASSERT_TRUE(backend.ok());
  auto eval = EvaluationParameters::Create(&job, &*model, backend->get(), &servers, &*sharded,
                                           /*batch=*/3);
  ASSERT_TRUE(eval.ok()) << eval.status();
  ASSERT_TRUE((*eval)->by_rows());

  // 7 examples: batches of 3, 3 and 1, touching different rows.
  data::Split split;
  split.count = 7;
  split.pixels = {0, 1, 2, 9, 9, 8, 3, 3, 3, 4, 5, 6, 7, 0, 7, 1, 1, 1, 9, 0, 5};
  split.labels = {0, 1, 1, 0, 1, 0, 1};
  split.height = 3;
  split.width = 1;
  for (int i = 0; i < 256; ++i) split.table[i] = static_cast<float>(i);  // raw ids
  const int pulls_before = servers.pulls();
  auto got = (*eval)->Evaluate(split, absl::Seconds(10));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_GT(servers.pulls() - pulls_before, 2) << "rows are pulled batch by batch";

  // The whole model on the seed's variables.
  const std::vector<std::vector<float>> initial = model->Initialize(5);
  auto whole = compute::Executor::Create(&*model, backend->get());
  ASSERT_TRUE(whole.ok());
  ASSERT_TRUE((*whole)->SetParameters(initial).ok());
  auto want = job::EvaluateSplit(whole->get(), split, job::JobLoss(job), {}, 3);
  ASSERT_TRUE(want.ok()) << want.status();
  EXPECT_EQ(got->examples, 7);
  EXPECT_NEAR(got->loss, want->loss, 1e-6);
  EXPECT_EQ(got->accuracy, want->accuracy);

  std::vector<std::pair<std::string, absl::Span<const float>>> named;
  for (size_t v = 0; v < initial.size(); ++v) {
    named.emplace_back(model->variables()[v].name, initial[v]);
  }
  auto sha = (*eval)->Sha256(absl::Seconds(10), /*chunk_bytes=*/2 * 2 * 4);  // 2 rows
  ASSERT_TRUE(sha.ok()) << sha.status();
  EXPECT_EQ(*sha, job::VariablesSha256(named));
  auto one_chunk = (*eval)->Sha256(absl::Seconds(10));  // one chunk per part
  ASSERT_TRUE(one_chunk.ok()) << one_chunk.status();
  EXPECT_EQ(*one_chunk, *sha);
  EXPECT_FALSE((*eval)->Sha256(absl::Seconds(10), 0).ok());

  // An id beyond the table is refused, naming it.
  split.pixels[4] = 10;
  auto bad = (*eval)->Evaluate(split, absl::Seconds(10));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("id 10"), std::string::npos) << bad.status();
}

}  // namespace
}  // namespace chief
}  // namespace psc
