#include "evaluator/test_checkpoints.h"

#include <unistd.h>

#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/checkpoint/checkpoint_files.h"
#include "common/ps_client/sharded_parameters.h"
#include "common/tensor/tensor.h"
#include "gtest/gtest.h"

namespace psc {
namespace evaluator {
namespace testing {

std::vector<std::vector<float>> TestValues(const std::vector<tensor::VariableShape>& variables,
                                           uint64_t seed) {
  std::vector<std::vector<float>> values;
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (const tensor::VariableShape& v : variables) {
    std::vector<float>& out = values.emplace_back(tensor::NumElements(v.shape));
    for (float& f : out) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      // Uniform in [-0.1, 0.1), never 0: small weights keep the loss finite.
      f = (static_cast<float>(x >> 40) / static_cast<float>(1 << 24) - 0.5f) * 0.2f + 1e-7f;
    }
  }
  return values;
}

absl::StatusOr<std::vector<proto::ShardCheckpoint>> MakeShardCheckpoints(
    const proto::Placement& placement, const std::vector<tensor::VariableShape>& variables,
    const std::vector<std::vector<float>>& values, int64_t step) {
  PSC_ASSIGN_OR_RETURN(auto sharded, ps_client::ShardedParameters::Create(placement, variables));
  std::vector<std::vector<proto::NamedTensor>> split;
  sharded.Split(values, &split);
  std::vector<proto::ShardCheckpoint> shards(placement.num_shards());
  for (int s = 0; s < placement.num_shards(); ++s) {
    proto::ShardCheckpoint& ckpt = shards[s];
    ckpt.set_format(1);
    ckpt.set_shard_index(s);
    ckpt.set_num_shards(placement.num_shards());
    ckpt.set_step(step);
    ckpt.set_version(step);
    ckpt.set_updates(step);
    ckpt.mutable_optimizer()->set_kind(proto::OptimizerConfig::SGD);
    ckpt.mutable_optimizer()->set_learning_rate(0.01);
    for (proto::NamedTensor& t : split[s]) {
      proto::ShardCheckpoint::Variable* v = ckpt.add_variables();
      v->set_name(t.name());
      *v->mutable_value() = t.tensor();
    }
    *ckpt.mutable_placement() = placement;
  }
  return shards;
}

absl::Status WriteShards(const std::string& root, int64_t step,
                         const std::vector<proto::ShardCheckpoint>& shards) {
  for (size_t s = 0; s < shards.size(); ++s) {
    std::string data;
    if (!shards[s].SerializeToString(&data)) return absl::InternalError("cannot serialize");
    PSC_ASSIGN_OR_RETURN(auto files,
                         checkpoint::WriteShardCheckpoint(root, step, static_cast<int>(s),
                                                          static_cast<int>(shards.size()), data));
  }
  return absl::OkStatus();
}

absl::Status WriteCheckpoint(const std::string& root, int64_t step,
                             const proto::Placement& placement,
                             const std::vector<tensor::VariableShape>& variables,
                             const std::vector<std::vector<float>>& values) {
  PSC_ASSIGN_OR_RETURN(auto shards, MakeShardCheckpoints(placement, variables, values, step));
  return WriteShards(root, step, shards);
}

std::string TestDir() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string dir =
      (std::filesystem::path(::testing::TempDir()) /
       absl::StrCat("evaluator_test.", ::getpid(), ".", info->test_suite_name(), ".", info->name()))
          .string();
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::filesystem::create_directories(dir, ec);
  return dir;
}

}  // namespace testing
}  // namespace evaluator
}  // namespace psc
