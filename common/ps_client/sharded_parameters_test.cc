#include "common/ps_client/sharded_parameters.h"

#include <string>
#include <vector>

#include "common/tensor/wire_dtype.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace ps_client {
namespace {

using ::testing::HasSubstr;

// "k" [4,2] split over two shards by rows (3 + 1), "b" [2] on shard 1.
proto::Placement TwoShards() {
  proto::Placement p;
  p.set_num_shards(2);
  proto::VariablePlacement* k = p.add_variables();
  k->set_name("k");
  k->add_shape(4);
  k->add_shape(2);
  auto* k0 = k->add_parts();
  k0->set_shard_variable("k/part_0");
  k0->set_shard(0);
  k0->set_first_axis_offset(0);
  k0->set_first_axis_size(3);
  auto* k1 = k->add_parts();
  k1->set_shard_variable("k/part_1");
  k1->set_shard(1);
  k1->set_first_axis_offset(3);
  k1->set_first_axis_size(1);
  proto::VariablePlacement* b = p.add_variables();
  b->set_name("b");
  b->add_shape(2);
  auto* b0 = b->add_parts();
  b0->set_shard_variable("b");
  b0->set_shard(1);
  b0->set_first_axis_offset(0);
  b0->set_first_axis_size(2);
  return p;
}

const std::vector<tensor::VariableShape> kVariables = {{"k", {4, 2}}, {"b", {2}}};

std::vector<std::vector<float>> Values() {
  return {{0.1f, -0.2f, 0.3f, 1.5f, -2.75f, 1e-3f, 100.25f, 7.0f}, {0.5f, -1.0f / 3}};
}

std::vector<const google::protobuf::RepeatedPtrField<proto::NamedTensor>*> Views(
    const std::vector<google::protobuf::RepeatedPtrField<proto::NamedTensor>>& shards) {
  std::vector<const google::protobuf::RepeatedPtrField<proto::NamedTensor>*> v;
  for (const auto& s : shards) v.push_back(&s);
  return v;
}

class ShardedParametersWireTest : public ::testing::TestWithParam<proto::DataType> {};

TEST_P(ShardedParametersWireTest, SplitAndAssembleRoundTheValuesOnly) {
  const proto::DataType wire = GetParam();
  auto sharded = ShardedParameters::Create(TwoShards(), kVariables);
  ASSERT_TRUE(sharded.ok()) << sharded.status();
  std::vector<std::vector<proto::NamedTensor>> split;
  ASSERT_TRUE(sharded->Split(Values(), wire, &split).ok());
  ASSERT_EQ(split.size(), 2u);
  std::vector<google::protobuf::RepeatedPtrField<proto::NamedTensor>> shards(2);
  for (int s = 0; s < 2; ++s) {
    for (const auto& t : split[s]) {
      EXPECT_EQ(t.tensor().dtype(), wire) << t.name();
      *shards[s].Add() = t;
    }
  }
  EXPECT_EQ(split[0][0].tensor().data().size(), 6 * *tensor::WireElementBytes(wire));
  std::vector<std::vector<float>> back;
  ASSERT_TRUE(sharded->Assemble(Views(shards), &back).ok());
  const auto want = Values();
  for (size_t v = 0; v < want.size(); ++v) {
    ASSERT_EQ(back[v].size(), want[v].size());
    for (size_t i = 0; i < want[v].size(); ++i) {
      float rounded = want[v][i];
      if (wire == proto::DT_BFLOAT16)
        rounded = tensor::Bfloat16ToFloat(tensor::FloatToBfloat16(rounded));
      if (wire == proto::DT_FLOAT16)
        rounded = tensor::Float16ToFloat(tensor::FloatToFloat16(rounded));
      EXPECT_EQ(back[v][i], rounded) << v << "," << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryWireDtype, ShardedParametersWireTest,
                         ::testing::Values(proto::DT_FLOAT32, proto::DT_BFLOAT16,
                                           proto::DT_FLOAT16),
                         [](const auto& info) { return tensor::WireDtypeName(info.param); });

TEST(ShardedParametersTest, Float16OutOfRangeNamesTheVariable) {
  auto sharded = ShardedParameters::Create(TwoShards(), kVariables);
  ASSERT_TRUE(sharded.ok());
  auto values = Values();
  values[1][1] = 1e6f;
  std::vector<std::vector<proto::NamedTensor>> split;
  absl::Status s = sharded->Split(values, proto::DT_FLOAT16, &split);
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(s.message(), HasSubstr("\"b\" as float16"));
}

TEST(ShardedParametersTest, GradientSplitsLeaveFrozenVariablesOutAndValueSplitsKeepThem) {
  auto sharded = ShardedParameters::Create(TwoShards(), kVariables, {true, false});
  ASSERT_TRUE(sharded.ok()) << sharded.status();
  EXPECT_TRUE(sharded->frozen(0));
  EXPECT_FALSE(sharded->frozen(1));
  // A frozen variable's gradient entry is not read: it may be empty.
  const std::vector<std::vector<float>> grads = {{}, Values()[1]};
  std::vector<std::vector<proto::NamedTensor>> split, part, values;
  ASSERT_TRUE(sharded->Split(grads, proto::DT_FLOAT32, &split).ok());
  ASSERT_EQ(split.size(), 2u);
  EXPECT_TRUE(split[0].empty()) << "shard 0 holds only the frozen \"k\"";
  ASSERT_EQ(split[1].size(), 1u);
  EXPECT_EQ(split[1][0].name(), "b");
  ASSERT_TRUE(sharded->SplitVariables(grads, {0, 1}, proto::DT_FLOAT32, &part).ok());
  EXPECT_TRUE(part[0].empty());
  ASSERT_EQ(part[1].size(), 1u);
  EXPECT_EQ(part[1][0].name(), "b");
  // Values (the chief's initial ones) are every variable's.
  sharded->Split(Values(), &values);
  EXPECT_EQ(values[0].size(), 1u);
  EXPECT_EQ(values[1].size(), 2u);
  // What a pull of them asks for: frozen pieces included.
  auto names = sharded->ShardNames({0});
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(*names, (std::vector<std::vector<std::string>>{{"k/part_0"}, {"k/part_1"}}));
  EXPECT_EQ(sharded->ShardNames({2}).status().code(), absl::StatusCode::kInvalidArgument);
  // A pull that skipped the frozen "k" assembles with it held, kept as it was.
  std::vector<std::vector<float>> params = Values();
  google::protobuf::RepeatedPtrField<proto::NamedTensor> none, only_b;
  *only_b.Add() = values[1][1];
  std::vector<google::protobuf::RepeatedPtrField<proto::NamedTensor>> pulled = {none, only_b};
  params[1] = {0, 0};
  EXPECT_EQ(sharded->Assemble(Views(pulled), &params).code(), absl::StatusCode::kInvalidArgument)
      << "not held: \"k\" arrived incomplete";
  params = Values();
  params[1] = {0, 0};
  ASSERT_TRUE(sharded->Assemble(Views(pulled), &params, /*frozen_held=*/true).ok());
  EXPECT_EQ(params, Values());
  ASSERT_TRUE(sharded->AssembleVariables(Views(pulled), {0, 1}, &params, true).ok());
  EXPECT_EQ(params, Values());
  // One flag per variable, or none.
  auto bad = ShardedParameters::Create(TwoShards(), kVariables, {true});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("1 frozen flags for 2 variables"));
}

TEST(ShardedParametersTest, SplitVariablesCutsOnlyThoseVariablesPieces) {
  auto sharded = ShardedParameters::Create(TwoShards(), kVariables);
  ASSERT_TRUE(sharded.ok());
  std::vector<std::vector<proto::NamedTensor>> all, k, b;
  ASSERT_TRUE(sharded->Split(Values(), proto::DT_FLOAT32, &all).ok());
  ASSERT_TRUE(sharded->SplitVariables(Values(), {0}, proto::DT_FLOAT32, &k).ok());
  // Only the entries asked for are read.
  std::vector<std::vector<float>> only_b = {{}, Values()[1]};
  ASSERT_TRUE(sharded->SplitVariables(only_b, {1}, proto::DT_FLOAT32, &b).ok());
  ASSERT_EQ(k.size(), 2u);
  ASSERT_EQ(b.size(), 2u);
  ASSERT_EQ(k[0].size(), 1u);
  EXPECT_EQ(k[0][0].name(), "k/part_0");
  ASSERT_EQ(k[1].size(), 1u);
  EXPECT_EQ(k[1][0].name(), "k/part_1");
  EXPECT_TRUE(b[0].empty());
  ASSERT_EQ(b[1].size(), 1u);
  // The pieces are Split's, byte for byte.
  EXPECT_EQ(k[0][0].SerializeAsString(), all[0][0].SerializeAsString());
  EXPECT_EQ(k[1][0].SerializeAsString(), all[1][0].SerializeAsString());
  EXPECT_EQ(b[1][0].SerializeAsString(), all[1][1].SerializeAsString());
  EXPECT_EQ(sharded->SplitVariables(Values(), {2}, proto::DT_FLOAT32, &b).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ShardedParametersTest, AssembleRefusesBadBytes) {
  auto sharded = ShardedParameters::Create(TwoShards(), kVariables);
  ASSERT_TRUE(sharded.ok());
  std::vector<std::vector<proto::NamedTensor>> split;
  ASSERT_TRUE(sharded->Split(Values(), proto::DT_BFLOAT16, &split).ok());
  std::vector<google::protobuf::RepeatedPtrField<proto::NamedTensor>> shards(2);
  for (int s = 0; s < 2; ++s) {
    for (const auto& t : split[s]) *shards[s].Add() = t;
  }
  std::vector<std::vector<float>> back;
  // bfloat16 bytes labelled float32: the size no longer matches.
  shards[1].Mutable(1)->mutable_tensor()->set_dtype(proto::DT_FLOAT32);
  absl::Status s = sharded->Assemble(Views(shards), &back);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("\"b\""));
  shards[1].Mutable(1)->mutable_tensor()->set_dtype(static_cast<proto::DataType>(9));
  EXPECT_EQ(sharded->Assemble(Views(shards), &back).code(), absl::StatusCode::kInvalidArgument);
}

// A pull in parts: the pieces of some variables, from every shard that
// holds one, write those variables only; a piece of another variable, or a
// variable with a piece missing, is refused.
TEST(ShardedParametersTest, AssembleVariablesWritesOnlyThoseVariables) {
  auto sharded = ShardedParameters::Create(TwoShards(), kVariables);
  ASSERT_TRUE(sharded.ok());
  std::vector<std::vector<proto::NamedTensor>> k;
  ASSERT_TRUE(sharded->SplitVariables(Values(), {0}, proto::DT_FLOAT32, &k).ok());
  std::vector<google::protobuf::RepeatedPtrField<proto::NamedTensor>> shards(2);
  for (int s = 0; s < 2; ++s) {
    for (const auto& t : k[s]) *shards[s].Add() = t;
  }
  std::vector<std::vector<float>> full = {std::vector<float>(8, -1), {-1, -1}};
  ASSERT_TRUE(sharded->AssembleVariables(Views(shards), {0}, &full).ok());
  EXPECT_EQ(full[0], Values()[0]);
  EXPECT_EQ(full[1], (std::vector<float>{-1, -1})) << "b was not asked for";

  absl::Status s = sharded->AssembleVariables(Views(shards), {1}, &full);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("not a piece of the variables asked for"));
  shards[1].Clear();  // k/part_1 missing
  s = sharded->AssembleVariables(Views(shards), {0}, &full);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("\"k\" arrived incomplete"));
  EXPECT_EQ(sharded->AssembleVariables(Views(shards), {2}, &full).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ps_client
}  // namespace psc
