#include "common/summary/event_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/io/faulty_file_system.h"
#include "common/summary/tf_record.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace summary {
namespace {

using ::testing::HasSubstr;
using ::testing::SizeIs;
using ::testing::StartsWith;

// A record TensorFlow wrote: Event { wall_time, file_version: "brain.Event:2" }
// with wall_time bits 0x41d7d69938800000 (from TensorBoard's tf_record.rs tests).
const absl::string_view kTfFileVersionRecord(
    "\x18\x00\x00\x00\x00\x00\x00\x00"  // length 24
    "\xa3\x7f\x4b\x22"                  // masked CRC of the length
    "\x09\x00\x00\x80\x38\x99\xd6\xd7\x41\x1a\x0d"
    "brain.Event:2"
    "\x12\x4b\x36\xab",  // masked CRC of the data
    40);
// The next record of that file: tf.summary.scalar("accuracy", 0.99, step=77),
// a TF2 tensor-valued summary (Value.tensor and Value.metadata, no simple_value).
const absl::string_view kTfTensorScalarRecord(
    "\x32\x00\x00\x00\x00\x00\x00\x00"
    "\x24\x19\x56\xec"
    "\x09\xc4\x05\xb7\x3d\x99\xd6\xd7\x41"
    "\x10\x4d"
    "\x2a\x25"
    "\x0a\x23\x0a\x08"
    "accuracy"
    "\x42\x0a\x08\x01\x12\x00\x22\x04\xa4\x70\x7d\x3f"
    "\x4a\x0b\x0a\x09\x0a\x07"
    "scalars"
    "\xa5\x5b\x64\x33",
    66);

double DoubleFromBits(uint64_t bits) {
  double d;
  std::memcpy(&d, &bits, sizeof(d));
  return d;
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void WriteBytes(const std::string& path, absl::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A fresh, empty directory for one test, removed with its contents at the end.
class ScopedTestDir {
 public:
  ScopedTestDir() {
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = absl::StrCat(::testing::TempDir(), "/tensorboard_test_", getpid(), "_",
                         info->test_suite_name(), "_", info->name());
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
    std::filesystem::create_directories(path_, ec);
  }
  ~ScopedTestDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  return names;
}

TEST(EncodeTest, FileVersionRecordIsByteIdenticalToTensorFlows) {
  const double wall_time = DoubleFromBits(0x41d7d69938800000ull);
  EXPECT_EQ(EncodeRecord(EncodeFileVersionEvent(wall_time)), kTfFileVersionRecord);
}

TEST(EncodeTest, ScalarEventWireFormat) {
  const double wall_time = DoubleFromBits(0x41d7d6993db705c4ull);
  const absl::string_view want(
      "\x09\xc4\x05\xb7\x3d\x99\xd6\xd7\x41"  // wall_time: fixed64
      "\x10\x4d"                              // step 77: varint
      "\x2a\x0d"                              // summary: 13 bytes
      "\x0a\x0b"                              // value: 11 bytes
      "\x0a\x04loss"                          // tag
      "\x15\xa4\x70\x7d\x3f",                 // simple_value 0.99f: fixed32
      26);
  EXPECT_EQ(EncodeScalarEvent("loss", 77, 0.99f, wall_time), want);

  // Proto3 defaults are omitted; simple_value (a oneof member) is not.
  EXPECT_EQ(EncodeScalarEvent("a", 0, 0.0f, 0.0), absl::string_view("\x2a\x0a\x0a\x08\x0a\x01"
                                                                    "a\x15\x00\x00\x00\x00",
                                                                    12));
  // A negative step is a ten-byte varint.
  EXPECT_EQ(EncodeScalarEvent("a", -1, 0.0f, 0.0),
            absl::string_view("\x10\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"
                              "\x2a\x0a\x0a\x08\x0a\x01"
                              "a\x15\x00\x00\x00\x00",
                              23));
}

TEST(ReadEventFileTest, ReadsTensorFlowsFileAndSkipsTensorValues) {
  ScopedTestDir tmp;
  const std::string path = tmp.path() + "/events.out.tfevents.1.tf";
  WriteBytes(path, absl::StrCat(kTfFileVersionRecord, kTfTensorScalarRecord));
  absl::StatusOr<EventFile> file = ReadEventFile(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->file_version, "brain.Event:2");
  EXPECT_THAT(file->scalars, SizeIs(0));
}

TEST(EventWriterTest, WritesScalarsThatReadBack) {
  ScopedTestDir tmp;
  const std::string dir = tmp.path();
  const int64_t before = absl::ToUnixSeconds(absl::Now());
  absl::StatusOr<std::unique_ptr<EventWriter>> writer = EventWriter::Create(dir);
  ASSERT_TRUE(writer.ok()) << writer.status();
  const std::string path = (*writer)->path();

  // The name is events.out.tfevents.<unix seconds>.<hostname>.
  const std::string prefix = dir + "/events.out.tfevents.";
  ASSERT_THAT(path, StartsWith(prefix));
  const std::string rest = path.substr(prefix.size());
  int64_t seconds = 0;
  ASSERT_TRUE(absl::SimpleAtoi(rest.substr(0, rest.find('.')), &seconds)) << path;
  EXPECT_GE(seconds, before);
  EXPECT_LE(seconds, absl::ToUnixSeconds(absl::Now()));
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof(host) - 1), 0);
  EXPECT_EQ(rest.substr(rest.find('.') + 1), host);

  const float inf = std::numeric_limits<float>::infinity();
  ASSERT_TRUE((*writer)->AddScalar("loss", 0, 2.5f, 1000.25).ok());
  ASSERT_TRUE((*writer)->AddScalar("accuracy", 1, 0.125f, 1001.5).ok());
  ASSERT_TRUE((*writer)->AddScalar("val_loss", -3, -0.0f, 1002.0).ok());
  ASSERT_TRUE((*writer)->AddScalar("examples/s", int64_t{1} << 40, inf, 0.0).ok());
  ASSERT_TRUE((*writer)->AddScalar("staleness", 7, 3.0f).ok());  // wall_time = now
  ASSERT_TRUE((*writer)->Flush().ok());

  // Flushed records are readable while the writer is still open.
  absl::StatusOr<EventFile> file = ReadEventFile(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->file_version, "brain.Event:2");
  ASSERT_THAT(file->scalars, SizeIs(5));
  const std::vector<ScalarEvent>& s = file->scalars;
  EXPECT_EQ(s[0].tag, "loss");
  EXPECT_EQ(s[0].step, 0);
  EXPECT_EQ(s[0].value, 2.5f);
  EXPECT_EQ(s[0].wall_time, 1000.25);
  EXPECT_EQ(s[1].tag, "accuracy");
  EXPECT_EQ(s[1].step, 1);
  EXPECT_EQ(s[1].value, 0.125f);
  EXPECT_EQ(s[1].wall_time, 1001.5);
  EXPECT_EQ(s[2].tag, "val_loss");
  EXPECT_EQ(s[2].step, -3);
  EXPECT_EQ(s[2].value, 0.0f);
  EXPECT_TRUE(std::signbit(s[2].value));
  EXPECT_EQ(s[3].tag, "examples/s");
  EXPECT_EQ(s[3].step, int64_t{1} << 40);
  EXPECT_EQ(s[3].value, inf);
  EXPECT_EQ(s[3].wall_time, 0.0);
  EXPECT_EQ(s[4].tag, "staleness");
  EXPECT_EQ(s[4].step, 7);
  EXPECT_EQ(s[4].value, 3.0f);
  EXPECT_GE(s[4].wall_time, static_cast<double>(before));
  EXPECT_LE(s[4].wall_time, static_cast<double>(absl::ToUnixSeconds(absl::Now()) + 1));
}

TEST(EventWriterTest, FileStartsWithTheFileVersionEventAndSurvivesDestruction) {
  ScopedTestDir tmp;
  const std::string dir = tmp.path();
  std::string path;
  {
    absl::StatusOr<std::unique_ptr<EventWriter>> writer = EventWriter::Create(dir);
    ASSERT_TRUE(writer.ok()) << writer.status();
    path = (*writer)->path();
    // Create flushed the file_version event: TensorBoard sees a valid file at once.
    const std::string bytes = ReadBytes(path);
    ASSERT_EQ(bytes.size(), 40u);
    EXPECT_EQ(bytes.substr(0, 12), kTfFileVersionRecord.substr(0, 12));
    EXPECT_EQ(bytes.substr(21, 15), std::string("\x1a\x0d"
                                                "brain.Event:2"));
    ASSERT_TRUE((*writer)->AddScalar("loss", 1, 1.0f).ok());
  }  // The destructor flushes.
  absl::StatusOr<EventFile> file = ReadEventFile(path);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_THAT(file->scalars, SizeIs(1));
  EXPECT_EQ(file->scalars[0].tag, "loss");
}

TEST(EventWriterTest, CreatesNestedLogdir) {
  ScopedTestDir tmp;
  const std::string logdir = tmp.path() + "/a/b/c";
  absl::StatusOr<std::unique_ptr<EventWriter>> writer = EventWriter::Create(logdir);
  ASSERT_TRUE(writer.ok()) << writer.status();
  EXPECT_THAT((*writer)->path(), StartsWith(logdir + "/events.out.tfevents."));
  EXPECT_THAT(ListDir(logdir), SizeIs(1));
}

TEST(EventWriterTest, TwoWritersInOneDirWriteTwoFiles) {
  ScopedTestDir tmp;
  const std::string dir = tmp.path();
  absl::StatusOr<std::unique_ptr<EventWriter>> a = EventWriter::Create(dir);
  absl::StatusOr<std::unique_ptr<EventWriter>> b = EventWriter::Create(dir);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_NE((*a)->path(), (*b)->path());
  ASSERT_TRUE((*a)->AddScalar("from_a", 1, 1.0f).ok());
  ASSERT_TRUE((*b)->AddScalar("from_b", 2, 2.0f).ok());
  ASSERT_TRUE((*a)->Close().ok());
  ASSERT_TRUE((*b)->Close().ok());

  std::vector<std::string> names = ListDir(dir);
  ASSERT_THAT(names, SizeIs(2));
  for (const std::string& name : names) EXPECT_THAT(name, HasSubstr("tfevents"));
  absl::StatusOr<EventFile> fa = ReadEventFile((*a)->path());
  absl::StatusOr<EventFile> fb = ReadEventFile((*b)->path());
  ASSERT_TRUE(fa.ok()) << fa.status();
  ASSERT_TRUE(fb.ok()) << fb.status();
  ASSERT_THAT(fa->scalars, SizeIs(1));
  ASSERT_THAT(fb->scalars, SizeIs(1));
  EXPECT_EQ(fa->scalars[0].tag, "from_a");
  EXPECT_EQ(fb->scalars[0].tag, "from_b");
}

TEST(EventWriterTest, UnwritableLogdirIsAnErrorNamingIt) {
  ScopedTestDir tmp;
  const std::string dir = tmp.path();
  const std::string file = dir + "/not_a_dir";
  WriteBytes(file, "x");

  // Under a regular file: no directory can be made there, even by root.
  const std::string under_file = file + "/logs";
  absl::StatusOr<std::unique_ptr<EventWriter>> writer = EventWriter::Create(under_file);
  ASSERT_FALSE(writer.ok());
  EXPECT_EQ(writer.status().code(), absl::StatusCode::kInvalidArgument) << writer.status();
  EXPECT_THAT(writer.status().message(), HasSubstr(under_file));

  // The logdir itself is a regular file.
  writer = EventWriter::Create(file);
  ASSERT_FALSE(writer.ok());
  EXPECT_EQ(writer.status().code(), absl::StatusCode::kInvalidArgument) << writer.status();
  EXPECT_THAT(writer.status().message(), HasSubstr(file));

  writer = EventWriter::Create("");
  EXPECT_EQ(writer.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(EventWriterTest, ReadOnlyLogdirIsAnInternalErrorNamingTheFile) {
  ScopedTestDir tmp;
  if (geteuid() == 0) GTEST_SKIP() << "root ignores directory permissions";
  const std::string dir = tmp.path() + "/read_only";
  ASSERT_EQ(mkdir(dir.c_str(), 0555), 0);
  absl::StatusOr<std::unique_ptr<EventWriter>> writer = EventWriter::Create(dir);
  chmod(dir.c_str(), 0755);
  ASSERT_FALSE(writer.ok());
  EXPECT_EQ(writer.status().code(), absl::StatusCode::kInternal) << writer.status();
  EXPECT_THAT(writer.status().message(), HasSubstr(dir + "/events.out.tfevents."));
}

TEST(EventWriterTest, LifecycleAndArgumentErrors) {
  ScopedTestDir tmp;
  absl::StatusOr<std::unique_ptr<EventWriter>> writer = EventWriter::Create(tmp.path());
  ASSERT_TRUE(writer.ok()) << writer.status();
  EXPECT_EQ((*writer)->AddScalar("", 1, 1.0f).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE((*writer)->Close().ok());
  EXPECT_TRUE((*writer)->Close().ok());
  EXPECT_EQ((*writer)->AddScalar("loss", 1, 1.0f).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*writer)->Flush().code(), absl::StatusCode::kFailedPrecondition);
}

// A file of three records: file_version, then two scalars.
class CorruptionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = tmp_.path() + "/events.out.tfevents.1.test";
    first_ = EncodeRecord(EncodeFileVersionEvent(1.0));
    second_ = EncodeRecord(EncodeScalarEvent("loss", 1, 0.5f, 2.0));
    third_ = EncodeRecord(EncodeScalarEvent("loss", 2, 0.25f, 3.0));
    good_ = first_ + second_ + third_;
    WriteBytes(path_, good_);
    absl::StatusOr<EventFile> file = ReadEventFile(path_);
    ASSERT_TRUE(file.ok()) << file.status();
    ASSERT_THAT(file->scalars, SizeIs(2));
  }

  // Reads `bytes` as a file; expects DATA_LOSS naming the file, `what`, and the offset.
  void ExpectDataLoss(const std::string& bytes, absl::string_view what, size_t offset) {
    WriteBytes(path_, bytes);
    absl::StatusOr<EventFile> file = ReadEventFile(path_);
    ASSERT_FALSE(file.ok());
    EXPECT_EQ(file.status().code(), absl::StatusCode::kDataLoss) << file.status();
    EXPECT_THAT(file.status().message(), HasSubstr(path_));
    EXPECT_THAT(file.status().message(), HasSubstr(what));
    EXPECT_THAT(file.status().message(), HasSubstr(absl::StrCat("at offset ", offset)))
        << file.status();
  }

  ScopedTestDir tmp_;
  std::string path_, first_, second_, third_, good_;
};

TEST_F(CorruptionTest, FlippedDataByteIsABadDataCrc) {
  const size_t offset = first_.size();
  for (size_t i = 12; i < second_.size() - 4; ++i) {
    std::string bad = good_;
    bad[offset + i] ^= 0x01;
    ExpectDataLoss(bad, "bad data CRC", offset);
  }
  std::string bad = good_;
  bad[offset + second_.size() - 1] ^= 0x80;  // In the stored data CRC itself.
  ExpectDataLoss(bad, "bad data CRC", offset);
}

TEST_F(CorruptionTest, FlippedLengthOrLengthCrcByteIsABadLengthCrc) {
  const size_t offset = first_.size() + second_.size();
  for (size_t i = 0; i < 12; ++i) {
    std::string bad = good_;
    bad[offset + i] ^= 0x10;
    ExpectDataLoss(bad, "bad length CRC", offset);
  }
  std::string bad = good_;
  bad[9] ^= 0xff;  // The first record's length CRC.
  ExpectDataLoss(bad, "bad length CRC", 0);
}

TEST_F(CorruptionTest, TruncationAnywhereInTheLastRecordIsDataLoss) {
  const size_t offset = first_.size() + second_.size();
  for (size_t keep = 1; keep < third_.size(); ++keep) {
    ExpectDataLoss(good_.substr(0, offset + keep), "truncated", offset);
  }
  // A cut on a record boundary is a shorter, valid file.
  WriteBytes(path_, good_.substr(0, offset));
  absl::StatusOr<EventFile> file = ReadEventFile(path_);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_THAT(file->scalars, SizeIs(1));
}

TEST_F(CorruptionTest, WellFramedButMalformedEventIsDataLoss) {
  // Field 1 with wire type 3 (a group): CRCs are right, the proto is not.
  ExpectDataLoss(first_ + EncodeRecord("\x0b"), "malformed Event", first_.size());
  // A varint that runs off the end.
  ExpectDataLoss(first_ + EncodeRecord("\x10\xff"), "malformed Event", first_.size());
  // A summary longer than the event.
  ExpectDataLoss(first_ + EncodeRecord("\x2a\x05\x0a\x00"), "malformed Event", first_.size());
}

TEST(ReadEventFileTest, SkipsUnknownFieldsAndAcceptsAnyFieldOrder) {
  ScopedTestDir tmp;
  const std::string value =
      absl::StrCat(absl::string_view("\x38\x05", 2),  // field 7 varint
                   absl::string_view("\x0a\x03"
                                     "acc",
                                     5),                          // tag
                   absl::string_view("\x15\x00\x00\x80\x3f", 5),  // simple_value 1.0f
                   absl::string_view("\x4a\x02"
                                     "zz",
                                     4));  // field 9 bytes
  const std::string summary =
      absl::StrCat(absl::string_view("\x0a", 1), std::string(1, static_cast<char>(value.size())),
                   value, absl::string_view("\x15\x01\x02\x03\x04", 5));
  const std::string event = absl::StrCat(
      absl::string_view("\x2a", 1), std::string(1, static_cast<char>(summary.size())), summary,
      absl::string_view("\x31\x01\x02\x03\x04\x05\x06\x07\x08", 9),  // field 6 fixed64
      absl::string_view("\x10\x09", 2),                              // step 9
      absl::string_view("\x09\x00\x00\x00\x00\x00\x00\x24\x40", 9),  // wall_time 10.0
      absl::string_view("\x22\x01"
                        "g",
                        3));  // field 4 bytes
  const std::string path = tmp.path() + "/events.out.tfevents.2.test";
  WriteBytes(path, EncodeRecord(event));
  absl::StatusOr<EventFile> file = ReadEventFile(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->file_version, "");
  ASSERT_THAT(file->scalars, SizeIs(1));
  EXPECT_EQ(file->scalars[0].tag, "acc");
  EXPECT_EQ(file->scalars[0].step, 9);
  EXPECT_EQ(file->scalars[0].value, 1.0f);
  EXPECT_EQ(file->scalars[0].wall_time, 10.0);
}

// Through the file-system seam, a failing disk: the first failed write is
// the writer's error from then on, naming the file.
TEST(EventWriterTest, AFailedWriteIsStickyAndNamesTheFile) {
  ScopedTestDir tmp;
  io::FaultyFileSystem fs;
  fs.Fail(io::Op::kSync, "tfevents", absl::InternalError("fsync: Input/output error"),
          /*after=*/1);  // Create's flush succeeds, the next one fails
  absl::StatusOr<std::unique_ptr<EventWriter>> writer = EventWriter::Create(tmp.path(), &fs);
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_TRUE((*writer)->AddScalar("loss", 1, 1.0f).ok());
  absl::Status flushed = (*writer)->Flush();
  EXPECT_EQ(flushed.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(flushed.message(), HasSubstr((*writer)->path()));
  EXPECT_THAT(flushed.message(), HasSubstr("Input/output error"));
  EXPECT_EQ((*writer)->AddScalar("loss", 2, 1.0f), flushed);
  EXPECT_EQ((*writer)->Close(), flushed);

  io::FaultyFileSystem no_file;
  no_file.Fail(io::Op::kOpen, "tfevents", absl::InternalError("create: Disk quota exceeded"));
  writer = EventWriter::Create(tmp.path(), &no_file);
  EXPECT_EQ(writer.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(writer.status().message(), HasSubstr(tmp.path() + "/events.out.tfevents."));
}

TEST(ReadEventFileTest, EmptyFileAndMissingFile) {
  ScopedTestDir tmp;
  const std::string dir = tmp.path();
  WriteBytes(dir + "/empty", "");
  absl::StatusOr<EventFile> file = ReadEventFile(dir + "/empty");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->file_version, "");
  EXPECT_THAT(file->scalars, SizeIs(0));

  file = ReadEventFile(dir + "/missing");
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(file.status().message(), HasSubstr(dir + "/missing"));
}

}  // namespace
}  // namespace summary
}  // namespace psc
