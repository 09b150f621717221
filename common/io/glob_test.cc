#include "common/io/glob.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace io {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(GlobTest, ExpandsToRegularFilesInNameOrder) {
  const std::string dir = absl::StrCat(::testing::TempDir(), "/glob_test_", getpid());
  std::filesystem::create_directories(dir + "/shard-dir.tfrecord");  // a directory: not a file
  for (const char* name : {"b-00001.tfrecord", "a-00000.tfrecord", "c.txt"}) {
    std::ofstream(absl::StrCat(dir, "/", name)) << "x";
  }
  auto files = ExpandGlob(dir + "/*.tfrecord");
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_THAT(*files, ElementsAre(dir + "/a-00000.tfrecord", dir + "/b-00001.tfrecord"));
  EXPECT_THAT(*ExpandGlob(dir + "/c.txt"), ElementsAre(dir + "/c.txt"));

  auto none = ExpandGlob(dir + "/*.gz");
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(none.status().message(), HasSubstr("matches no file"));
  for (const char* url : {"gs://bucket/train-*", "s3://b/x", "hdfs://nn/data"}) {
    auto remote = ExpandGlob(url);
    EXPECT_EQ(remote.status().code(), absl::StatusCode::kInvalidArgument) << url;
    EXPECT_THAT(remote.status().message(), HasSubstr(std::string(url).substr(0, 5)));
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace io
}  // namespace psc
