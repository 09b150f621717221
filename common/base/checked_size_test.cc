#include "common/base/checked_size.h"

#include <cstdint>
#include <limits>

#include "gtest/gtest.h"

namespace psc {
namespace base {
namespace {

constexpr int64_t kMax64 = std::numeric_limits<int64_t>::max();

TEST(CheckedSizeTest, MulAndAddDetectWrap) {
  EXPECT_EQ(CheckedMul(3, 4), 12u);
  EXPECT_EQ(CheckedMul(uint64_t{1} << 62, 4), std::nullopt);
  EXPECT_EQ(CheckedAdd(UINT64_MAX, 0), UINT64_MAX);
  EXPECT_EQ(CheckedAdd(UINT64_MAX, 1), std::nullopt);
}

TEST(CheckedSizeTest, ElementCount) {
  EXPECT_EQ(*ElementCount({}, 10, "t"), 1);
  EXPECT_EQ(*ElementCount({3, 3, 1, 32}, 1000, "t"), 288);
  EXPECT_EQ(*ElementCount({0, 5}, 10, "t"), 0);
  EXPECT_EQ(ElementCount({-1}, 10, "t").status().message(), "t: negative dimension -1");
  EXPECT_FALSE(ElementCount({11}, 10, "t").ok());
  // Products that wrap int64 and uint64 are refused, whatever follows.
  EXPECT_FALSE(ElementCount({kMax64, kMax64}, kMax64, "t").ok());
  EXPECT_FALSE(ElementCount({int64_t{1} << 62, 8, 0}, kMax64, "t").ok());
}

// The shape that once passed: [2^62 + 1] floats is 4 bytes modulo 2^64.
TEST(CheckedSizeTest, ByteSizeRefusesTheWrappingShape) {
  const int64_t dims[] = {(int64_t{1} << 62) + 1};
  auto bytes = ByteSize(dims, 4, kMaxTensorBytes, "variable \"w\"");
  ASSERT_FALSE(bytes.ok());
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bytes.status().message().find("variable \"w\""), absl::string_view::npos);
  EXPECT_EQ(*ByteSize({1024, 1024}, 4, kMaxTensorBytes, "w"), 4u << 20);
  EXPECT_EQ(*ByteSize({16}, 4, 64, "w"), 64u);
  EXPECT_FALSE(ByteSize({17}, 4, 64, "w").ok());
  EXPECT_FALSE(ByteSize({1}, 0, 64, "w").ok());
}

TEST(CheckedSizeTest, ArrayBytesAndBoundedSum) {
  EXPECT_EQ(*ArrayBytes(3, 8, 24, "table"), 24u);
  EXPECT_FALSE(ArrayBytes(4, 8, 24, "table").ok());
  EXPECT_FALSE(ArrayBytes(UINT64_MAX / 2, 8, UINT64_MAX, "table").ok());
  const uint64_t ok[] = {1, 2, 3};
  EXPECT_EQ(*BoundedSum(ok, 6, "blobs"), 6u);
  EXPECT_FALSE(BoundedSum(ok, 5, "blobs").ok());
  const uint64_t wrap[] = {UINT64_MAX, 2};
  EXPECT_FALSE(BoundedSum(wrap, UINT64_MAX, "blobs").ok());
}

TEST(CheckedSizeTest, CheckInRange) {
  EXPECT_TRUE(CheckInRange(5, 0, 5, "slot").ok());
  EXPECT_EQ(CheckInRange(6, 0, 5, "slot").message(), "slot 6 out of range [0, 5]");
  EXPECT_FALSE(CheckInRange(-1, 0, 5, "slot").ok());
}

}  // namespace
}  // namespace base
}  // namespace psc
