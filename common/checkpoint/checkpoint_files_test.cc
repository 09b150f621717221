#include "common/checkpoint/checkpoint_files.h"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/io/faulty_file_system.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace checkpoint {
namespace {

namespace fs = std::filesystem;

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class CheckpointFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = (fs::path(::testing::TempDir()) /
             absl::StrCat("checkpoint_files_test.", ::getpid(), ".", info->name()))
                .string();
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  std::string Path(int64_t step, absl::string_view name) const {
    return (fs::path(CheckpointDir(root_, step)) / std::string(name)).string();
  }

  // Writes and asserts success.
  void Write(int64_t step, int shard, int num_shards, absl::string_view data) {
    auto paths = WriteShardCheckpoint(root_, step, shard, num_shards, data);
    ASSERT_TRUE(paths.ok()) << paths.status();
  }

  static std::string ReadFile(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }

  static void WriteFile(const std::string& path, absl::string_view contents) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    ASSERT_TRUE(out.good()) << path;
  }

  // Names of all entries under `dir` (recursively), relative to it.
  static std::vector<std::string> Entries(const std::string& dir) {
    std::vector<std::string> names;
    std::error_code ec;
    for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      names.push_back(fs::relative(it->path(), dir).string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }

  // Overwrites the index of shard 0 of 1 at `step` with `json`.
  void ReplaceIndex(int64_t step, absl::string_view json) {
    WriteFile(Path(step, "shard-0-of-1.index"), json);
  }

  std::string root_;
};

TEST_F(CheckpointFilesTest, CheckpointDirJoinsRootAndStep) {
  EXPECT_EQ(CheckpointDir("/ckpt", 40), "/ckpt/ckpt-40");
  EXPECT_EQ(CheckpointDir("/ckpt/", 0), "/ckpt/ckpt-0");
}

TEST_F(CheckpointFilesTest, RoundTripExplicitStepAndLatest) {
  const std::string data("weights\0and\xffslots", 17);
  auto paths = WriteShardCheckpoint(root_, 40, 0, 1, data);
  ASSERT_TRUE(paths.ok()) << paths.status();
  EXPECT_THAT(*paths, ElementsAre(Path(40, "shard-0-of-1.data"), Path(40, "shard-0-of-1.index")));
  EXPECT_EQ(ReadFile((*paths)[0]), data);

  auto explicit_step = ReadShardCheckpoint(root_, 40, 0, 1);
  ASSERT_TRUE(explicit_step.ok()) << explicit_step.status();
  EXPECT_EQ(explicit_step->step, 40);
  EXPECT_EQ(explicit_step->data, data);

  auto latest = ReadShardCheckpoint(root_, -1, 0, 1);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(latest->step, 40);
  EXPECT_EQ(latest->data, data);
}

TEST_F(CheckpointFilesTest, IndexIsTheDocumentedJson) {
  Write(7, 1, 2, "abc");
  // zlib crc32("abc") == 0x352441c2 == 891568578.
  EXPECT_EQ(ReadFile(Path(7, "shard-1-of-2.index")),
            "{\"format\":1,\"step\":7,\"shard\":1,\"num_shards\":2,\"files\":[{\"name\":"
            "\"shard-1-of-2.data\",\"bytes\":3,\"crc32\":891568578}]}\n");
}

TEST_F(CheckpointFilesTest, LatestPicksNewestCompleteStep) {
  Write(10, 0, 1, "ten");
  Write(30, 0, 1, "thirty");
  Write(20, 0, 1, "twenty");
  Write(40, 0, 1, "forty");
  ASSERT_TRUE(fs::remove(Path(40, "shard-0-of-1.index")));  // A crash before the index.

  auto latest = ReadShardCheckpoint(root_, -1, 0, 1);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(latest->step, 30);
  EXPECT_EQ(latest->data, "thirty");
}

TEST_F(CheckpointFilesTest, LatestDoesNotFallBackPastACorruptNewest) {
  Write(10, 0, 1, "ten");
  Write(20, 0, 1, "twenty");
  WriteFile(Path(20, "shard-0-of-1.data"), "TWENTY");
  auto latest = ReadShardCheckpoint(root_, -1, 0, 1);
  EXPECT_EQ(latest.status().code(), absl::StatusCode::kDataLoss) << latest.status();
}

TEST_F(CheckpointFilesTest, OverwriteSameStep) {
  Write(5, 0, 1, "first version, rather long");
  Write(5, 0, 1, "second");
  auto read = ReadShardCheckpoint(root_, 5, 0, 1);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->data, "second");
  EXPECT_THAT(Entries(CheckpointDir(root_, 5)),
              ElementsAre("shard-0-of-1.data", "shard-0-of-1.index"));
}

TEST_F(CheckpointFilesTest, EmptyData) {
  Write(0, 0, 1, "");
  auto read = ReadShardCheckpoint(root_, 0, 0, 1);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->step, 0);
  EXPECT_EQ(read->data, "");
}

TEST_F(CheckpointFilesTest, ShardsOfOneStepCoexist) {
  Write(12, 0, 3, "zero");
  Write(12, 2, 3, "two");
  Write(12, 1, 3, "one");
  const std::vector<std::string> expected = {"zero", "one", "two"};
  for (int shard = 0; shard < 3; ++shard) {
    auto read = ReadShardCheckpoint(root_, 12, shard, 3);
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_EQ(read->data, expected[shard]);
    auto steps = ListShardCheckpoints(root_, shard, 3);
    ASSERT_TRUE(steps.ok()) << steps.status();
    EXPECT_THAT(*steps, ElementsAre(12));
  }
}

TEST_F(CheckpointFilesTest, OtherShardCountIsFailedPrecondition) {
  Write(40, 0, 2, "a");
  Write(40, 1, 2, "b");

  auto at_step = ReadShardCheckpoint(root_, 40, 0, 1);
  EXPECT_EQ(at_step.status().code(), absl::StatusCode::kFailedPrecondition) << at_step.status();
  EXPECT_THAT(at_step.status().message(), HasSubstr("ckpt-40 was written by 2 shards"));
  EXPECT_THAT(at_step.status().message(), HasSubstr("this cluster has 1"));

  auto latest = ReadShardCheckpoint(root_, -1, 0, 1);
  EXPECT_EQ(latest.status().code(), absl::StatusCode::kFailedPrecondition) << latest.status();
  EXPECT_THAT(latest.status().message(), HasSubstr("ckpt-40 was written by 2 shards"));
  EXPECT_THAT(latest.status().message(), HasSubstr("this cluster has 1"));
}

TEST_F(CheckpointFilesTest, MissingRootIsNotFound) {
  auto latest = ReadShardCheckpoint(root_, -1, 0, 1);
  EXPECT_EQ(latest.status().code(), absl::StatusCode::kNotFound) << latest.status();
  EXPECT_THAT(latest.status().message(), HasSubstr(root_));

  auto at_step = ReadShardCheckpoint(root_, 3, 0, 1);
  EXPECT_EQ(at_step.status().code(), absl::StatusCode::kNotFound) << at_step.status();
  EXPECT_THAT(at_step.status().message(), HasSubstr(root_));
}

TEST_F(CheckpointFilesTest, MissingStepIsNotFound) {
  Write(10, 0, 1, "ten");
  auto read = ReadShardCheckpoint(root_, 11, 0, 1);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound) << read.status();
  EXPECT_THAT(read.status().message(), HasSubstr(CheckpointDir(root_, 11)));

  // A root with only junk in it has no latest checkpoint either.
  fs::create_directories(CheckpointDir(root_, 99));
  Write(50, 1, 2, "another shard");
  fs::remove_all(CheckpointDir(root_, 10));
  auto latest = ReadShardCheckpoint(root_, -1, 0, 1);
  EXPECT_EQ(latest.status().code(), absl::StatusCode::kNotFound) << latest.status();
}

TEST_F(CheckpointFilesTest, TruncatedDataIsDataLoss) {
  Write(1, 0, 1, "0123456789");
  const std::string data_path = Path(1, "shard-0-of-1.data");
  fs::resize_file(data_path, 4);
  auto read = ReadShardCheckpoint(root_, 1, 0, 1);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss) << read.status();
  EXPECT_THAT(read.status().message(), HasSubstr(data_path));
  EXPECT_THAT(read.status().message(), HasSubstr("truncated"));
}

TEST_F(CheckpointFilesTest, FlippedByteIsDataLoss) {
  Write(1, 0, 1, "0123456789");
  const std::string data_path = Path(1, "shard-0-of-1.data");
  std::string data = ReadFile(data_path);
  data[5] ^= 0x01;
  WriteFile(data_path, data);
  auto read = ReadShardCheckpoint(root_, 1, 0, 1);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss) << read.status();
  EXPECT_THAT(read.status().message(), HasSubstr(data_path));
  EXPECT_THAT(read.status().message(), HasSubstr("corrupt"));
}

// Held open instead of read: the same checks (the crc32 over pieces of a
// MiB, past the first), the newest for -1, and the bytes read by range.
TEST_F(CheckpointFilesTest, AnOpenCheckpointIsVerifiedAndReadByRange) {
  std::string data((size_t{1} << 20) + 100, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7);
  Write(1, 0, 1, "old");
  Write(3, 0, 1, data);
  auto open = OpenShardCheckpoint(root_, -1, 0, 1);
  ASSERT_TRUE(open.ok()) << open.status();
  EXPECT_EQ(open->step, 3);
  ASSERT_EQ(open->file->size(), data.size());
  std::string piece(50, '\0');
  ASSERT_TRUE(open->file->Read((size_t{1} << 20) + 10, 50, piece.data()).ok());
  EXPECT_EQ(piece, data.substr((size_t{1} << 20) + 10, 50));
  // A byte flipped in the second MiB: corrupt, naming the file.
  const std::string data_path = Path(3, "shard-0-of-1.data");
  data[(size_t{1} << 20) + 3] ^= 0x01;
  WriteFile(data_path, data);
  auto corrupt = OpenShardCheckpoint(root_, 3, 0, 1);
  EXPECT_EQ(corrupt.status().code(), absl::StatusCode::kDataLoss) << corrupt.status();
  EXPECT_THAT(corrupt.status().message(), HasSubstr(data_path));
  EXPECT_THAT(corrupt.status().message(), HasSubstr("corrupt"));
  fs::resize_file(data_path, 4);
  auto truncated = OpenShardCheckpoint(root_, 3, 0, 1);
  EXPECT_EQ(truncated.status().code(), absl::StatusCode::kDataLoss) << truncated.status();
  EXPECT_THAT(truncated.status().message(), HasSubstr("truncated"));
  EXPECT_EQ(OpenShardCheckpoint(root_, 2, 0, 1).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(CheckpointFilesTest, LongerDataIsDataLoss) {
  Write(1, 0, 1, "0123456789");
  const std::string data_path = Path(1, "shard-0-of-1.data");
  WriteFile(data_path, "0123456789extra");
  auto read = ReadShardCheckpoint(root_, 1, 0, 1);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss) << read.status();
  EXPECT_THAT(read.status().message(), HasSubstr(data_path));
}

TEST_F(CheckpointFilesTest, DeletedDataFileIsDataLoss) {
  Write(1, 0, 1, "0123456789");
  const std::string data_path = Path(1, "shard-0-of-1.data");
  ASSERT_TRUE(fs::remove(data_path));
  auto read = ReadShardCheckpoint(root_, 1, 0, 1);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss) << read.status();
  EXPECT_THAT(read.status().message(), HasSubstr(data_path));
  EXPECT_THAT(read.status().message(), HasSubstr("missing"));
}

TEST_F(CheckpointFilesTest, DeletedIndexIsNotFound) {
  Write(1, 0, 1, "0123456789");
  const std::string index_path = Path(1, "shard-0-of-1.index");
  ASSERT_TRUE(fs::remove(index_path));
  auto read = ReadShardCheckpoint(root_, 1, 0, 1);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound) << read.status();
  EXPECT_THAT(read.status().message(), HasSubstr(index_path));
  EXPECT_THAT(read.status().message(), HasSubstr("incomplete"));
}

TEST_F(CheckpointFilesTest, IndexNotJsonIsDataLoss) {
  Write(1, 0, 1, "0123456789");
  ReplaceIndex(1, "{\"format\": 1, \"step\": ");
  auto read = ReadShardCheckpoint(root_, 1, 0, 1);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss) << read.status();
  EXPECT_THAT(read.status().message(), HasSubstr(Path(1, "shard-0-of-1.index")));
  EXPECT_THAT(read.status().message(), HasSubstr("not valid JSON"));
}

TEST_F(CheckpointFilesTest, IndexMissingFieldsIsDataLoss) {
  Write(1, 0, 1, "0123456789");
  const std::vector<std::string> bad_indexes = {
      "[1, 2]",
      "{\"step\": 1, \"shard\": 0, \"num_shards\": 1, \"files\": []}",
      "{\"format\": 1, \"shard\": 0, \"num_shards\": 1, \"files\": []}",
      "{\"format\": 1, \"step\": 1, \"num_shards\": 1, \"files\": []}",
      "{\"format\": 1, \"step\": 1, \"shard\": 0, \"files\": []}",
      "{\"format\": 1, \"step\": 1, \"shard\": 0, \"num_shards\": 1}",
      "{\"format\": 1, \"step\": 1, \"shard\": 0, \"num_shards\": 1, \"files\": []}",
      "{\"format\": 1, \"step\": \"1\", \"shard\": 0, \"num_shards\": 1, \"files\": []}",
      "{\"format\": 2, \"step\": 1, \"shard\": 0, \"num_shards\": 1, \"files\": []}",
      "{\"format\": 1, \"step\": 1, \"shard\": 0, \"num_shards\": 1, \"files\": "
      "[{\"name\": \"shard-0-of-1.data\", \"bytes\": 10}]}",
      "{\"format\": 1, \"step\": 1, \"shard\": 0, \"num_shards\": 1, \"files\": "
      "[{\"name\": \"shard-0-of-1.data\", \"crc32\": 1}]}",
      "{\"format\": 1, \"step\": 1, \"shard\": 0, \"num_shards\": 1, \"files\": "
      "[{\"bytes\": 10, \"crc32\": 1}]}",
      "{\"format\": 1, \"step\": 1, \"shard\": 0, \"num_shards\": 1, \"files\": "
      "[{\"name\": \"x.data\", \"bytes\": 10, \"crc32\": 1}]}",
      "{\"format\": 1, \"step\": 1, \"shard\": 0, \"num_shards\": 1, \"files\": "
      "[{\"name\": \"shard-0-of-1.data\", \"bytes\": -1, \"crc32\": 1}]}",
      "{\"format\": 1, \"step\": 1, \"shard\": 0, \"num_shards\": 1, \"files\": "
      "[{\"name\": \"shard-0-of-1.data\", \"bytes\": 10, \"crc32\": 4294967296}]}",
  };
  for (const std::string& json : bad_indexes) {
    ReplaceIndex(1, json);
    auto read = ReadShardCheckpoint(root_, 1, 0, 1);
    EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss) << json << ": " << read.status();
    EXPECT_THAT(read.status().message(), HasSubstr(Path(1, "shard-0-of-1.index"))) << json;
  }
}

TEST_F(CheckpointFilesTest, IndexWithWrongCrcIsDataLoss) {
  Write(1, 0, 1, "0123456789");
  ReplaceIndex(1,
               "{\"format\": 1, \"step\": 1, \"shard\": 0, \"num_shards\": 1, \"files\": "
               "[{\"name\": \"shard-0-of-1.data\", \"bytes\": 10, \"crc32\": 12345}]}");
  auto read = ReadShardCheckpoint(root_, 1, 0, 1);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss) << read.status();
  EXPECT_THAT(read.status().message(), HasSubstr(Path(1, "shard-0-of-1.data")));
  EXPECT_THAT(read.status().message(), HasSubstr("corrupt"));
}

TEST_F(CheckpointFilesTest, IndexWithWrongBytesIsDataLoss) {
  Write(1, 0, 1, "0123456789");
  ReplaceIndex(1,
               "{\"format\": 1, \"step\": 1, \"shard\": 0, \"num_shards\": 1, \"files\": "
               "[{\"name\": \"shard-0-of-1.data\", \"bytes\": 11, \"crc32\": 0}]}");
  auto read = ReadShardCheckpoint(root_, 1, 0, 1);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss) << read.status();
  EXPECT_THAT(read.status().message(), HasSubstr(Path(1, "shard-0-of-1.data")));
  EXPECT_THAT(read.status().message(), HasSubstr("truncated"));
}

TEST_F(CheckpointFilesTest, IndexNamingAnotherStepShardOrCountIsDataLoss) {
  Write(1, 0, 1, "0123456789");
  Write(2, 0, 1, "0123456789");
  // Step 2's index copied into step 1: every byte of the data still matches.
  ReplaceIndex(1, ReadFile(Path(2, "shard-0-of-1.index")));
  auto read = ReadShardCheckpoint(root_, 1, 0, 1);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss) << read.status();
  EXPECT_THAT(read.status().message(), HasSubstr(Path(1, "shard-0-of-1.index")));
  EXPECT_THAT(read.status().message(), HasSubstr("step 2"));

  for (const char* json : {
           "{\"format\": 1, \"step\": 1, \"shard\": 1, \"num_shards\": 1, \"files\": []}",
           "{\"format\": 1, \"step\": 1, \"shard\": 0, \"num_shards\": 2, \"files\": []}",
       }) {
    ReplaceIndex(1, json);
    read = ReadShardCheckpoint(root_, 1, 0, 1);
    EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss) << json << ": " << read.status();
    EXPECT_THAT(read.status().message(), HasSubstr(Path(1, "shard-0-of-1.index")));
  }
}

TEST_F(CheckpointFilesTest, NoTempFilesAfterWrite) {
  Write(3, 0, 2, "first");
  Write(3, 0, 2, "overwritten");
  Write(3, 1, 2, "other shard");
  EXPECT_THAT(Entries(root_),
              ElementsAre("ckpt-3", "ckpt-3/shard-0-of-2.data", "ckpt-3/shard-0-of-2.index",
                          "ckpt-3/shard-1-of-2.data", "ckpt-3/shard-1-of-2.index"));
}

TEST_F(CheckpointFilesTest, InvalidArguments) {
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(WriteShardCheckpoint(root_, -1, 0, 1, "x").status().code(), kInvalid);
  EXPECT_EQ(WriteShardCheckpoint(root_, 1, 0, 0, "x").status().code(), kInvalid);
  EXPECT_EQ(WriteShardCheckpoint(root_, 1, 1, 1, "x").status().code(), kInvalid);
  EXPECT_EQ(WriteShardCheckpoint(root_, 1, -1, 1, "x").status().code(), kInvalid);
  EXPECT_EQ(WriteShardCheckpoint("", 1, 0, 1, "x").status().code(), kInvalid);
  EXPECT_FALSE(fs::exists(root_));

  EXPECT_EQ(ReadShardCheckpoint(root_, -2, 0, 1).status().code(), kInvalid);
  EXPECT_EQ(ReadShardCheckpoint(root_, 1, 0, 0).status().code(), kInvalid);
  EXPECT_EQ(ReadShardCheckpoint(root_, 1, 2, 2).status().code(), kInvalid);
  EXPECT_EQ(ReadShardCheckpoint("", 1, 0, 1).status().code(), kInvalid);

  EXPECT_EQ(ListShardCheckpoints(root_, 0, 0).status().code(), kInvalid);
  EXPECT_EQ(ListShardCheckpoints(root_, 3, 3).status().code(), kInvalid);
  EXPECT_EQ(ListShardCheckpoints("", 0, 1).status().code(), kInvalid);

  EXPECT_EQ(PruneShardCheckpoints(root_, 0, 1, 0).code(), kInvalid);
  EXPECT_EQ(PruneShardCheckpoints(root_, 0, 1, -3).code(), kInvalid);
  EXPECT_EQ(PruneShardCheckpoints(root_, -1, 1, 1).code(), kInvalid);
  EXPECT_EQ(PruneShardCheckpoints("", 0, 1, 1).code(), kInvalid);
}

TEST_F(CheckpointFilesTest, IoFailureIsInternalAndLeavesNoIndexOrTempFiles) {
  // The root is a regular file: the step directory cannot be created.
  fs::create_directories(fs::path(root_).parent_path());
  WriteFile(root_, "not a directory");
  auto blocked = WriteShardCheckpoint(root_, 1, 0, 1, "x");
  EXPECT_EQ(blocked.status().code(), absl::StatusCode::kInternal) << blocked.status();
  EXPECT_THAT(blocked.status().message(), HasSubstr(root_));
  ASSERT_TRUE(fs::remove(root_));

  // The data file's final name is taken by a non-empty directory: the rename
  // fails after the temp file was written.
  Write(1, 0, 1, "old");
  ASSERT_TRUE(fs::remove(Path(1, "shard-0-of-1.data")));
  fs::create_directories(Path(1, "shard-0-of-1.data/occupied"));
  auto failed = WriteShardCheckpoint(root_, 1, 0, 1, "new");
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kInternal) << failed.status();
  EXPECT_THAT(failed.status().message(), HasSubstr(Path(1, "shard-0-of-1.data")));
  EXPECT_THAT(Entries(CheckpointDir(root_, 1)),
              ElementsAre("shard-0-of-1.data", "shard-0-of-1.data/occupied"));
  auto read = ReadShardCheckpoint(root_, 1, 0, 1);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound) << read.status();
}

// Through the file-system seam: a write that fails at the index leaves no
// index (the checkpoint is invisible), one that fails at the data while
// overwriting leaves no stale index describing other bytes.
TEST_F(CheckpointFilesTest, AFailedWriteNeverLeavesAnIndexThatLies) {
  io::FaultyFileSystem fs;
  fs.Fail(io::Op::kWriteAtomically, ".index", absl::InternalError("No space left on device"));
  auto failed = WriteShardCheckpoint(root_, 3, 0, 1, "data", &fs);
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(failed.status().message(), HasSubstr("No space left"));
  EXPECT_EQ(ReadShardCheckpoint(root_, 3, 0, 1).status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(*ListShardCheckpoints(root_, 0, 1), IsEmpty());

  Write(4, 0, 1, "old");
  io::FaultyFileSystem data_fails;
  data_fails.Fail(io::Op::kWriteAtomically, ".data", absl::InternalError("Input/output error"));
  failed = WriteShardCheckpoint(root_, 4, 0, 1, "new", &data_fails);
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kInternal);
  auto read = ReadShardCheckpoint(root_, 4, 0, 1);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound) << read.status();
}

TEST_F(CheckpointFilesTest, ListMissingRootIsEmpty) {
  auto steps = ListShardCheckpoints(root_, 0, 1);
  ASSERT_TRUE(steps.ok()) << steps.status();
  EXPECT_THAT(*steps, IsEmpty());
}

TEST_F(CheckpointFilesTest, ListIgnoresJunk) {
  Write(100, 0, 1, "a");
  Write(9, 0, 1, "b");
  Write(20, 0, 1, "c");
  Write(30, 0, 2, "other count");
  Write(31, 1, 1 + 1, "other shard");
  Write(35, 0, 1, "incomplete");
  ASSERT_TRUE(fs::remove(Path(35, "shard-0-of-1.index")));
  fs::create_directories(fs::path(root_) / "ckpt-abc");
  fs::create_directories(fs::path(root_) / "ckpt-");
  fs::create_directories(fs::path(root_) / "ckpt-007");
  fs::create_directories(fs::path(root_) / "ckpt--5");
  fs::create_directories(fs::path(root_) / "ckpt-+6");
  fs::create_directories(fs::path(root_) / "checkpoint-8");
  WriteFile((fs::path(root_) / "ckpt-7").string(), "a file, not a directory");
  WriteFile((fs::path(root_) / "ckpt-007" / "shard-0-of-1.index").string(), "{}");
  WriteFile(Path(35, "shard-0-of-1.index.tmp.123.4"), "temp");

  auto steps = ListShardCheckpoints(root_, 0, 1);
  ASSERT_TRUE(steps.ok()) << steps.status();
  EXPECT_THAT(*steps, ElementsAre(9, 20, 100));
}

TEST_F(CheckpointFilesTest, PruneKeepsNewestAndRemovesEmptyDirs) {
  for (int64_t step : {10, 20, 30, 40, 50}) Write(step, 0, 1, absl::StrCat("step ", step));
  WriteFile(Path(10, "shard-0-of-1.data.tmp.99.0"), "stray");
  WriteFile(Path(20, "shard-0-of-1.index.tmp.99.1"), "stray");

  ASSERT_TRUE(PruneShardCheckpoints(root_, 0, 1, 2).ok());
  auto steps = ListShardCheckpoints(root_, 0, 1);
  ASSERT_TRUE(steps.ok()) << steps.status();
  EXPECT_THAT(*steps, ElementsAre(40, 50));
  EXPECT_THAT(Entries(root_),
              ElementsAre("ckpt-40", "ckpt-40/shard-0-of-1.data", "ckpt-40/shard-0-of-1.index",
                          "ckpt-50", "ckpt-50/shard-0-of-1.data", "ckpt-50/shard-0-of-1.index"));
  auto read = ReadShardCheckpoint(root_, 40, 0, 1);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->data, "step 40");

  // Keeping more than there are deletes nothing.
  ASSERT_TRUE(PruneShardCheckpoints(root_, 0, 1, 5).ok());
  EXPECT_THAT(*ListShardCheckpoints(root_, 0, 1), ElementsAre(40, 50));
}

TEST_F(CheckpointFilesTest, PruneLeavesNewerIncompleteStepsAlone) {
  Write(10, 0, 1, "ten");
  Write(20, 0, 1, "twenty");
  Write(30, 0, 1, "in progress");
  ASSERT_TRUE(fs::remove(Path(30, "shard-0-of-1.index")));
  ASSERT_TRUE(PruneShardCheckpoints(root_, 0, 1, 1).ok());
  EXPECT_THAT(Entries(root_),
              ElementsAre("ckpt-20", "ckpt-20/shard-0-of-1.data", "ckpt-20/shard-0-of-1.index",
                          "ckpt-30", "ckpt-30/shard-0-of-1.data"));
}

TEST_F(CheckpointFilesTest, PruneLeavesOtherShardsFilesAlone) {
  for (int64_t step : {10, 20, 30}) {
    Write(step, 0, 2, "mine");
    if (step != 30) Write(step, 1, 2, "theirs");
  }
  Write(10, 0, 4, "same index, other count");
  WriteFile(Path(20, "shard-1-of-2.data.tmp.77.3"), "their temp");

  ASSERT_TRUE(PruneShardCheckpoints(root_, 0, 2, 1).ok());
  EXPECT_THAT(*ListShardCheckpoints(root_, 0, 2), ElementsAre(30));
  EXPECT_THAT(*ListShardCheckpoints(root_, 1, 2), ElementsAre(10, 20));
  EXPECT_THAT(*ListShardCheckpoints(root_, 0, 4), ElementsAre(10));
  EXPECT_TRUE(fs::exists(Path(20, "shard-1-of-2.data.tmp.77.3")));
  for (int64_t step : {10, 20}) {
    auto read = ReadShardCheckpoint(root_, step, 1, 2);
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_EQ(read->data, "theirs");
  }
}

TEST_F(CheckpointFilesTest, PruneRejectsKeepBelowOne) {
  Write(10, 0, 1, "ten");
  const absl::Status status = PruneShardCheckpoints(root_, 0, 1, 0);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(*ListShardCheckpoints(root_, 0, 1), ElementsAre(10));
}

TEST_F(CheckpointFilesTest, PruneOfMissingRootIsOk) {
  EXPECT_TRUE(PruneShardCheckpoints(root_, 0, 1, 1).ok());
}

TEST_F(CheckpointFilesTest, ListCompleteFindsStepsWithEveryShard) {
  Write(10, 0, 1, "one shard");
  Write(20, 0, 2, "a");
  Write(20, 1, 2, "b");
  Write(30, 1, 2, "only shard 1 so far");  // shard 0 still writing
  Write(40, 0, 3, "x");
  Write(40, 2, 3, "z");  // shard 1 of 3 missing
  Write(40, 0, 1, "and one of 1");
  Write(50, 0, 2, "c");
  Write(50, 1, 2, "d");
  ASSERT_TRUE(fs::remove(Path(50, "shard-1-of-2.index")));  // a crash before its index
  auto complete = ListCompleteCheckpoints(root_);
  ASSERT_TRUE(complete.ok()) << complete.status();
  EXPECT_THAT(*complete, ElementsAre(CompleteCheckpoint{10, 1}, CompleteCheckpoint{20, 2},
                                     CompleteCheckpoint{40, 1}));
}

TEST_F(CheckpointFilesTest, ListCompleteListsEveryCompleteShardCountOfAStep) {
  for (int shard = 0; shard < 3; ++shard) Write(7, shard, 3, "three");
  Write(7, 0, 1, "one");
  auto complete = ListCompleteCheckpoints(root_);
  ASSERT_TRUE(complete.ok()) << complete.status();
  EXPECT_THAT(*complete, ElementsAre(CompleteCheckpoint{7, 1}, CompleteCheckpoint{7, 3}));
}

TEST_F(CheckpointFilesTest, ListCompleteIgnoresJunkAndMissingRoot) {
  auto empty = ListCompleteCheckpoints(root_);
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_THAT(*empty, IsEmpty());

  Write(5, 0, 1, "five");
  fs::create_directories(fs::path(root_) / "ckpt-007");
  WriteFile((fs::path(root_) / "ckpt-007" / "shard-0-of-1.index").string(), "{}");
  fs::create_directories(CheckpointDir(root_, 6));
  for (const char* junk :
       {"shard-00-of-1.index", "shard-0-of-01.index", "shard-1-of-1.index", "shard-0-of-0.index",
        "shard--of-1.index", "shard-0-of-1.index.tmp.1.2", "shard-0-1.index", "notes.index"}) {
    WriteFile(Path(6, junk), "junk");
  }
  WriteFile((fs::path(root_) / "ckpt-8").string(), "a file, not a directory");
  auto complete = ListCompleteCheckpoints(root_);
  ASSERT_TRUE(complete.ok()) << complete.status();
  EXPECT_THAT(*complete, ElementsAre(CompleteCheckpoint{5, 1}));

  EXPECT_EQ(ListCompleteCheckpoints("").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(CheckpointFilesTest, ListCompleteOfARootThatIsAFileIsInternal) {
  fs::create_directories(fs::path(root_).parent_path());
  WriteFile(root_, "not a directory");
  auto complete = ListCompleteCheckpoints(root_);
  EXPECT_EQ(complete.status().code(), absl::StatusCode::kInternal) << complete.status();
  EXPECT_THAT(complete.status().message(), HasSubstr(root_));
  ASSERT_TRUE(fs::remove(root_));
}

}  // namespace
}  // namespace checkpoint
}  // namespace psc
