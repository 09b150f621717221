// .npy headers and files, and .npz archives as np.savez (stored members) and
// np.savez_compressed (deflated) write them: written here with the same
// header np.save writes and minizip's zip writer.
#include "common/data/numpy_file.h"

#include <unistd.h>
#include <zip.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/data/npy.h"
#include "common/data/npz_test_util.h"
#include "common/io/testing/zip_bomb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc::data {
namespace {

using ::testing::HasSubstr;
using testing::NpyBytes;
using testing::NpyV1;
using testing::WriteNpz;

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          (name + "-" + std::to_string(getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name()))
      .string();
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

TEST(NpyHeaderTest, ReadsWhatNpSaveWrites) {
  const std::string h = MakeNpyHeader(NpyType::kUint8, {60000, 28, 28});
  EXPECT_EQ(h.size() % 64, 0u);
  EXPECT_EQ(h.back(), '\n');
  auto parsed = ParseNpyHeader(h, "x.npy", kMaxNumpyArrayBytes);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->type, NpyType::kUint8);
  EXPECT_EQ(parsed->shape, (std::vector<int64_t>{60000, 28, 28}));
  EXPECT_EQ(parsed->count, 60000 * 28 * 28);
  EXPECT_EQ(parsed->data_offset, h.size());
  EXPECT_EQ(parsed->data_bytes, 60000u * 28 * 28);
  EXPECT_EQ(parsed->Text(), "(60000, 28, 28) uint8");
  auto one = ParseNpyHeader(MakeNpyHeader(NpyType::kInt64, {7}), "y.npy", kMaxNumpyArrayBytes);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->Text(), "(7,) int64");
  EXPECT_EQ(one->data_bytes, 56u);
}

// Headers as other writers (and NumPy versions) spell them.
TEST(NpyHeaderTest, AcceptsOtherSpellingsAndVersions) {
  auto ok = [](const std::string& h) { return ParseNpyHeader(h, "f", kMaxNumpyArrayBytes); };
  auto a = ok(NpyV1("{\"shape\": (3, 4L), \"fortran_order\": False, \"descr\": \"<f4\"}  \n"));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->shape, (std::vector<int64_t>{3, 4}));
  auto scalar = ok(NpyV1("{'descr': '<f8', 'fortran_order': False, 'shape': ()}"));
  ASSERT_TRUE(scalar.ok()) << scalar.status();
  EXPECT_EQ(scalar->count, 1);
  // A 1-D (or all-but-one-trivial) Fortran array is the same bytes as C order.
  EXPECT_TRUE(ok(NpyV1("{'descr': '|b1', 'fortran_order': True, 'shape': (5, 1)}")).ok());
  // Version 2.0: a 4-byte header length.
  const std::string dict = "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }\n";
  std::string v2 = "\x93NUMPY\x02";
  v2.push_back('\0');
  const uint32_t n = static_cast<uint32_t>(dict.size());
  v2.append(reinterpret_cast<const char*>(&n), 4);
  auto b = ok(v2 + dict);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->type, NpyType::kInt32);
  EXPECT_EQ(b->data_offset, 12 + dict.size());
}

TEST(NpyHeaderTest, BadHeadersAreDataLossNamingTheFileAndTheProblem) {
  auto bad = [](const std::string& bytes, const std::string& want) {
    auto h = ParseNpyHeader(bytes, "data.npz: x_train.npy", kMaxNumpyArrayBytes);
    ASSERT_FALSE(h.ok()) << want;
    EXPECT_EQ(h.status().code(), absl::StatusCode::kDataLoss) << h.status();
    EXPECT_THAT(h.status().message(), HasSubstr("data.npz: x_train.npy")) << h.status();
    EXPECT_THAT(h.status().message(), HasSubstr(want)) << h.status();
  };
  bad("PK\x03\x04 not npy", "no \\x93NUMPY magic");
  bad(std::string("\x93NUMPY\x04\x00\x10\x00", 10), "version 4.0");
  bad(MakeNpyHeader(NpyType::kFloat32, {10}).substr(0, 40), "truncated");
  bad(NpyV1("{'descr': '<U10', 'fortran_order': False, 'shape': (3,)}"), "'<U10' is not supported");
  bad(NpyV1("{'descr': '|O', 'fortran_order': False, 'shape': (3,)}"), "'|O' is not supported");
  bad(NpyV1("{'descr': '>f4', 'fortran_order': False, 'shape': (3,)}"), "big-endian");
  bad(NpyV1("{'descr': '<f4', 'fortran_order': True, 'shape': (3, 2)}"), "Fortran-ordered");
  bad(NpyV1("{'descr': '<f4', 'fortran_order': False}"),
      "needs 'descr', 'fortran_order' and 'shape'");
  bad(NpyV1("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (3,)}"),
      "repeated key 'descr'");
  bad(NpyV1("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (3,)}"), "expected True or False");
  bad(NpyV1("{'descr': '<f4', 'fortran_order': False, 'shape': (3, -2)}"), "non-negative integer");
  bad(NpyV1("{'descr': '<f4', 'fortran_order': False, 'shape': (3,)} trailing"), "text after");
  // Sizes that overflow, or exceed the limit, before anything is allocated.
  bad(NpyV1("{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904, 4)}"),
      "(4611686018427387904, 4)");
  bad(NpyV1("{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999999999,)}"),
      "over 2^62");
  // (Found by npz_fuzz: a dimension that wraps int64 before it passes 2^62.)
  bad(NpyV1("{'descr': '|u1', 'fortran_order': False, 'shape': (1111111111111111111111,)}"),
      "over 2^62");
  auto limited = ParseNpyHeader(MakeNpyHeader(NpyType::kFloat32, {1000}), "f", 3999);
  EXPECT_EQ(limited.status().code(), absl::StatusCode::kDataLoss);
}

TEST(NumpyFileTest, ANpyFileIsMapped) {
  const std::vector<float> values = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f, 8.0f};
  const std::string path = TempPath("a.npy");
  WriteFile(path, NpyBytes(NpyType::kFloat32, {2, 3}, values.data(), values.size() * 4));
  auto a = ReadNpyFile(path);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->mapped());
  EXPECT_EQ(a->header().shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(std::vector<float>(a->as<float>(), a->as<float>() + 6), values);
  // One byte short, or one too many: the header and the file disagree.
  WriteFile(path, NpyBytes(NpyType::kFloat32, {2, 3}, values.data(), values.size() * 4 - 1));
  EXPECT_THAT(ReadNpyFile(path).status().message(), HasSubstr("but the array is"));
  std::filesystem::remove(path);
  EXPECT_EQ(ReadNpyFile(path).status().code(), absl::StatusCode::kNotFound);
}

TEST(NumpyFileTest, NpzMembersStoredAreMappedAndDeflatedAreInflated) {
  std::vector<uint8_t> pixels(5 * 4 * 4);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i * 7);
  const std::vector<int64_t> labels = {3, 1, 4, 1, 5};
  std::vector<float> features(5 * 3, 0.5f);
  const std::string path = TempPath("d.npz");
  WriteNpz(path,
           {{"x_train.npy", NpyBytes(NpyType::kUint8, {5, 4, 4}, pixels.data(), pixels.size())},
            {"y_train.npy", NpyBytes(NpyType::kInt64, {5}, labels.data(), labels.size() * 8),
             /*deflate=*/true},
            {"notes.txt", "not an array"},
            {"x_val.npy", NpyBytes(NpyType::kFloat32, {5, 3}, features.data(), 60)}});
  auto arrays = ReadNpzFile(path);
  ASSERT_TRUE(arrays.ok()) << arrays.status();
  ASSERT_EQ(arrays->size(), 3u);  // notes.txt is not an array
  const NumpyArray& x = arrays->at("x_train");
  EXPECT_TRUE(x.mapped());
  EXPECT_EQ(x.header().Text(), "(5, 4, 4) uint8");
  EXPECT_EQ(std::vector<uint8_t>(x.as<uint8_t>(), x.as<uint8_t>() + pixels.size()), pixels);
  const NumpyArray& y = arrays->at("y_train");
  EXPECT_FALSE(y.mapped());
  EXPECT_EQ(std::vector<int64_t>(y.as<int64_t>(), y.as<int64_t>() + 5), labels);
  EXPECT_EQ(arrays->at("x_val").as<float>()[14], 0.5f);
  // Their headers alone, stored and deflated alike.
  auto headers = ReadNpzHeaders(path);
  ASSERT_TRUE(headers.ok()) << headers.status();
  ASSERT_EQ(headers->size(), 3u);
  EXPECT_EQ(headers->at("x_train").Text(), "(5, 4, 4) uint8");
  EXPECT_EQ(headers->at("y_train").Text(), "(5,) int64");
  EXPECT_EQ(headers->at("x_val").Text(), "(5, 3) float32");
  // The arrays outlive the map they came in.
  NumpyArray kept = arrays->at("x_train");
  arrays->clear();
  EXPECT_EQ(kept.as<uint8_t>()[7], pixels[7]);
  std::filesystem::remove(path);
}

TEST(NumpyFileTest, BadArchivesAreDataLossNamingTheMember) {
  const std::vector<float> v(4, 1.0f);
  const std::string good = NpyBytes(NpyType::kFloat32, {4}, v.data(), 16);
  const std::string path = TempPath("bad.npz");
  // Not a zip at all.
  WriteFile(path, good);
  EXPECT_EQ(ReadNpzFile(path).status().code(), absl::StatusCode::kDataLoss);
  // A member whose header is bad.
  WriteNpz(path, {{"x_train.npy", "garbage"}});
  auto bad_member = ReadNpzFile(path);
  EXPECT_EQ(bad_member.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(bad_member.status().message(), HasSubstr("bad.npz"));
  EXPECT_THAT(bad_member.status().message(), HasSubstr("x_train.npy: not a .npy array"));
  EXPECT_THAT(ReadNpzHeaders(path).status().message(), HasSubstr("x_train.npy: not a .npy array"));
  // A member shorter than its header says (stored and deflated).
  for (bool deflate : {false, true}) {
    WriteNpz(path, {{"x.npy", good.substr(0, good.size() - 4), deflate}});
    EXPECT_THAT(ReadNpzFile(path).status().message(), HasSubstr("but the array is")) << deflate;
  }
  // Two members of one name.
  WriteNpz(path, {{"x.npy", good}, {"x.npy", good}});
  EXPECT_THAT(ReadNpzFile(path).status().message(), HasSubstr("two members of this name"));
  // A truncated archive (the central directory cut off).
  WriteNpz(path, {{"x.npy", good}, {"y.npy", good}});
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 30);
  EXPECT_EQ(ReadNpzFile(path).status().code(), absl::StatusCode::kDataLoss);
  // A stored member whose bytes were corrupted keeps its (unchecked) CRC;
  // a deflated one's CRC is checked.
  WriteNpz(path, {{"x.npy", good, /*deflate=*/true}});
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const size_t crc_at = 14;  // the local header's CRC-32
  bytes[crc_at] = static_cast<char>(bytes[crc_at] ^ 0x5a);
  const size_t central = bytes.rfind(std::string("PK\x01\x02", 4));
  ASSERT_NE(central, std::string::npos);
  bytes[central + 16] = static_cast<char>(bytes[central + 16] ^ 0x5a);
  WriteFile(path, bytes);
  EXPECT_THAT(ReadNpzFile(path).status().message(), HasSubstr("CRC mismatch"));
  std::filesystem::remove(path);
  EXPECT_EQ(ReadNpzFile(path).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ReadNpzHeaders(path).status().code(), absl::StatusCode::kNotFound);
}

// A deflated member whose .npy header declares 12 KB but which inflates to
// 1 GiB: inflation stops just past what the header declares.
TEST(NumpyFileTest, ADeflatedMemberIsInflatedOnlyAsFarAsItsHeaderDeclares) {
  const std::string header = MakeNpyHeader(NpyType::kUint8, {12288});
  const std::string path = TempPath("bomb.npz");
  zipFile zf = zipOpen64(path.c_str(), APPEND_STATUS_CREATE);
  ASSERT_NE(zf, nullptr);
  ASSERT_TRUE(
      io::testing::AddInflatingMember(zf, "x_train.npy", header, '\0', uint64_t{1} << 30).ok());
  ASSERT_EQ(zipClose(zf, nullptr), ZIP_OK);
  const absl::Time start = absl::Now();
  auto arrays = ReadNpzFile(path);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(arrays.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(
      arrays.status().message(),
      HasSubstr(absl::StrCat("x_train.npy: inflated past the declared ", header.size() + 12288,
                             " bytes (its .npy header: (12288,) uint8)")));
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace psc::data
