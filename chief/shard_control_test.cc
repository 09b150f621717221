// The CreateVariables requests the chief sends: every shard variable (every
// part) of a model variable that is a moving average is declared one, with
// its momentum, on the shard that holds it.
#include "chief/shard_control.h"

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "chief/testing/fakes.h"
#include "common/compute/model.h"
#include "common/keras/keras_config.h"
#include "common/placement/placement.h"
#include "common/tensor/initializer_spec.h"
#include "gtest/gtest.h"

namespace psc {
namespace chief {
namespace {

TEST(ShardMovingAveragesTest, EveryPartOfAMovingAverageOnItsShard) {
  const std::vector<tensor::VariableShape> variables = {{"dense/kernel", {64, 8}},
                                                        {"bn/gamma", {64}},
                                                        {"bn/moving_mean", {64}},
                                                        {"bn/moving_variance", {64}}};
  placement::PlacementOptions options;
  options.num_shards = 3;
  options.min_shard_bytes = 64;  // every variable split over the 3 shards
  auto placement = placement::PlaceVariables(variables, options);
  ASSERT_TRUE(placement.ok()) << placement.status();
  ASSERT_EQ(placement->variables(2).parts_size(), 3) << "the test wants a partitioned variable";
  const std::vector<std::optional<float>> moving = {std::nullopt, std::nullopt, 0.99f, 0.9f};

  const auto per_shard = ShardMovingAverages(*placement, moving);
  ASSERT_EQ(per_shard.size(), 3u);
  std::map<std::string, std::pair<int, float>> got;  // shard variable -> shard, momentum
  for (int s = 0; s < 3; ++s) {
    for (const proto::MovingAverage& m : per_shard[s]) {
      EXPECT_TRUE(got.emplace(m.variable(), std::make_pair(s, m.momentum())).second)
          << m.variable() << " named twice";
    }
  }
  std::map<std::string, std::pair<int, float>> want;
  for (int v : {2, 3}) {
    for (const auto& part : placement->variables(v).parts()) {
      want[part.shard_variable()] = {part.shard(), *moving[v]};
    }
  }
  EXPECT_EQ(got, want);
  EXPECT_TRUE(got.count("bn/moving_mean/part_0"));
  EXPECT_TRUE(got.count("bn/moving_variance/part_2"));

  // A shorter list leaves the rest trainable; none: nothing.
  EXPECT_EQ(ShardMovingAverages(*placement, {std::nullopt, std::nullopt, 0.5f})[0].size(), 1u);
  for (const auto& shard : ShardMovingAverages(*placement, {})) EXPECT_TRUE(shard.empty());
}

TEST(ShardGradientDeclarationsTest, EveryPartOfATopKVariableIsDeclaredOnItsShard) {
  const std::vector<tensor::VariableShape> variables = {
      {"dense/kernel", {64, 8}}, {"bn/gamma", {64}}, {"bn/moving_mean", {64}}};
  placement::PlacementOptions options;
  options.num_shards = 2;
  options.min_shard_bytes = 64;  // every variable split over both shards
  auto placement = placement::PlaceVariables(variables, options);
  ASSERT_TRUE(placement.ok()) << placement.status();
  // Without --topk_ratio nothing is declared; with it, the trainable ones.
  ASSERT_TRUE(placement::DeclareGradients(0, {std::nullopt, std::nullopt, 0.9f}, &*placement).ok());
  for (const auto& shard : ShardGradientDeclarations(*placement)) EXPECT_TRUE(shard.empty());
  ASSERT_TRUE(
      placement::DeclareGradients(0.1, {std::nullopt, std::nullopt, 0.9f}, &*placement).ok());
  EXPECT_EQ(placement->variables(2).gradient(), proto::GRADIENT_DENSE);
  const auto per_shard = ShardGradientDeclarations(*placement);
  ASSERT_EQ(per_shard.size(), 2u);
  std::map<std::string, int> got;  // shard variable -> shard
  for (int s = 0; s < 2; ++s) {
    for (const proto::GradientDeclaration& d : per_shard[s]) {
      EXPECT_EQ(d.encoding(), proto::GRADIENT_TOP_K) << d.variable();
      EXPECT_TRUE(got.emplace(d.variable(), s).second) << d.variable() << " named twice";
    }
  }
  std::map<std::string, int> want;
  for (int v : {0, 1}) {
    for (const auto& part : placement->variables(v).parts()) {
      want[part.shard_variable()] = part.shard();
    }
  }
  EXPECT_EQ(got, want);
  // A model that does not match the placement is refused.
  EXPECT_FALSE(placement::DeclareGradients(0.1, {std::nullopt}, &*placement).ok());
}

// A mixed model's float32 variables (DeclareFloat32Pulls): every part is
// declared on its shard as pulled in float32, with its gradient's encoding.
TEST(ShardGradientDeclarationsTest, EveryPartOfAFloat32PulledVariableIsDeclared) {
  const std::vector<tensor::VariableShape> variables = {{"dense/kernel", {64, 8}},
                                                        {"bn/gamma", {64}}};
  placement::PlacementOptions options;
  options.num_shards = 2;
  options.min_shard_bytes = 64;
  auto placement = placement::PlaceVariables(variables, options);
  ASSERT_TRUE(placement.ok()) << placement.status();
  ASSERT_TRUE(placement::DeclareGradients(0, {std::nullopt, std::nullopt}, &*placement).ok());
  ASSERT_TRUE(placement::DeclareFloat32Pulls({false, true}, &*placement).ok());
  std::map<std::string, int> got;
  const auto per_shard = ShardGradientDeclarations(*placement);
  for (int s = 0; s < 2; ++s) {
    for (const proto::GradientDeclaration& d : per_shard[s]) {
      EXPECT_TRUE(d.pull_float32()) << d.variable();
      EXPECT_EQ(d.encoding(), proto::GRADIENT_DENSE) << d.variable();
      got[d.variable()] = s;
    }
  }
  std::map<std::string, int> want;
  for (const auto& part : placement->variables(1).parts())
    want[part.shard_variable()] = part.shard();
  EXPECT_EQ(got, want);
  EXPECT_EQ(want.size(), 2u) << "bn/gamma split over both shards";
  EXPECT_FALSE(placement::DeclareFloat32Pulls({true}, &*placement).ok());
}

// The wiring: InitializeOrRestore sends each shard its variables and the
// moving averages among them (the built-in mlp has none).
TEST(ShardControlTest, InitializeCreatesEveryShardsVariablesWithTheirRules) {
  auto model = keras::BuiltinModel("mlp");
  ASSERT_TRUE(model.ok()) << model.status();
  placement::PlacementOptions options;
  options.num_shards = 2;
  options.min_shard_bytes = 1 << 10;
  proto::JobSpec job;
  job.set_model("mlp");
  job.set_seed(3);
  auto placement = placement::PlaceVariables(model->variables(), options);
  ASSERT_TRUE(placement.ok()) << placement.status();
  *job.mutable_placement() = *placement;
  auto sharded = ps_client::ShardedParameters::Create(*placement, model->variables());
  ASSERT_TRUE(sharded.ok()) << sharded.status();
  testing::RecordingParameterClient servers(2);
  ShardControl control(&job, 1, &servers, &*sharded, &*model);
  auto step = control.InitializeOrRestore("");
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(*step, 0);

  const auto creates = servers.creates();
  ASSERT_EQ(creates.size(), 2u);
  const auto expected = placement::ShardVariables(*placement);
  const auto moving = ShardMovingAverages(*placement, model->moving_averages());
  for (const auto& [shard, request] : creates) {
    std::vector<std::string> names, want;
    for (const auto& v : request.variables()) names.push_back(v.name());
    for (const auto& v : expected[shard]) want.push_back(v.name);
    EXPECT_EQ(names, want) << "shard " << shard;
    ASSERT_EQ(request.moving_averages_size(), static_cast<int>(moving[shard].size()));
    for (int i = 0; i < request.moving_averages_size(); ++i) {
      EXPECT_EQ(request.moving_averages(i).variable(), moving[shard][i].variable());
    }
  }
}

// From the seed, the chief sends no table: each shard makes its rows of
// it, the rows a standalone worker's Model::Initialize draws.
TEST(ShardControlTest, EachShardMakesItsRowsOfATableAsInitializeDrawsThem) {
  constexpr char kModel[] = R"({"class_name": "Sequential", "config": {"name": "bag", "layers": [
    {"class_name": "InputLayer", "config": {"name": "ids", "batch_shape": [null, 3], "dtype": "int32"}},
    {"class_name": "Embedding", "config": {"name": "emb", "input_dim": 10, "output_dim": 2}},
    {"class_name": "Flatten", "config": {"name": "flat"}},
    {"class_name": "Dense", "config": {"name": "out", "units": 2}}]}})";
  auto model = keras::ModelFromKerasConfig(kModel, "bag");
  ASSERT_TRUE(model.ok()) << model.status();
  placement::PlacementOptions options;
  options.num_shards = 2;
  options.min_shard_bytes = 16;  // the table split over both
  auto placement = placement::PlaceVariables(model->variables(), options);
  ASSERT_TRUE(placement.ok()) << placement.status();
  ASSERT_EQ(placement->variables(0).parts_size(), 2);
  proto::JobSpec job;
  job.set_seed(11);
  *job.mutable_placement() = *placement;
  auto sharded = ps_client::ShardedParameters::Create(*placement, model->variables());
  ASSERT_TRUE(sharded.ok()) << sharded.status();
  testing::RecordingParameterClient servers(2);
  ShardControl control(&job, 1, &servers, &*sharded, &*model);
  ASSERT_TRUE(control.InitializeOrRestore("").ok());

  const std::vector<float> table = model->Initialize(11)[0];
  int64_t rows = 0;
  for (const auto& [shard, request] : servers.creates()) {
    for (const auto& v : request.variables()) {
      EXPECT_EQ(v.name().rfind("emb/", 0), std::string::npos) << "the chief sent " << v.name();
    }
    ASSERT_EQ(request.generated_size(), 1) << "shard " << shard;
    const proto::GeneratedVariable& g = request.generated(0);
    tensor::Initializer init;
    ASSERT_TRUE(tensor::FromProto(g.initializer(), &init).ok());
    std::vector<float> made(g.shape(0) * 2);
    tensor::InitializeRows(init, g.variable_shape(), g.seed(), g.index(), g.first_row(),
                           absl::MakeSpan(made));
    EXPECT_EQ(made, std::vector<float>(table.begin() + g.first_row() * 2,
                                       table.begin() + (g.first_row() + g.shape(0)) * 2));
    rows += g.shape(0);
  }
  EXPECT_EQ(rows, 10);

  // A frozen table (a moving average of momentum 1 on the servers) travels
  // with its values: the server keeps it frozen.
  std::string frozen_json = kModel;
  const std::string emb = R"("name": "emb",)";
  frozen_json.replace(frozen_json.find(emb), emb.size(), emb + R"( "trainable": false,)");
  auto frozen = keras::ModelFromKerasConfig(frozen_json, "bag");
  ASSERT_TRUE(frozen.ok()) << frozen.status();
  EXPECT_EQ(GeneratedTables(*frozen), std::vector<bool>(frozen->variables().size(), false));
  testing::RecordingParameterClient again(2);
  ShardControl frozen_control(&job, 1, &again, &*sharded, &*frozen);
  ASSERT_TRUE(frozen_control.InitializeOrRestore("").ok());
  int64_t sent = 0;
  for (const auto& [shard, request] : again.creates()) {
    EXPECT_EQ(request.generated_size(), 0);
    for (const auto& v : request.variables()) {
      if (v.name().rfind("emb/", 0) == 0) sent += v.tensor().shape(0);
    }
  }
  EXPECT_EQ(sent, 10);
}

}  // namespace
}  // namespace chief
}  // namespace psc
