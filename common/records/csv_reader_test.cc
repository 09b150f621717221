#include "common/records/csv_reader.h"

#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/io/testing/scratch_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc::records {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Rows = std::vector<std::vector<std::string>>;

class CsvReaderTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& bytes) {
    return dir_.Write(name, bytes);
  }

  // Every row, or the first error; the line of each row in *lines.
  absl::StatusOr<Rows> ReadAll(const std::string& path, std::vector<int64_t>* lines = nullptr,
                               uint64_t max = 1 << 20) {
    auto reader = CsvReader::Open(io::LocalFileSystem(), path, std::nullopt, max);
    if (!reader.ok()) return reader.status();
    Rows rows;
    for (int i = 0; i < 1000; ++i) {
      std::vector<std::string> fields;
      bool end = false;
      absl::Status s = (*reader)->Next(&fields, &end);
      if (!s.ok()) return s;
      if (end) return rows;
      rows.push_back(fields);
      if (lines != nullptr) lines->push_back((*reader)->line());
    }
    return absl::InternalError("no end");
  }

  io::testing::ScratchDir dir_{"csv_reader_test"};
};

TEST_F(CsvReaderTest, ReadsRfc4180) {
  std::vector<int64_t> lines;
  auto rows = ReadAll(Write("a.csv",
                            "a,b,c\r\n"
                            "1,\"x,y\",\"say \"\"hi\"\"\"\r\n"
                            "\n"
                            "2,\"two\nlines\",\n"
                            ",,\n"
                            "3,4,5"),
                      &lines);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 5u);
  EXPECT_THAT((*rows)[0], ElementsAre("a", "b", "c"));
  EXPECT_THAT((*rows)[1], ElementsAre("1", "x,y", "say \"hi\""));
  EXPECT_THAT((*rows)[2], ElementsAre("2", "two\nlines", ""));
  EXPECT_THAT((*rows)[3], ElementsAre("", "", ""));
  EXPECT_THAT((*rows)[4], ElementsAre("3", "4", "5"));
  EXPECT_THAT(lines, ElementsAre(1, 2, 4, 6, 7)) << "the line each row starts on";
  EXPECT_THAT(*ReadAll(Write("empty.csv", "")), ::testing::IsEmpty());
}

TEST_F(CsvReaderTest, ReadsGzip) {
  const std::string raw = "x,y\n1,2\n";
  std::string gz(256, '\0');
  z_stream z = {};
  ASSERT_EQ(deflateInit2(&z, 6, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY), Z_OK);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data()));
  z.avail_in = static_cast<uInt>(raw.size());
  z.next_out = reinterpret_cast<Bytef*>(gz.data());
  z.avail_out = static_cast<uInt>(gz.size());
  ASSERT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  gz.resize(z.total_out);
  deflateEnd(&z);
  auto rows = ReadAll(Write("a.csv.gz", gz));
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(*rows, (Rows{{"x", "y"}, {"1", "2"}}));
}

TEST_F(CsvReaderTest, RefusesBrokenQuotingNamingTheLine) {
  const struct {
    const char* bytes;
    const char* message;
  } cases[] = {
      {"a,b\n1,x\"y\n", "line 2: a quote inside an unquoted field"},
      {"a,b\n1,\"x\"y\n", "line 2: text after a closing quote"},
      {"a,b\n\n1,\"open\n\n", "line 3: the file ends inside a quoted field"},
      {"a,b\r1,2\n", "line 1: a carriage return outside quotes without a line feed"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.bytes);
    const std::string path = Write("bad.csv", c.bytes);
    auto rows = ReadAll(path);
    ASSERT_FALSE(rows.ok());
    EXPECT_EQ(rows.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(rows.status().message(), HasSubstr(path));
    EXPECT_THAT(rows.status().message(), HasSubstr(c.message));
  }
  // A row over the limit, counted as it is read.
  auto rows = ReadAll(Write("long.csv", "a\n" + std::string(100, 'x') + "\n"), nullptr, 64);
  ASSERT_FALSE(rows.ok());
  EXPECT_EQ(rows.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(rows.status().message(), HasSubstr("line 2: a row over 64 bytes"));
  EXPECT_EQ(CsvReader::Open(io::LocalFileSystem(), absl::StrCat(dir_.path(), "/none.csv"),
                            std::nullopt, 64)
                .status()
                .code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace psc::records
