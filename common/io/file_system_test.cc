#include "common/io/file_system.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "common/io/faulty_file_system.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace io {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

class FileSystemTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(::testing::TempDir(), "/file_system_test_", getpid(), "_",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    ASSERT_TRUE(fs_->MakeDirs(dir_).ok());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::vector<std::string> Names() {
    auto names = fs_->ListDir(dir_);
    EXPECT_TRUE(names.ok()) << names.status();
    std::sort(names->begin(), names->end());
    return *names;
  }

  FileSystem* fs_ = LocalFileSystem();
  std::string dir_;
};

TEST_F(FileSystemTest, MakeDirsCreatesParentsAndRefusesAFileInTheWay) {
  EXPECT_TRUE(fs_->MakeDirs(dir_ + "/a/b/c").ok());
  EXPECT_TRUE(fs_->MakeDirs(dir_ + "/a/b/c").ok()) << "an existing directory is fine";
  EXPECT_EQ(*fs_->Type(dir_ + "/a/b"), FileType::kDirectory);
  ASSERT_TRUE(fs_->WriteFileAtomically(dir_ + "/f", "x").ok());
  absl::Status s = fs_->MakeDirs(dir_ + "/f");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr(dir_ + "/f"));
  s = fs_->MakeDirs(dir_ + "/f/under");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr(dir_ + "/f/under"));
  EXPECT_EQ(fs_->MakeDirs("").code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(FileSystemTest, WriteFileAtomicallyReplacesAndLeavesNoTemporaryFile) {
  const std::string path = dir_ + "/data";
  ASSERT_TRUE(fs_->WriteFileAtomically(path, "first").ok());
  ASSERT_TRUE(fs_->WriteFileAtomically(path, "second, longer").ok());
  EXPECT_EQ(*fs_->ReadFile(path), "second, longer");
  EXPECT_EQ(*fs_->FileSize(path), 14u);
  EXPECT_THAT(Names(), ElementsAre("data"));
  // The rename fails (a directory holds the name): the temporary file goes.
  std::filesystem::create_directories(dir_ + "/taken/occupied");
  absl::Status s = fs_->WriteFileAtomically(dir_ + "/taken", "x");
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(s.message(), HasSubstr("rename " + dir_ + "/taken.tmp."));
  EXPECT_THAT(Names(), ElementsAre("data", "taken"));
  EXPECT_EQ(fs_->WriteFileAtomically(dir_ + "/no/such/dir/x", "x").code(),
            absl::StatusCode::kNotFound);
}

TEST_F(FileSystemTest, WritableFilesAppendFlushAndCreateOnlyNewFiles) {
  const std::string path = dir_ + "/events";
  auto file = fs_->OpenForWrite(path, OpenMode::kCreateNew);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_TRUE((*file)->Append("ab").ok());
  EXPECT_EQ(*fs_->ReadFile(path), "") << "buffered until Flush";
  ASSERT_TRUE((*file)->Flush().ok());
  EXPECT_EQ(*fs_->ReadFile(path), "ab");
  ASSERT_TRUE((*file)->Append("c").ok());
  ASSERT_TRUE((*file)->Sync().ok());
  ASSERT_TRUE((*file)->Close().ok());
  EXPECT_TRUE((*file)->Close().ok());
  EXPECT_EQ((*file)->Append("x").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(fs_->OpenForWrite(path, OpenMode::kCreateNew).status().code(),
            absl::StatusCode::kAlreadyExists);
  auto more = fs_->OpenForWrite(path, OpenMode::kAppend);
  ASSERT_TRUE(more.ok());
  ASSERT_TRUE((*more)->Append("d").ok());
  more->reset();  // destruction flushes
  EXPECT_EQ(*fs_->ReadFile(path), "abcd");
}

TEST_F(FileSystemTest, ReadsListsAndRemoves) {
  EXPECT_EQ(fs_->ReadFile(dir_ + "/missing").status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(fs_->ReadFile(dir_ + "/missing").status().message(), HasSubstr(dir_ + "/missing"));
  EXPECT_EQ(fs_->FileSize(dir_ + "/missing").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(*fs_->Type(dir_ + "/missing"), FileType::kMissing);
  EXPECT_THAT(*fs_->ListDir(dir_ + "/missing"), IsEmpty());
  ASSERT_TRUE(fs_->WriteFileAtomically(dir_ + "/a", "1").ok());
  ASSERT_TRUE(fs_->MakeDirs(dir_ + "/d").ok());
  EXPECT_THAT(*fs_->ListDir(dir_), UnorderedElementsAre("a", "d"));
  EXPECT_EQ(*fs_->Type(dir_ + "/a"), FileType::kFile);
  EXPECT_TRUE(fs_->RemoveFile(dir_ + "/a").ok());
  EXPECT_TRUE(fs_->RemoveFile(dir_ + "/a").ok()) << "already gone";
  ASSERT_TRUE(fs_->WriteFileAtomically(dir_ + "/d/x", "1").ok());
  EXPECT_TRUE(fs_->RemoveDirIfEmpty(dir_ + "/d").ok());
  EXPECT_EQ(*fs_->Type(dir_ + "/d"), FileType::kDirectory) << "not empty: kept";
  EXPECT_TRUE(fs_->RemoveFile(dir_ + "/d/x").ok());
  EXPECT_TRUE(fs_->RemoveDirIfEmpty(dir_ + "/d").ok());
  EXPECT_EQ(*fs_->Type(dir_ + "/d"), FileType::kMissing);
  EXPECT_TRUE(fs_->SyncDir(dir_).ok());
  EXPECT_EQ(fs_->SyncDir(dir_ + "/missing").code(), absl::StatusCode::kNotFound);
}

// Reads by range: any bytes of the file, nothing beyond it, and the file
// as it was opened after a rename over its path (a checkpoint overwritten).
TEST_F(FileSystemTest, AFileOpenForReadReadsRangesOfTheFileItOpened) {
  EXPECT_EQ(fs_->OpenForRead(dir_ + "/missing").status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(fs_->WriteFileAtomically(dir_ + "/r", "0123456789").ok());
  auto file = fs_->OpenForRead(dir_ + "/r");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->size(), 10u);
  ASSERT_TRUE(fs_->WriteFileAtomically(dir_ + "/r", "abcdefghijklmnop").ok());
  std::string got(4, '\0');
  ASSERT_TRUE((*file)->Read(3, 4, got.data()).ok());
  EXPECT_EQ(got, "3456");
  ASSERT_TRUE((*file)->Read(10, 0, got.data()).ok());
  absl::Status beyond = (*file)->Read(8, 4, got.data());
  EXPECT_EQ(beyond.code(), absl::StatusCode::kOutOfRange) << beyond;
  EXPECT_THAT(beyond.message(), HasSubstr(dir_ + "/r"));
  FaultyFileSystem faulty;
  auto through = faulty.OpenForRead(dir_ + "/r");
  ASSERT_TRUE(through.ok());
  faulty.Fail(Op::kRead, "/r", absl::InternalError("EIO"));
  EXPECT_EQ((*through)->Read(0, 1, got.data()).message(), "EIO");
}

TEST_F(FileSystemTest, AFaultyFileSystemFailsWhatItIsToldAfterTheGivenCalls) {
  FaultyFileSystem faulty;
  faulty.Fail(Op::kWriteAtomically, "/victim", absl::InternalError("disk full"), /*after=*/1);
  EXPECT_TRUE(faulty.WriteFileAtomically(dir_ + "/victim", "1").ok());
  EXPECT_EQ(faulty.WriteFileAtomically(dir_ + "/victim", "2").message(), "disk full");
  EXPECT_TRUE(faulty.WriteFileAtomically(dir_ + "/other", "3").ok());
  EXPECT_EQ(*faulty.ReadFile(dir_ + "/victim"), "1") << "the failed write changed nothing";
  faulty.Fail(Op::kSync, "/log", absl::InternalError("EIO"));
  auto file = faulty.OpenForWrite(dir_ + "/log", OpenMode::kCreateNew);
  ASSERT_TRUE(file.ok());
  EXPECT_TRUE((*file)->Append("x").ok());
  EXPECT_EQ((*file)->Sync().message(), "EIO");
  EXPECT_EQ(faulty.failures(), 2);
}

}  // namespace
}  // namespace io
}  // namespace psc
