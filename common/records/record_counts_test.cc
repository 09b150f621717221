#include "common/records/record_counts.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/io/testing/scratch_dir.h"
#include "common/tfrecord/framing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc::records {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class RecordCountsTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& bytes) {
    return dir_.Write(name, bytes);
  }
  io::testing::ScratchDir dir_{"record_counts_test"};
};

TEST_F(RecordCountsTest, CountsEachFileAndKeepsTheCountsInTheCache) {
  std::string three, big;
  for (int i = 0; i < 3; ++i) three += tfrecord::EncodeRecord(std::string(10 * i, 'x'));
  big = tfrecord::EncodeRecord(std::string(200000, 'y'));  // over the 64 KiB scratch
  const std::string a = Write("a.tfrecord", three);
  const std::string b = Write("b.tfrecord", big + three);
  const std::string c = Write("c.tfrecord", "");
  const std::string cache = dir_.path() + "/spec.json.counts";
  auto counts = CountRecords(io::LocalFileSystem(), {a, b, c}, {}, cache);
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_THAT(counts->records, ElementsAre(3, 4, 0));
  EXPECT_EQ(counts->counted, 3);
  ASSERT_TRUE(std::filesystem::exists(cache));

  // Again: from the cache, no file read; a file that changed is read again.
  auto again = CountRecords(io::LocalFileSystem(), {a, b, c}, {}, cache);
  ASSERT_TRUE(again.ok());
  EXPECT_THAT(again->records, ElementsAre(3, 4, 0));
  EXPECT_EQ(again->counted, 0);
  Write("c.tfrecord", three + three);
  again = CountRecords(io::LocalFileSystem(), {a, b, c}, {}, cache);
  ASSERT_TRUE(again.ok());
  EXPECT_THAT(again->records, ElementsAre(3, 4, 6));
  EXPECT_EQ(again->counted, 1);
  // A damaged cache is ignored.
  Write("spec.json.counts", "{\"files\": [{\"path\": 7}]");
  again = CountRecords(io::LocalFileSystem(), {a}, {}, cache);
  ASSERT_TRUE(again.ok());
  EXPECT_THAT(again->records, ElementsAre(3));
  EXPECT_EQ(again->counted, 1);
}

TEST_F(RecordCountsTest, CountsCsvRowsAndNamesDamage) {
  const std::string csv = Write("a.csv", "x,y\n1,2\n\"3\n\",4\n\n5,6\n");
  ReadOptions o;
  o.format = FileFormat::kCsv;
  auto counts = CountRecords(io::LocalFileSystem(), {csv}, o, "");
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_THAT(counts->records, ElementsAre(3));

  std::string cut = tfrecord::EncodeRecord("abc") + tfrecord::EncodeRecord("defgh");
  cut.resize(cut.size() - 2);
  const std::string path = Write("cut.tfrecord", cut);
  auto damaged = CountRecords(io::LocalFileSystem(), {path}, {}, "");
  ASSERT_FALSE(damaged.ok());
  EXPECT_EQ(damaged.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(damaged.status().message(), HasSubstr(absl::StrCat(path, ": truncated record")));
  EXPECT_THAT(damaged.status().message(), HasSubstr("at offset 19"));
  EXPECT_EQ(CountRecords(io::LocalFileSystem(), {dir_.path() + "/none"}, {}, "").status().code(),
            absl::StatusCode::kNotFound);
}

// Under skip_corrupt a damaged header ends the file's count there (its
// rest is lost, as a whole read loses it); such a file is not cached, so
// every job reports it. Without, it is DATA_LOSS naming the file.
TEST_F(RecordCountsTest, DamageEndsACountUnderSkipCorrupt) {
  std::string bytes;
  for (int i = 0; i < 4; ++i) bytes += tfrecord::EncodeRecord(std::string(20, 'z'));
  const size_t third = 2 * tfrecord::EncodeRecord(std::string(20, 'z')).size();
  bytes[third + 9] ^= 1;  // record 2's length CRC
  const std::string damaged = Write("d.tfrecord", bytes);
  const std::string fine = Write("f.tfrecord", tfrecord::EncodeRecord("ok"));
  const std::string cache = dir_.path() + "/spec.json.counts";
  auto failed = CountRecords(io::LocalFileSystem(), {fine, damaged}, {}, cache);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(failed.status().message(), HasSubstr("d.tfrecord"));
  ReadOptions skip;
  skip.skip_corrupt = true;
  for (int pass = 0; pass < 2; ++pass) {
    auto counts = CountRecords(io::LocalFileSystem(), {fine, damaged}, skip, cache);
    ASSERT_TRUE(counts.ok()) << counts.status();
    EXPECT_THAT(counts->records, ElementsAre(1, 2));
    EXPECT_EQ(counts->counted, pass == 0 ? 2 : 1);  // the damaged file every time
    ASSERT_EQ(counts->damaged.size(), 1u);
    EXPECT_EQ(counts->damaged[0].first, damaged);
    EXPECT_THAT(counts->damaged[0].second, HasSubstr("length CRC"));
  }
}

}  // namespace
}  // namespace psc::records
