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

}  // namespace
}  // namespace psc::data
