#include "common/data/packed_inputs.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "common/data/npz_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc::data {
namespace {

using ::testing::HasSubstr;

using testing::ArrayOf;

// Inputs "f" (3,) then "g" (1, 2, 1) (a 1x2 image): offsets 0 and 3.
const std::vector<PackedInput> kInputs = {{"f", {3}, 0}, {"g", {1, 2, 1}, 3}};

std::vector<float> Floats(const NumpyArray& a) {
  std::vector<float> out(a.header().data_bytes / sizeof(float));
  std::memcpy(out.data(), a.data(), a.header().data_bytes);
  return out;
}

TEST(PackedInputsTest, EachExampleHoldsEveryInputInTheModelsOrder) {
  std::map<std::string, NumpyArray> arrays;
  arrays.emplace("x/g", ArrayOf<uint8_t>(NpyType::kUint8, {2, 1, 2}, {7, 8, 9, 10}));
  arrays.emplace("x/f", ArrayOf<float>(NpyType::kFloat32, {2, 3}, {1, 2, 3, 4, 5, 6}));
  auto packed = PackInputs(arrays, "x", kInputs, "d.npz");
  ASSERT_TRUE(packed.ok()) << packed.status();
  EXPECT_EQ(packed->header().shape, (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(Floats(*packed), (std::vector<float>{1, 2, 3, 7, 8, 4, 5, 6, 9, 10}));
  EXPECT_EQ(PackedArrayNames("x", kInputs), "x/f, x/g");
}

TEST(PackedInputsTest, MissingOrMisfitArraysNameThem) {
  std::map<std::string, NumpyArray> arrays;
  EXPECT_TRUE(absl::IsNotFound(PackInputs(arrays, "x_val", kInputs, "d.npz").status()));
  arrays.emplace("x", ArrayOf<float>(NpyType::kFloat32, {1, 5}, {0, 0, 0, 0, 0}));
  EXPECT_THAT(PackInputs(arrays, "x", kInputs, "d.npz").status().message(),
              HasSubstr("the model has 2 inputs; give one array for each, x/f, x/g, instead of "
                        "'x'"));
  arrays.emplace("x/f", ArrayOf<float>(NpyType::kFloat32, {2, 3}, {1, 2, 3, 4, 5, 6}));
  EXPECT_THAT(PackInputs(arrays, "x", kInputs, "d.npz").status().message(),
              HasSubstr("d.npz has no array 'x/g' (the model's 2 inputs need x/f, x/g)"));
  arrays.emplace("x/g", ArrayOf<float>(NpyType::kFloat32, {1, 1, 2, 1}, {1, 2}));
  EXPECT_THAT(PackInputs(arrays, "x", kInputs, "d.npz").status().message(),
              HasSubstr("x/g has 1 examples, x/f 2"));
  arrays.erase("x/g");
  arrays.emplace("x/g", ArrayOf<float>(NpyType::kFloat32, {2, 3}, {1, 2, 3, 4, 5, 6}));
  auto misfit = PackInputs(arrays, "x", kInputs, "d.npz");
  EXPECT_EQ(misfit.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(misfit.status().message(), HasSubstr("d.npz: x/g"));
  arrays.erase("x/g");
  arrays.emplace("x/g", ArrayOf<float>(NpyType::kFloat32, {2, 1, 2, 1}, {1, std::nanf(""), 3, 4}));
  EXPECT_THAT(PackInputs(arrays, "x", kInputs, "d.npz").status().message(), HasSubstr("x/g"));
}

// Ids (an Embedding's input) from any integer type, as exact floats; the
// plain array for a model of one input.
// An attention mask input holds 0 and 1 only; another value names its row
// and element.
TEST(PackedInputsTest, AMaskHoldsZerosAndOnes) {
  std::vector<PackedInput> inputs = {{"f", {3}, 0}, {"mask", {2, 2}, 3}};
  inputs[1].mask = true;
  std::map<std::string, NumpyArray> arrays;
  arrays.emplace("x/f", ArrayOf<float>(NpyType::kFloat32, {2, 3}, {1, 2, 3, 4, 5, 6}));
  arrays.emplace("x/mask", ArrayOf<float>(NpyType::kFloat32, {2, 2, 2}, {1, 0, 0, 1, 1, 1, 1, 0}));
  ASSERT_TRUE(PackInputs(arrays, "x", inputs, "d.npz").ok());
  arrays.erase("x/mask");
  arrays.emplace("x/mask", ArrayOf<float>(NpyType::kFloat32, {2, 2, 2}, {1, 0, 0, 1, 1, 2, 1, 0}));
  auto bad = PackInputs(arrays, "x", inputs, "d.npz");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(),
              HasSubstr("d.npz: x/mask row 1, element 1: 2 in an attention mask, which holds 1 "
                        "(attend) or 0 (do not)"));
}

TEST(PackedInputsTest, IdsComeFromIntegerArraysAsExactFloats) {
  const std::vector<PackedInput> inputs = {{"user", {2}, 0, 1 << 24, "user_emb"}, {"f", {1}, 2}};
  std::map<std::string, NumpyArray> arrays;
  arrays.emplace("x/user", ArrayOf<int64_t>(NpyType::kInt64, {2, 2}, {0, 16777215, 7, 3}));
  arrays.emplace("x/f", ArrayOf<float>(NpyType::kFloat32, {2, 1}, {0.5f, -1}));
  auto packed = PackInputs(arrays, "x", inputs, "d.npz");
  ASSERT_TRUE(packed.ok()) << packed.status();
  EXPECT_EQ(Floats(*packed), (std::vector<float>{0, 16777215, 0.5f, 7, 3, -1}));

  const std::vector<PackedInput> one = {{"ids", {3}, 0, 10, "items"}};
  std::map<std::string, NumpyArray> plain;
  plain.emplace("x", ArrayOf<uint8_t>(NpyType::kUint8, {1, 3}, {9, 0, 4}));
  auto single = PackInputs(plain, "x", one, "d.npz");
  ASSERT_TRUE(single.ok()) << single.status();
  EXPECT_EQ(Floats(*single), (std::vector<float>{9, 0, 4}));
}

TEST(PackedInputsTest, IdsOutOfRangeOrInFloatsNameTheRowTheIdAndTheTable) {
  const std::vector<PackedInput> one = {{"ids", {1, 2}, 0, 10, "items"}};
  struct Case {
    NumpyArray array;
    const char* says;
  };
  std::vector<Case> cases;
  cases.push_back({ArrayOf<int32_t>(NpyType::kInt32, {2, 1, 2}, {1, 2, 3, 10}),
                   "d.npz: x row 1, element (0, 1): id 10 is not a row of the Embedding "
                   "\"items\" (input_dim 10)"});
  cases.push_back({ArrayOf<int16_t>(NpyType::kInt16, {1, 1, 2}, {-1, 2}),
                   "row 0, element (0, 0): id -1 is not a row"});
  cases.push_back(
      {ArrayOf<uint64_t>(NpyType::kUint64, {1, 1, 2}, {1, ~uint64_t{0}}), "id above 2^63"});
  cases.push_back({ArrayOf<float>(NpyType::kFloat32, {1, 1, 2}, {1, 2}),
                   "holds float32; the Embedding \"items\" takes integer ids"});
  cases.push_back({ArrayOf<int32_t>(NpyType::kInt32, {1, 2}, {1, 2}),
                   "examples of shape (2) for a model input of shape (1, 2)"});
  for (Case& c : cases) {
    std::map<std::string, NumpyArray> arrays;
    arrays.emplace("x", std::move(c.array));
    const absl::Status s = PackInputs(arrays, "x", one, "d.npz").status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.says;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.says));
  }
}

}  // namespace
}  // namespace psc::data
