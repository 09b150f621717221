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
#include "chief/testing/local_shards.h"
#include "common/base/status_macros.h"
#include "common/compute/cpu_backend.h"
#include "common/job/job_result.h"
#include "common/keras/keras_config.h"
#include "gtest/gtest.h"

namespace psc {
namespace chief {
namespace {

using testing::LocalShards;

TEST(EvaluationParametersTest, ByRowsTheChiefEvaluatesAndDigestsAsAWholeModel) {
  auto model = keras::ModelFromKerasConfig(testing::kBagModel, "bag");
  ASSERT_TRUE(model.ok()) << model.status();
  LocalShards servers(2);
  proto::OptimizerConfig sgd;
  sgd.set_kind(proto::OptimizerConfig::SGD);
  sgd.set_learning_rate(0.1);
  auto started = testing::StartTableJob(*model, sgd, &servers);
  ASSERT_TRUE(started.ok()) << started.status();
  const proto::JobSpec& job = (*started)->job;
  const ps_client::ShardedParameters& sharded = *(*started)->sharded;
  ASSERT_EQ(job.placement().variables(0).parts_size(), 2);

  auto backend = compute::CreateCpuBackend({});
  ASSERT_TRUE(backend.ok());
  auto eval = EvaluationParameters::Create(&job, &*model, backend->get(), &servers, &sharded,
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
