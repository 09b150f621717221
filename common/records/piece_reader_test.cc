#include "common/records/piece_reader.h"

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/io/testing/scratch_dir.h"
#include "common/tfrecord/framing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/tf_example.pb.h"

namespace psc::records {
namespace {

using ::testing::HasSubstr;

// An Example whose float "v" and int64 "y" are both `id`.
std::string IdExample(int id) {
  tfexample::Example e;
  auto& f = *e.mutable_features()->mutable_feature();
  f["v"].mutable_float_list()->add_value(static_cast<float>(id));
  f["y"].mutable_int64_list()->add_value(id % 4);
  return tfrecord::EncodeRecord(e.SerializeAsString());
}

class PieceReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto spec = ParseFeatureSpec(R"({"inputs": {"v": {"kind": "float", "shape": [1]}},
                                     "label": {"feature": "y", "kind": "int64"}})",
                                 "spec.json");
    ASSERT_TRUE(spec.ok()) << spec.status();
    auto layout = ResolveLayout(*spec, {}, {1}, {4, 0}, "spec.json");
    ASSERT_TRUE(layout.ok()) << layout.status();
    layout_ = *layout;
    std::string tf;  // ids 0..9
    for (int i = 0; i < 10; ++i) tf += IdExample(i);
    files_.push_back(dir_.Write("a.tfrecord", tf));
    std::string tf2;  // ids 10..14
    for (int i = 10; i < 15; ++i) tf2 += IdExample(i);
    files_.push_back(dir_.Write("b.tfrecord", tf2));
  }

  // What a reader of `pieces` gives, read `chunk` rows at a time.
  std::vector<float> ReadAll(const std::vector<Piece>& pieces, int64_t chunk,
                             absl::Status* status) {
    PieceReader reader(io::LocalFileSystem(), files_, pieces, &layout_, ReadOptions());
    RowBuffer rows(&layout_);
    for (int i = 0; i < 100; ++i) {
      absl::StatusOr<int64_t> got = reader.Read(chunk, &rows);
      if (!got.ok()) {
        *status = got.status();
        break;
      }
      EXPECT_LE(*got, chunk);
      if (*got == 0) break;
    }
    auto arrays = rows.Take("x", "y", "w");
    EXPECT_TRUE(arrays.ok());
    std::vector<float> v(arrays->at("x").header().count);
    if (!v.empty()) std::memcpy(v.data(), arrays->at("x").data(), v.size() * 4);
    return v;
  }

  io::testing::ScratchDir dir_{"piece_reader_test"};
  RowLayout layout_;
  std::vector<std::string> files_;
};

TEST_F(PieceReaderTest, ReadsItsPiecesInOrderAChunkAtATime) {
  absl::Status s;
  EXPECT_EQ(ReadAll({{1, 2, 2}, {0, 7, 3}, {0, 0, 2}, {1, 0, 0}}, 3, &s),
            (std::vector<float>{12, 13, 7, 8, 9, 0, 1}));
  EXPECT_TRUE(s.ok()) << s;
}

TEST_F(PieceReaderTest, APieceBeyondItsFileIsDataLossNamingIt) {
  absl::Status s;
  ReadAll({{1, 3, 4}}, 8, &s);  // b.tfrecord holds 5 records, not 7
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(s.message(), HasSubstr("b.tfrecord"));
  s = absl::OkStatus();
  ReadAll({{1, 6, 1}}, 8, &s);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(s.message(), HasSubstr("changed since"));
}

TEST_F(PieceReaderTest, AMissingFileIsNotFoundAndRewindReadsAgain) {
  files_.push_back(dir_.path() + "/gone.tfrecord");
  absl::Status s;
  ReadAll({{0, 0, 1}, {2, 0, 1}}, 8, &s);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_THAT(s.message(), HasSubstr("gone.tfrecord"));

  PieceReader reader(io::LocalFileSystem(), files_, {{0, 4, 2}}, &layout_, ReadOptions());
  RowBuffer rows(&layout_);
  ASSERT_EQ(*reader.Read(10, &rows), 2);
  ASSERT_EQ(*reader.Read(10, &rows), 0);
  reader.Rewind();
  ASSERT_EQ(*reader.Read(10, &rows), 2);
  ASSERT_EQ(reader.files().size(), 1u);
  EXPECT_EQ(reader.files()[0].records, 2);  // the first pass's: none counted twice
}

}  // namespace
}  // namespace psc::records
