#include "common/io/zip_member.h"

#include <zip.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/io/testing/zip_bomb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace io {
namespace {

using ::testing::HasSubstr;

// Writes an archive with the members `add` adds.
template <typename Add>
std::string Archive(const std::string& name, Add add) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/", name);
  zipFile zf = zipOpen64(path.c_str(), APPEND_STATUS_CREATE);
  EXPECT_NE(zf, nullptr);
  EXPECT_TRUE(add(zf).ok());
  EXPECT_EQ(zipClose(zf, nullptr), ZIP_OK);
  return path;
}

// ReadZipMember of each member, with `limit`.
absl::Status ReadAll(const std::string& path, uint64_t limit) {
  return ForEachZipMember(path,
                          [&](unzFile z, const unz_file_info64& info, const std::string& name) {
                            return ReadZipMember(z, info, limit, "the test's limit", name).status();
                          });
}

TEST(ZipMemberTest, ReadsWhatWasWritten) {
  const std::string a = "alpha", b(100000, 'b');
  const std::string path = absl::StrCat(::testing::TempDir(), "/plain.zip");
  ASSERT_TRUE(WriteZipFile(path, {{"a", &a, true}, {"b", &b, false}}).ok());
  auto members = ReadZipFile(path, 1 << 20);
  ASSERT_TRUE(members.ok()) << members.status();
  ASSERT_EQ(members->size(), 2u);
  EXPECT_EQ((*members)[0].second, a);
  EXPECT_EQ((*members)[1].second, b);
  // The same member through the reader, a piece at a time.
  ASSERT_TRUE(ForEachZipMember(path,
                               [&](unzFile z, const unz_file_info64& info,
                                   const std::string& name) -> absl::Status {
                                 if (name != "b") return absl::OkStatus();
                                 auto r = ZipMemberReader::Open(z, info, name);
                                 EXPECT_TRUE(r.ok());
                                 std::string got;
                                 EXPECT_TRUE((*r)->Read(10, &got).ok());
                                 EXPECT_EQ(got, std::string(10, 'b'));
                                 EXPECT_TRUE((*r)->ReadRest(b.size(), "its size", &got).ok());
                                 EXPECT_EQ(got, b);
                                 return absl::OkStatus();
                               })
                  .ok());
}

// An honest entry announcing more than the limit: refused before inflating.
TEST(ZipMemberTest, AnEntryAnnouncingMoreThanTheLimitIsNotInflated) {
  const std::string path = Archive("announces_3g.zip", [](zipFile zf) {
    return testing::AddInflatingMember(zf, "config.json", "{", ' ', uint64_t{3} << 30);
  });
  const absl::Time start = absl::Now();
  const absl::Status s = ReadAll(path, uint64_t{64} << 20);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(s.message(),
              HasSubstr("config.json: would be inflated past the declared 67108864 "
                        "bytes (the test's limit; its zip entry announces 3221225473"));
  EXPECT_THAT(s.message(), HasSubstr("not inflated"));
}

// An entry that announces less than its stream holds: minizip stops at the
// announced size, and the CRC (of the whole stream) fails.
TEST(ZipMemberTest, AnEntryAnnouncingLessThanItsStreamFailsItsCrc) {
  const std::string path = Archive("lies.zip", [](zipFile zf) {
    return testing::AddInflatingMember(zf, "config.json", "{", ' ', uint64_t{1} << 30, 1024);
  });
  const absl::Time start = absl::Now();
  const absl::Status s = ReadAll(path, uint64_t{64} << 20);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(s.message(), HasSubstr("config.json: CRC mismatch"));
}

// A reader that learns the declared size from the member's own first bytes
// stops once more than that has come out, whatever the entry announces.
TEST(ZipMemberTest, ReadRestStopsPastTheDeclaredBytes) {
  const std::string path = Archive("past.zip", [](zipFile zf) {
    return testing::AddInflatingMember(zf, "x", "12288", '\0', uint64_t{1} << 30);
  });
  const absl::Time start = absl::Now();
  std::string got;
  const absl::Status s = ForEachZipMember(
      path, [&](unzFile z, const unz_file_info64& info, const std::string& name) -> absl::Status {
        auto r = ZipMemberReader::Open(z, info, name);
        if (!r.ok()) return r.status();
        return (*r)->ReadRest(12288, "its first bytes", &got);
      });
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(s.message(),
              HasSubstr("x: inflated past the declared 12288 bytes (its first bytes)"));
  EXPECT_LE(got.size(), 12288u + 1);
}

TEST(ZipMemberTest, AnInflatingMemberReadsBackWhole) {
  // The bomb writer itself: 40 MiB (two blocks and a rest) read back and CRC-checked.
  const uint64_t n = (uint64_t{40} << 20) + 7;
  const std::string path = Archive("whole.zip", [n](zipFile zf) {
    return testing::AddInflatingMember(zf, "w", "head:", 'w', n);
  });
  auto members = ReadZipFile(path, uint64_t{64} << 20);
  ASSERT_TRUE(members.ok()) << members.status();
  ASSERT_EQ(members->size(), 1u);
  const std::string& w = (*members)[0].second;
  ASSERT_EQ(w.size(), 5 + n);
  EXPECT_EQ(w.substr(0, 6), "head:w");
  EXPECT_EQ(w.find_first_not_of('w', 5), std::string::npos);
}

// A member copied from a file a piece at a time (over one 1 MiB piece):
// the archive holds it byte for byte; a file that is not there is
// NOT_FOUND naming it, and no archive is left.
TEST(ZipMemberTest, AMemberFromAFileIsCopiedWhole) {
  const std::string dir = ::testing::TempDir();
  const std::string from = dir + "/member.bin", zip = dir + "/from_file.zip";
  std::string bytes((size_t{1} << 20) * 2 + 13, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>((i * 131) % 251);
  {
    std::FILE* f = std::fopen(from.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
    std::fclose(f);
  }
  const std::string config = "{}";
  ASSERT_TRUE(WriteZipFile(zip, {{"config.json", &config}, {"w.h5", nullptr, false, from}}).ok());
  auto members = ReadZipFile(zip, uint64_t{64} << 20);
  ASSERT_TRUE(members.ok()) << members.status();
  ASSERT_EQ(members->size(), 2u);
  EXPECT_EQ((*members)[1].first, "w.h5");
  EXPECT_TRUE((*members)[1].second == bytes);
  const std::string none = dir + "/none.zip";
  absl::Status s = WriteZipFile(none, {{"w.h5", nullptr, false, dir + "/absent.bin"}});
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_THAT(s.message(), HasSubstr("absent.bin"));
  EXPECT_FALSE(std::filesystem::exists(none));
}

}  // namespace
}  // namespace io
}  // namespace psc
