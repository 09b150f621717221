#include "common/job/output_dirs.h"

#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace job {
namespace {

using ::testing::HasSubstr;

TEST(OutputDirsTest, CreatesTheDirectoryAndLeavesNoProbe) {
  const std::string dir = ::testing::TempDir() + "/output_dirs_test/a/b";
  std::filesystem::remove_all(::testing::TempDir() + "/output_dirs_test");
  ASSERT_TRUE(CheckOutputDirectory("--logdir", dir).ok());
  EXPECT_TRUE(std::filesystem::is_directory(dir));
  EXPECT_TRUE(std::filesystem::is_empty(dir)) << "the probe file is removed";
  EXPECT_TRUE(CheckOutputDirectory("--logdir", "").ok()) << "an unset flag";
}

// (Permission bits do not stop root, which CI runs as: a file in the way
// and /proc do.)
TEST(OutputDirsTest, AFileInTheWayOrAReadOnlyPlaceNamesTheFlag) {
  const std::string base = ::testing::TempDir() + "/output_dirs_file";
  std::filesystem::remove_all(base);
  std::filesystem::create_directories(base);
  std::ofstream(base + "/file") << "x";
  absl::Status s = CheckOutputDirectory("--checkpoint_dir", base + "/file/ckpt");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("--checkpoint_dir=" + base + "/file/ckpt: cannot create"));
  s = CheckOutputDirectory("--checkpoint_dir", base + "/file");
  EXPECT_THAT(s.message(), HasSubstr("not a directory"));
  s = CheckOutputDirectory("--logdir", "/proc/pscluster-logs");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("--logdir=/proc/pscluster-logs: cannot create"));
}

}  // namespace
}  // namespace job
}  // namespace psc
