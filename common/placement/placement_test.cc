#include "common/placement/placement.h"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace placement {
namespace {

using ::testing::HasSubstr;

// The reference model "seed_cnn", in model order.
std::vector<tensor::VariableShape> SeedCnn() {
  return {
      {"conv2d/kernel", {3, 3, 1, 32}},      {"conv2d/bias", {32}},
      {"conv2d_1/kernel", {3, 3, 32, 32}},   {"conv2d_1/bias", {32}},
      {"conv2d_2/kernel", {3, 3, 32, 64}},   {"conv2d_2/bias", {64}},
      {"conv2d_3/kernel", {3, 3, 64, 64}},   {"conv2d_3/bias", {64}},
      {"conv2d_4/kernel", {3, 3, 64, 128}},  {"conv2d_4/bias", {128}},
      {"conv2d_5/kernel", {3, 3, 128, 128}}, {"conv2d_5/bias", {128}},
      {"dense/kernel", {1152, 128}},         {"dense/bias", {128}},
      {"dense_1/kernel", {128, 10}},         {"dense_1/bias", {10}},
  };
}

constexpr int64_t kSeedCnnFloats = 435306;
constexpr int64_t kSeedCnnBytes = kSeedCnnFloats * 4;

int64_t Elements(const std::vector<int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<int64_t>());
}

proto::Placement MustPlace(const std::vector<tensor::VariableShape>& variables,
                           const PlacementOptions& options) {
  absl::StatusOr<proto::Placement> placement = PlaceVariables(variables, options);
  EXPECT_TRUE(placement.ok()) << placement.status();
  return placement.ok() ? *placement : proto::Placement();
}

const proto::VariablePlacement* Find(const proto::Placement& placement, const std::string& name) {
  for (const proto::VariablePlacement& variable : placement.variables()) {
    if (variable.name() == name) return &variable;
  }
  return nullptr;
}

int64_t PartBytes(const proto::VariablePlacement& variable,
                  const proto::VariablePlacement::Part& part) {
  int64_t bytes = 4 * part.first_axis_size();
  for (int i = 1; i < variable.shape_size(); ++i) bytes *= variable.shape(i);
  return bytes;
}

TEST(SeedCnnTest, HasTheReferenceSize) {
  int64_t total = 0;
  for (const tensor::VariableShape& variable : SeedCnn()) total += Elements(variable.shape);
  EXPECT_EQ(total, kSeedCnnFloats);
}

TEST(PlaceVariablesTest, OneShardHoldsEverythingUnsplit) {
  proto::Placement placement = MustPlace(SeedCnn(), {.num_shards = 1});
  EXPECT_EQ(placement.num_shards(), 1);
  ASSERT_EQ(placement.variables_size(), 16);
  for (const proto::VariablePlacement& variable : placement.variables()) {
    ASSERT_EQ(variable.parts_size(), 1) << variable.name();
    const proto::VariablePlacement::Part& part = variable.parts(0);
    EXPECT_EQ(part.shard_variable(), variable.name());
    EXPECT_EQ(part.shard(), 0);
    EXPECT_EQ(part.first_axis_offset(), 0);
    EXPECT_EQ(part.first_axis_size(), variable.shape(0));
  }
  EXPECT_EQ(ShardBytes(placement), std::vector<int64_t>{kSeedCnnBytes});
  std::vector<std::vector<tensor::VariableShape>> shards = ShardVariables(placement);
  ASSERT_EQ(shards.size(), 1u);
  std::vector<tensor::VariableShape> model = SeedCnn();
  ASSERT_EQ(shards[0].size(), model.size());
  for (size_t i = 0; i < model.size(); ++i) {
    EXPECT_EQ(shards[0][i].name, model[i].name);
    EXPECT_EQ(shards[0][i].shape, model[i].shape);
  }
}

// Properties of the seed_cnn placement that hold for every number of shards.
class SeedCnnPlacementTest : public ::testing::TestWithParam<int> {
 protected:
  proto::Placement Place() { return MustPlace(SeedCnn(), {.num_shards = GetParam()}); }
};

TEST_P(SeedCnnPlacementTest, IsBalancedByBytes) {
  proto::Placement placement = Place();
  int64_t largest_part = 0;
  for (const proto::VariablePlacement& variable : placement.variables()) {
    for (const proto::VariablePlacement::Part& part : variable.parts()) {
      largest_part = std::max(largest_part, PartBytes(variable, part));
    }
  }
  std::vector<int64_t> bytes = ShardBytes(placement);
  ASSERT_EQ(bytes.size(), static_cast<size_t>(GetParam()));
  auto [min, max] = std::minmax_element(bytes.begin(), bytes.end());
  EXPECT_LE(*max - *min, largest_part) << ::testing::PrintToString(bytes);
}

TEST_P(SeedCnnPlacementTest, NeverPutsTwoPartsOfOneVariableOnOneShard) {
  proto::Placement placement = Place();
  for (const proto::VariablePlacement& variable : placement.variables()) {
    std::set<int> shards;
    for (const proto::VariablePlacement::Part& part : variable.parts()) {
      EXPECT_GE(part.shard(), 0);
      EXPECT_LT(part.shard(), GetParam());
      EXPECT_TRUE(shards.insert(part.shard()).second) << variable.name();
    }
  }
}

TEST_P(SeedCnnPlacementTest, KeepsModelOrderAndCoversEveryRow) {
  proto::Placement placement = Place();
  std::vector<tensor::VariableShape> model = SeedCnn();
  ASSERT_EQ(placement.variables_size(), static_cast<int>(model.size()));
  for (size_t i = 0; i < model.size(); ++i) {
    const proto::VariablePlacement& variable = placement.variables(i);
    EXPECT_EQ(variable.name(), model[i].name);
    EXPECT_EQ(std::vector<int64_t>(variable.shape().begin(), variable.shape().end()),
              model[i].shape);
    ASSERT_GE(variable.parts_size(), 1);
    EXPECT_LE(variable.parts_size(), GetParam());
    int64_t next_row = 0;
    for (int j = 0; j < variable.parts_size(); ++j) {
      const proto::VariablePlacement::Part& part = variable.parts(j);
      EXPECT_EQ(part.shard_variable(), variable.parts_size() == 1
                                           ? variable.name()
                                           : variable.name() + "/part_" + std::to_string(j));
      EXPECT_EQ(part.first_axis_offset(), next_row);
      next_row += part.first_axis_size();
    }
    EXPECT_EQ(next_row, model[i].shape[0]) << variable.name();
  }
}

TEST_P(SeedCnnPlacementTest, ShardVariablesAndShardBytesAgreeWithTheTotal) {
  proto::Placement placement = Place();
  std::vector<std::vector<tensor::VariableShape>> shards = ShardVariables(placement);
  std::vector<int64_t> bytes = ShardBytes(placement);
  ASSERT_EQ(shards.size(), static_cast<size_t>(GetParam()));
  ASSERT_EQ(bytes.size(), shards.size());
  std::set<std::string> names;
  int64_t total_elements = 0;
  for (size_t s = 0; s < shards.size(); ++s) {
    int64_t shard_elements = 0;
    for (const tensor::VariableShape& variable : shards[s]) {
      EXPECT_TRUE(names.insert(variable.name).second) << variable.name;
      shard_elements += Elements(variable.shape);
    }
    EXPECT_EQ(bytes[s], 4 * shard_elements) << "shard " << s;
    total_elements += shard_elements;
  }
  EXPECT_EQ(total_elements, kSeedCnnFloats);
  EXPECT_EQ(std::accumulate(bytes.begin(), bytes.end(), int64_t{0}), kSeedCnnBytes);
}

TEST_P(SeedCnnPlacementTest, IsDeterministic) {
  std::string first = Place().SerializeAsString();
  std::string second = Place().SerializeAsString();
  EXPECT_FALSE(first.empty());
  EXPECT_EQ(first, second);
}

INSTANTIATE_TEST_SUITE_P(Shards, SeedCnnPlacementTest, ::testing::Values(1, 2, 3, 4, 8));

TEST(PlaceVariablesTest, DenseKernelSplitsIntoMinOfPAndThreeParts) {
  struct Case {
    int num_shards;
    std::vector<int64_t> rows;
  };
  for (const Case& c : std::vector<Case>{{1, {1152}},
                                         {2, {576, 576}},
                                         {3, {384, 384, 384}},
                                         {4, {384, 384, 384}},
                                         {8, {384, 384, 384}}}) {
    SCOPED_TRACE(c.num_shards);
    proto::Placement placement = MustPlace(SeedCnn(), {.num_shards = c.num_shards});
    const proto::VariablePlacement* dense = Find(placement, "dense/kernel");
    ASSERT_NE(dense, nullptr);
    ASSERT_EQ(dense->parts_size(), static_cast<int>(c.rows.size()));
    int64_t offset = 0;
    for (int j = 0; j < dense->parts_size(); ++j) {
      const proto::VariablePlacement::Part& part = dense->parts(j);
      EXPECT_EQ(part.shard_variable(),
                c.rows.size() == 1 ? "dense/kernel" : "dense/kernel/part_" + std::to_string(j));
      EXPECT_EQ(part.first_axis_offset(), offset);
      EXPECT_EQ(part.first_axis_size(), c.rows[j]);
      offset += c.rows[j];
    }
  }
}

TEST(PlaceVariablesTest, EarlierPartsGetTheExtraRows) {
  proto::Placement placement = MustPlace({{"x", {10, 3}}}, {.num_shards = 3, .min_shard_bytes = 1});
  ASSERT_EQ(placement.variables_size(), 1);
  const proto::VariablePlacement& x = placement.variables(0);
  ASSERT_EQ(x.parts_size(), 3);
  EXPECT_EQ(x.parts(0).shard_variable(), "x/part_0");
  EXPECT_EQ(x.parts(1).shard_variable(), "x/part_1");
  EXPECT_EQ(x.parts(2).shard_variable(), "x/part_2");
  EXPECT_EQ(x.parts(0).first_axis_offset(), 0);
  EXPECT_EQ(x.parts(0).first_axis_size(), 4);
  EXPECT_EQ(x.parts(1).first_axis_offset(), 4);
  EXPECT_EQ(x.parts(1).first_axis_size(), 3);
  EXPECT_EQ(x.parts(2).first_axis_offset(), 7);
  EXPECT_EQ(x.parts(2).first_axis_size(), 3);
  // The biggest part goes first, to shard 0; the equal others follow in part order.
  EXPECT_EQ(x.parts(0).shard(), 0);
  EXPECT_EQ(x.parts(1).shard(), 1);
  EXPECT_EQ(x.parts(2).shard(), 2);
}

TEST(PlaceVariablesTest, PartCountIsBoundedBySizeRowsAndShards) {
  // Exactly min_shard_bytes: not split. One float more than that: two parts.
  EXPECT_EQ(MustPlace({{"x", {4, 4}}}, {.num_shards = 8, .min_shard_bytes = 64})
                .variables(0)
                .parts_size(),
            1);
  EXPECT_EQ(MustPlace({{"x", {4, 4}}}, {.num_shards = 8, .min_shard_bytes = 63})
                .variables(0)
                .parts_size(),
            2);
  // Bounded by the first dimension.
  EXPECT_EQ(MustPlace({{"x", {2, 1000}}}, {.num_shards = 8, .min_shard_bytes = 1})
                .variables(0)
                .parts_size(),
            2);
  // Bounded by the number of shards.
  EXPECT_EQ(
      MustPlace({{"x", {1000}}}, {.num_shards = 5, .min_shard_bytes = 1}).variables(0).parts_size(),
      5);
}

TEST(PlaceVariablesTest, ScalarIsOneRowAndNeverSplit) {
  proto::Placement placement =
      MustPlace({{"global_step", {}}}, {.num_shards = 4, .min_shard_bytes = 1});
  ASSERT_EQ(placement.variables_size(), 1);
  const proto::VariablePlacement& scalar = placement.variables(0);
  EXPECT_EQ(scalar.shape_size(), 0);
  ASSERT_EQ(scalar.parts_size(), 1);
  EXPECT_EQ(scalar.parts(0).shard_variable(), "global_step");
  EXPECT_EQ(scalar.parts(0).shard(), 0);
  EXPECT_EQ(scalar.parts(0).first_axis_offset(), 0);
  EXPECT_EQ(scalar.parts(0).first_axis_size(), 1);
  EXPECT_EQ(ShardBytes(placement), (std::vector<int64_t>{4, 0, 0, 0}));
  std::vector<std::vector<tensor::VariableShape>> shards = ShardVariables(placement);
  ASSERT_EQ(shards[0].size(), 1u);
  EXPECT_TRUE(shards[0][0].shape.empty());
}

TEST(PlaceVariablesTest, GreedyPutsTheLargestFirstOnTheLeastLoadedShard) {
  // Bytes: a 8, b 20, c 12, d 12. Order: b, c, d (model order breaks the tie), a.
  // b -> 0; c -> 1; d -> 2; a -> 1 (loads 20, 12, 12: the lowest index wins).
  proto::Placement placement =
      MustPlace({{"a", {2}}, {"b", {5}}, {"c", {3}}, {"d", {3}}}, {.num_shards = 3});
  ASSERT_EQ(placement.variables_size(), 4);
  EXPECT_EQ(placement.variables(0).parts(0).shard(), 1);
  EXPECT_EQ(placement.variables(1).parts(0).shard(), 0);
  EXPECT_EQ(placement.variables(2).parts(0).shard(), 1);
  EXPECT_EQ(placement.variables(3).parts(0).shard(), 2);
  EXPECT_EQ(ShardBytes(placement), (std::vector<int64_t>{20, 20, 12}));
}

TEST(PlaceVariablesTest, PartsOfOneVariableAvoidEachOther) {
  // x splits into two 8-byte parts; y (12 bytes, one row) cannot split. y -> shard 0;
  // x/part_0 -> shard 1; x/part_1 would go to the less loaded shard 1, which already holds
  // x/part_0, so it goes to shard 0.
  proto::Placement placement =
      MustPlace({{"x", {4, 1}}, {"y", {1, 3}}}, {.num_shards = 2, .min_shard_bytes = 4});
  const proto::VariablePlacement* x = Find(placement, "x");
  const proto::VariablePlacement* y = Find(placement, "y");
  ASSERT_NE(x, nullptr);
  ASSERT_NE(y, nullptr);
  ASSERT_EQ(x->parts_size(), 2);
  EXPECT_EQ(y->parts(0).shard(), 0);
  EXPECT_EQ(x->parts(0).shard(), 1);
  EXPECT_EQ(x->parts(1).shard(), 0);
  EXPECT_EQ(ShardBytes(placement), (std::vector<int64_t>{20, 8}));
}

TEST(PlaceVariablesTest, RejectsInvalidInput) {
  struct Case {
    std::string what;
    std::vector<tensor::VariableShape> variables;
    PlacementOptions options;
    std::string message_part;
  };
  const std::vector<Case> cases = {
      {"no shards", SeedCnn(), {.num_shards = 0}, "num_shards"},
      {"negative shards", SeedCnn(), {.num_shards = -2}, "num_shards"},
      {"zero min_shard_bytes",
       SeedCnn(),
       {.num_shards = 2, .min_shard_bytes = 0},
       "min_shard_bytes"},
      {"no variables", {}, {.num_shards = 2}, "no variables"},
      {"empty name", {{"a", {1}}, {"", {2}}}, {.num_shards = 2}, "variable #1"},
      {"duplicate name", {{"a", {1}}, {"b", {2}}, {"a", {3}}}, {.num_shards = 2}, "\"a\""},
      {"reserved name",
       {{"dense/kernel/part_0", {4}}},
       {.num_shards = 2},
       "\"dense/kernel/part_0\""},
      {"zero dimension", {{"a", {1}}, {"w", {3, 0}}}, {.num_shards = 2}, "\"w\""},
      {"negative dimension", {{"w", {-1}}}, {.num_shards = 2}, "\"w\""},
      {"too many bytes",
       {{"huge", {int64_t{1} << 40, int64_t{1} << 30}}},
       {.num_shards = 2},
       "\"huge\""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    absl::StatusOr<proto::Placement> placement = PlaceVariables(c.variables, c.options);
    EXPECT_EQ(placement.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(placement.status().message()), HasSubstr(c.message_part));
  }
}

TEST(CheckSamePlacementTest, AcceptsAnIdenticalPlacement) {
  proto::Placement saved = MustPlace(SeedCnn(), {.num_shards = 4});
  proto::Placement current = MustPlace(SeedCnn(), {.num_shards = 4});
  EXPECT_TRUE(CheckSamePlacement(saved, current).ok());
}

TEST(CheckSamePlacementTest, RejectsADifferentShardCount) {
  proto::Placement saved = MustPlace(SeedCnn(), {.num_shards = 2});
  proto::Placement current = MustPlace(SeedCnn(), {.num_shards = 1});
  absl::Status status = CheckSamePlacement(saved, current);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message(), "checkpoint placement has 2 shards; this cluster has 1");
}

TEST(CheckSamePlacementTest, RejectsADifferentShape) {
  std::vector<tensor::VariableShape> model = SeedCnn();
  proto::Placement saved = MustPlace(model, {.num_shards = 2});
  for (tensor::VariableShape& variable : model) {
    if (variable.name == "dense/kernel") variable.shape = {1152, 64};
  }
  proto::Placement current = MustPlace(model, {.num_shards = 2});
  absl::Status status = CheckSamePlacement(saved, current);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message(),
            "checkpoint has variable \"dense/kernel\" with shape [1152,128]; the model has "
            "[1152,64]");
}

TEST(CheckSamePlacementTest, RejectsOtherVariablesOrParts) {
  proto::Placement saved = MustPlace(SeedCnn(), {.num_shards = 2});

  std::vector<tensor::VariableShape> renamed = SeedCnn();
  renamed[1].name = "conv2d/offset";
  absl::Status status = CheckSamePlacement(saved, MustPlace(renamed, {.num_shards = 2}));
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message(),
            "checkpoint has variable \"conv2d/bias\" at position 1; the model has "
            "\"conv2d/offset\"");

  std::vector<tensor::VariableShape> shorter = SeedCnn();
  shorter.pop_back();
  status = CheckSamePlacement(saved, MustPlace(shorter, {.num_shards = 2}));
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message(),
            "checkpoint has 16 variables; the model has 15 (first unmatched: \"dense_1/bias\")");

  // Same shards, other partitioning.
  status = CheckSamePlacement(MustPlace({{"w", {4, 4}}}, {.num_shards = 2, .min_shard_bytes = 32}),
                              MustPlace({{"w", {4, 4}}}, {.num_shards = 2, .min_shard_bytes = 64}));
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message(),
            "checkpoint splits variable \"w\" into 2 parts; this cluster splits it into 1");

  proto::Placement moved = saved;
  proto::VariablePlacement::Part* part =
      moved.mutable_variables(12)->mutable_parts(1);  // dense/kernel/part_1
  part->set_shard(1 - part->shard());
  status = CheckSamePlacement(saved, moved);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()), HasSubstr("part 1 of variable \"dense/kernel\""));
}

// A [10,3] variable over 3 parts: rows 4, 3, 3.
proto::VariablePlacement TenByThree() {
  proto::Placement placement = MustPlace({{"x", {10, 3}}}, {.num_shards = 3, .min_shard_bytes = 1});
  return placement.variables_size() == 1 ? placement.variables(0) : proto::VariablePlacement();
}

TEST(SlicePartTest, SliceAndAssembleRoundTrip) {
  proto::VariablePlacement x = TenByThree();
  ASSERT_EQ(x.parts_size(), 3);
  std::vector<float> full(30);
  std::iota(full.begin(), full.end(), 0.0f);

  std::vector<float> assembled(30, -1.0f);
  const std::vector<std::vector<float>> expected = {
      {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11},
      {12, 13, 14, 15, 16, 17, 18, 19, 20},
      {21, 22, 23, 24, 25, 26, 27, 28, 29},
  };
  for (int j = 0; j < 3; ++j) {
    absl::StatusOr<std::vector<float>> part = SlicePart(x, j, full);
    ASSERT_TRUE(part.ok()) << part.status();
    EXPECT_EQ(*part, expected[j]);
    ASSERT_TRUE(AssemblePart(x, j, *part, &assembled).ok());
  }
  EXPECT_EQ(assembled, full);
}

TEST(SlicePartTest, HandlesAScalar) {
  proto::Placement placement = MustPlace({{"s", {}}}, {.num_shards = 2});
  ASSERT_EQ(placement.variables_size(), 1);
  absl::StatusOr<std::vector<float>> part = SlicePart(placement.variables(0), 0, {7.0f});
  ASSERT_TRUE(part.ok()) << part.status();
  EXPECT_EQ(*part, std::vector<float>{7.0f});
  std::vector<float> full = {0.0f};
  ASSERT_TRUE(AssemblePart(placement.variables(0), 0, {5.0f}, &full).ok());
  EXPECT_EQ(full, std::vector<float>{5.0f});
}

TEST(SlicePartTest, RejectsSizeMismatches) {
  proto::VariablePlacement x = TenByThree();
  std::vector<float> full(30, 0.0f);
  std::vector<float> short_full(29, 0.0f);

  absl::StatusOr<std::vector<float>> part = SlicePart(x, 1, short_full);
  EXPECT_EQ(part.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(part.status().message()), HasSubstr("has 30 elements; got 29"));

  for (int bad_part : {-1, 3}) {
    EXPECT_EQ(SlicePart(x, bad_part, full).status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(AssemblePart(x, bad_part, std::vector<float>(9), &full).code(),
              absl::StatusCode::kInvalidArgument);
  }

  absl::Status status = AssemblePart(x, 1, std::vector<float>(8), &full);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("part 1 of variable \"x\" has 9 elements; got 8"));

  status = AssemblePart(x, 1, std::vector<float>(9), &short_full);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("has 30 elements; got 29"));

  EXPECT_EQ(AssemblePart(x, 1, std::vector<float>(9), nullptr).code(),
            absl::StatusCode::kInvalidArgument);

  // Malformed rows in the placement itself.
  proto::VariablePlacement broken = x;
  broken.mutable_parts(2)->set_first_axis_size(4);  // rows [7, 11) of 10
  EXPECT_EQ(SlicePart(broken, 2, full).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace placement
}  // namespace psc

#include "common/compute/model_shapes.h"

namespace psc {
namespace placement {
namespace {

TEST(ModelShapesTest, SeedCnnHasTheReferenceParameterCount) {
  int64_t total = 0;
  for (const tensor::VariableShape& v : compute::SeedCnnVariableShapes()) {
    int64_t n = 1;
    for (int64_t d : v.shape) n *= d;
    total += n;
  }
  EXPECT_EQ(total, 435306);
  EXPECT_EQ(compute::SeedCnnVariableShapes().size(), 16u);
  EXPECT_EQ(compute::SeedCnnVariableShapes()[12].name, "dense/kernel");
}

}  // namespace
}  // namespace placement
}  // namespace psc
