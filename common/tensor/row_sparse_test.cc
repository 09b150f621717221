#include "common/tensor/row_sparse.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace tensor {
namespace {

using ::testing::HasSubstr;

TEST(RowSparseTest, RowsRoundTripInEveryWireDtype) {
  const std::vector<int64_t> shape = {10, 3};
  const std::vector<int64_t> ids = {0, 4, 9};
  const std::vector<float> values = {1, 2, 3, -0.5f, 0.25f, 8, 0, -1, 1024};
  for (proto::DataType dtype : {proto::DT_FLOAT32, proto::DT_BFLOAT16, proto::DT_FLOAT16}) {
    proto::Tensor t;
    ASSERT_TRUE(SetRowSparseTensor(shape, ids, values, dtype, &t).ok());
    EXPECT_TRUE(t.row_sparse());
    auto rows = DecodeRowSparse(t, dtype, shape, "g");
    ASSERT_TRUE(rows.ok()) << rows.status();
    EXPECT_EQ(rows->ids, ids);
    EXPECT_EQ(rows->values, values);  // each exact in the 16-bit formats too
  }
  // No rows at all.
  proto::Tensor none;
  ASSERT_TRUE(SetRowSparseTensor(shape, {}, {}, proto::DT_FLOAT32, &none).ok());
  auto empty = DecodeRowSparse(none, proto::DT_FLOAT32, shape, "g");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->ids.empty());
  EXPECT_EQ(RowWidth({7}), 1);
  EXPECT_EQ(RowWidth({7, 2, 3}), 6);
  EXPECT_EQ(RowWidth({}), -1);
}

TEST(RowSparseTest, WhatIsNotRowsOfTheVariableIsRefusedNamingIt) {
  const std::vector<int64_t> shape = {10, 2};
  auto with = [&](std::vector<int64_t> ids, size_t values) {
    proto::Tensor t;
    t.set_dtype(proto::DT_FLOAT32);
    for (int64_t d : shape) t.add_shape(d);
    t.set_row_sparse(true);
    t.set_row_ids(EncodeRowIds(ids));
    t.set_data(std::string(values * sizeof(float), '\0'));
    return t;
  };
  struct Case {
    proto::Tensor t;
    const char* says;
  };
  std::vector<Case> cases = {
      {with({3, 3}, 4), "row 3 at position 1 is not above the one before it"},
      {with({5, 2}, 4), "row 2 at position 1 is not above"},
      {with({10}, 2), "row 10 at position 0 is out of range (10 rows)"},
      {with({-1}, 2), "row -1 at position 0 is out of range"},
      {with({1, 2}, 3), "(2 rows of 2)"},
  };
  proto::Tensor partial = with({1}, 2);
  partial.mutable_row_ids()->push_back('\0');
  cases.push_back({partial, "9 bytes of row ids is not a whole number of int64s"});
  proto::Tensor dense = with({}, 20);
  dense.set_row_sparse(false);
  cases.push_back({dense, "arrives dense; its variable is declared row-sparse"});
  proto::Tensor other = with({1}, 3);
  other.set_shape(1, 3);
  cases.push_back({other, "has shape [10,3]; the variable has [10,2]"});
  for (const Case& c : cases) {
    absl::Status s = DecodeRowSparse(c.t, proto::DT_FLOAT32, shape, "gradient for \"t\"").status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.says;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.says));
  }
  proto::Tensor t;
  EXPECT_FALSE(SetRowSparseTensor(shape, {2, 1}, {1, 2, 3, 4}, proto::DT_FLOAT32, &t).ok());
  EXPECT_FALSE(SetRowSparseTensor(shape, {1}, {1, 2, 3}, proto::DT_FLOAT32, &t).ok());
}

}  // namespace
}  // namespace tensor
}  // namespace psc
