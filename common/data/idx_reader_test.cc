#include "common/data/idx_reader.h"

#include <sys/stat.h>
#include <zlib.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc::data {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The bytes of an IDX file: magic 0x0000, `type`, ndim = dims.size(), big-endian dims, `data`.
std::string IdxBytes(const std::vector<uint32_t>& dims, const std::vector<uint8_t>& data,
                     uint8_t type = 0x08) {
  std::string out = {0, 0, static_cast<char>(type), static_cast<char>(dims.size())};
  for (uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>(d >> shift));
  }
  out.append(data.begin(), data.end());
  return out;
}

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "idx_reader_test_" + name;
}

std::string WriteRaw(const std::string& name, const std::string& bytes) {
  const std::string path = TempPath(name);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  return path;
}

std::string WriteGzip(const std::string& name, const std::string& bytes) {
  const std::string path = TempPath(name);
  gzFile f = gzopen(path.c_str(), "wb9");
  EXPECT_NE(f, nullptr);
  if (f == nullptr) return path;
  if (!bytes.empty()) {
    EXPECT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
              static_cast<int>(bytes.size()));
  }
  EXPECT_EQ(gzclose(f), Z_OK);
  return path;
}

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Asserts that reading `path` fails with `code` and a message naming the path and `fragment`.
void ExpectError(const std::string& path, absl::StatusCode code, const std::string& fragment) {
  absl::StatusOr<IdxArray> result = ReadIdxFile(path);
  ASSERT_FALSE(result.ok()) << path;
  EXPECT_EQ(result.status().code(), code) << result.status();
  EXPECT_THAT(result.status().message(), HasSubstr(path));
  EXPECT_THAT(result.status().message(), HasSubstr(fragment));
}

std::vector<uint8_t> Iota(int n) {
  std::vector<uint8_t> v(n);
  for (int i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 7 + 3);
  return v;
}

TEST(IdxReaderTest, ReadsRawFile) {
  const std::vector<uint8_t> data = Iota(6);
  const std::string path = WriteRaw("raw.idx", IdxBytes({2, 3}, data));
  absl::StatusOr<IdxArray> a = ReadIdxFile(path);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(a->dims, ElementsAre(2, 3));
  EXPECT_EQ(a->data, data);
}

TEST(IdxReaderTest, ReadsGzipFile) {
  const std::vector<uint8_t> data = Iota(4 * 5 * 6);
  const std::string path = WriteGzip("gz.idx.gz", IdxBytes({4, 5, 6}, data));
  absl::StatusOr<IdxArray> a = ReadIdxFile(path);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(a->dims, ElementsAre(4, 5, 6));
  EXPECT_EQ(a->data, data);
}

TEST(IdxReaderTest, ReadsOneAndFourDimensions) {
  absl::StatusOr<IdxArray> one = ReadIdxFile(WriteGzip("1d.gz", IdxBytes({5}, Iota(5))));
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_THAT(one->dims, ElementsAre(5));
  EXPECT_EQ(one->data, Iota(5));
  absl::StatusOr<IdxArray> four = ReadIdxFile(WriteRaw("4d", IdxBytes({1, 2, 3, 4}, Iota(24))));
  ASSERT_TRUE(four.ok()) << four.status();
  EXPECT_THAT(four->dims, ElementsAre(1, 2, 3, 4));
  EXPECT_EQ(four->data, Iota(24));
}

TEST(IdxReaderTest, ReadsDataLargerThanTheGzipBuffer) {
  const std::vector<uint8_t> data = Iota(3 * 1000 * 1000);
  absl::StatusOr<IdxArray> a = ReadIdxFile(WriteGzip("big.gz", IdxBytes({3, 1000, 1000}, data)));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->data, data);
}

TEST(IdxReaderTest, MissingFileIsNotFound) {
  ExpectError(TempPath("does_not_exist.gz"), absl::StatusCode::kNotFound, "not found");
}

TEST(IdxReaderTest, DirectoryIsInvalid) {
  const std::string path = TempPath("a_directory");
  mkdir(path.c_str(), 0755);
  ExpectError(path, absl::StatusCode::kInvalidArgument, "not a regular file");
}

TEST(IdxReaderTest, CorruptGzipStreamIsInvalid) {
  const std::string good = WriteGzip("corrupt_src.gz", IdxBytes({100, 100}, Iota(10000)));
  std::string bytes = ReadWholeFile(good);
  ASSERT_GT(bytes.size(), 40u);
  for (size_t i = 12; i < bytes.size() - 8; i += 3) bytes[i] = static_cast<char>(0xFF);
  ExpectError(WriteRaw("corrupt.gz", bytes), absl::StatusCode::kInvalidArgument, "gzip");
}

TEST(IdxReaderTest, TruncatedGzipStreamIsInvalid) {
  const std::string good = WriteGzip("cut_src.gz", IdxBytes({100, 100}, Iota(10000)));
  std::string bytes = ReadWholeFile(good);
  bytes.resize(bytes.size() / 2);
  ExpectError(WriteRaw("cut.gz", bytes), absl::StatusCode::kInvalidArgument, "gzip");
}

TEST(IdxReaderTest, GzipChecksumMismatchIsInvalid) {
  const std::string good = WriteGzip("crc_src.gz", IdxBytes({3}, Iota(3)));
  std::string bytes = ReadWholeFile(good);
  bytes[bytes.size() - 8] ^= 0x55;  // The CRC-32 in the gzip trailer.
  ExpectError(WriteRaw("crc.gz", bytes), absl::StatusCode::kInvalidArgument, "gzip");
}

TEST(IdxReaderTest, EmptyFileHasTooShortHeader) {
  ExpectError(WriteRaw("empty", ""), absl::StatusCode::kInvalidArgument, "header too short");
}

TEST(IdxReaderTest, TwoByteFileHasTooShortHeader) {
  ExpectError(WriteGzip("two.gz", std::string(2, '\0')), absl::StatusCode::kInvalidArgument,
              "header too short");
}

TEST(IdxReaderTest, MissingDimensionsMakeTheHeaderTooShort) {
  std::string bytes = IdxBytes({7}, {});
  bytes[3] = 3;  // Says three dimensions, holds one.
  ExpectError(WriteRaw("short_dims", bytes), absl::StatusCode::kInvalidArgument,
              "header too short: need 16 bytes");
}

TEST(IdxReaderTest, BadMagicIsInvalid) {
  std::string bytes = IdxBytes({1}, {0});
  bytes[0] = 0x12;
  bytes[1] = 0x34;
  ExpectError(WriteRaw("magic", bytes), absl::StatusCode::kInvalidArgument,
              "bad magic 0x1234 (want 0x0000 then type 0x08)");
}

TEST(IdxReaderTest, GzipOfNonIdxDataHasBadMagic) {
  ExpectError(WriteGzip("text.gz", "hello, world"), absl::StatusCode::kInvalidArgument,
              "bad magic 0x6865");
}

TEST(IdxReaderTest, UnsupportedTypeIsInvalid) {
  ExpectError(WriteRaw("float", IdxBytes({1}, {0, 0, 0, 0}, 0x0D)),
              absl::StatusCode::kInvalidArgument, "unsupported element type 0x0d");
}

TEST(IdxReaderTest, ZeroDimensionsIsInvalid) {
  ExpectError(WriteRaw("ndim0", IdxBytes({}, {1})), absl::StatusCode::kInvalidArgument,
              "unsupported number of dimensions 0");
}

TEST(IdxReaderTest, FiveDimensionsIsInvalid) {
  ExpectError(WriteRaw("ndim5", IdxBytes({1, 1, 1, 1, 1}, {1})), absl::StatusCode::kInvalidArgument,
              "unsupported number of dimensions 5");
}

TEST(IdxReaderTest, ZeroSizedDimensionIsInvalid) {
  ExpectError(WriteRaw("zero_dim", IdxBytes({3, 0}, {})), absl::StatusCode::kInvalidArgument,
              "dimension 1 is zero");
}

TEST(IdxReaderTest, OverflowingDimensionsAreInvalid) {
  // The product 2^128 - ... overflows 64 bits; it must be rejected, not wrapped.
  ExpectError(WriteRaw("overflow", IdxBytes({0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF}, {})),
              absl::StatusCode::kInvalidArgument, "exceeds the limit");
}

TEST(IdxReaderTest, DimensionsOverOneGibibyteAreInvalid) {
  // 65536 * 16385 = 1 GiB + 64 KiB.
  ExpectError(WriteRaw("too_big", IdxBytes({65536, 16385}, {})), absl::StatusCode::kInvalidArgument,
              "exceeds the limit of 1073741824 bytes");
}

TEST(IdxReaderTest, TruncatedDataIsInvalid) {
  ExpectError(WriteRaw("truncated", IdxBytes({10, 10}, Iota(37))),
              absl::StatusCode::kInvalidArgument,
              "truncated: header says 100 bytes of data, file has 37");
}

TEST(IdxReaderTest, TruncatedGzipDataIsInvalid) {
  ExpectError(WriteGzip("truncated.gz", IdxBytes({60000, 28, 28}, Iota(1234))),
              absl::StatusCode::kInvalidArgument,
              "truncated: header says 47040000 bytes of data, file has 1234");
}

TEST(IdxReaderTest, TrailingBytesAreInvalid) {
  ExpectError(WriteGzip("trailing.gz", IdxBytes({2, 2}, Iota(9))),
              absl::StatusCode::kInvalidArgument, "5 trailing bytes after the 4 bytes of data");
}

}  // namespace
}  // namespace psc::data
