#include "common/tfrecord/record_reader.h"

#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/io/crc32c.h"
#include "common/tfrecord/framing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace tfrecord {
namespace {

using ::testing::HasSubstr;

// `raw` deflated as gzip (window bits 31) or zlib (15), as TensorFlow's
// ZlibOutputBuffer writes them. A gzip header may carry a comment that makes
// it `header_extra` bytes longer (the comment and its NUL).
std::string Deflate(const std::string& raw, Compression c, size_t header_extra = 0) {
  z_stream z = {};
  EXPECT_EQ(
      deflateInit2(&z, 6, Z_DEFLATED, c == Compression::kGzip ? 31 : 15, 8, Z_DEFAULT_STRATEGY),
      Z_OK);
  std::string comment(header_extra > 0 ? header_extra - 1 : 0, 'c');
  gz_header h = {};
  if (header_extra > 0) {
    h.comment = reinterpret_cast<Bytef*>(comment.data());
    EXPECT_EQ(deflateSetHeader(&z, &h), Z_OK);
  }
  std::string out(deflateBound(&z, raw.size()) + header_extra + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data()));
  z.avail_in = static_cast<uInt>(raw.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// The inflater's input chunk (byte_reader.cc).
constexpr size_t kChunkForTest = size_t{64} << 10;

class RecordReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(::testing::TempDir(), "/record_reader_test_", getpid());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& bytes) {
    const std::string path = absl::StrCat(dir_, "/", name);
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }

  // Every record of `path` (compression detected), or the first error.
  absl::StatusOr<std::vector<std::string>> ReadAll(const std::string& path,
                                                   uint64_t max = kDefaultMaxRecordBytes) {
    auto reader = RecordReader::Open(io::LocalFileSystem(), path, std::nullopt, max);
    if (!reader.ok()) return reader.status();
    std::vector<std::string> out;
    for (int i = 0; i < 10000; ++i) {
      std::string rec;
      bool end = false;
      if (absl::Status s = (*reader)->Next(&rec, &end); !s.ok()) return s;
      if (end) return out;
      out.push_back(rec);
    }
    return absl::InternalError("no end");
  }

  std::string dir_;
};

// Records of 0 bytes to over a reader's 64 KiB chunk, plain, gzip and zlib:
// each file's compression is seen from its first bytes, and every record
// comes back as it was written.
TEST_F(RecordReaderTest, ReadsPlainGzipAndZlibAlike) {
  std::mt19937 rng(3);
  std::vector<std::string> records;
  for (size_t n : {0, 1, 7, 100, 70000, 200001, 12}) {
    std::string r(n, '\0');
    for (char& c : r) c = static_cast<char>(rng());
    records.push_back(r);
  }
  std::string raw;
  for (const std::string& r : records) AppendRecord(r, &raw);
  for (Compression c : {Compression::kNone, Compression::kGzip, Compression::kZlib}) {
    SCOPED_TRACE(CompressionName(c));
    const std::string path = Write(absl::StrCat("r.", CompressionName(c)),
                                   c == Compression::kNone ? raw : Deflate(raw, c));
    auto reader = RecordReader::Open(io::LocalFileSystem(), path, std::nullopt);
    ASSERT_TRUE(reader.ok()) << reader.status();
    EXPECT_EQ((*reader)->compression(), c);
    auto got = ReadAll(path);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, records);
  }
  // Empty files hold no records; a gzip file of two members (concatenated
  // files) holds both members' records.
  EXPECT_THAT(*ReadAll(Write("empty", "")), ::testing::IsEmpty());
  EXPECT_THAT(*ReadAll(Write("empty.gz", Deflate("", Compression::kGzip))), ::testing::IsEmpty());
  const std::string two = Deflate(EncodeRecord("first"), Compression::kGzip) +
                          Deflate(EncodeRecord("second"), Compression::kGzip);
  EXPECT_THAT(*ReadAll(Write("two.gz", two)), ::testing::ElementsAre("first", "second"));
}

// A damaged record is DATA_LOSS naming the file and the record's offset;
// the records before it are read; the error stays, but for a bad data CRC,
// after which the framing is intact and the next record is read.
TEST_F(RecordReaderTest, DamageIsDataLossNamingTheFileAndOffset) {
  std::string raw = EncodeRecord("one") + EncodeRecord("two") + EncodeRecord("three");
  const size_t second = EncodeRecord("one").size();  // 19
  struct Case {
    const char* name;
    std::string bytes;
    const char* what;
    uint64_t offset;
  };
  std::string data_crc = raw, length_crc = raw, data_byte = raw;
  data_crc[second + kHeaderBytes + 3] ^= 1;  // the second record's data CRC
  length_crc[second + 9] ^= 0x40;            // its length CRC
  data_byte[second + kHeaderBytes] ^= 1;     // its data
  const Case cases[] = {
      {"data_crc", data_crc, "bad data CRC", second},
      {"length_crc", length_crc, "bad length CRC", second},
      {"data_byte", data_byte, "bad data CRC", second},
      {"cut_in_header", raw.substr(0, second + 5), "truncated record header", second},
      {"cut_in_data", raw.substr(0, second + kHeaderBytes + 1), "truncated record", second},
      {"cut_in_footer", raw.substr(0, 2 * second - 1), "truncated record", second},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = Write(c.name, c.bytes);
    auto reader = RecordReader::Open(io::LocalFileSystem(), path, Compression::kNone);
    ASSERT_TRUE(reader.ok());
    std::string rec;
    bool end = false;
    ASSERT_TRUE((*reader)->Next(&rec, &end).ok());
    EXPECT_EQ(rec, "one");
    const absl::Status s = (*reader)->Next(&rec, &end);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
    EXPECT_THAT(s.message(), HasSubstr(path));
    EXPECT_THAT(s.message(), HasSubstr(c.what));
    EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("at offset ", c.offset)));
    if (std::string(c.what) == "bad data CRC") {  // that record alone is lost
      EXPECT_TRUE((*reader)->skippable());
      ASSERT_TRUE((*reader)->Next(&rec, &end).ok());
      EXPECT_FALSE((*reader)->skippable());
      EXPECT_EQ(rec, "three");
      ASSERT_TRUE((*reader)->Next(&rec, &end).ok());
      EXPECT_TRUE(end);
    } else {
      EXPECT_FALSE((*reader)->skippable());
      EXPECT_EQ((*reader)->Next(&rec, &end), s) << "the error stays";
    }
  }
  // A truncated or damaged compressed stream: DATA_LOSS naming the file.
  const std::string gz = Deflate(raw, Compression::kGzip);
  for (const std::string& bytes : {gz.substr(0, gz.size() / 2), gz.substr(0, gz.size() - 3)}) {
    const std::string path = Write("cut.gz", bytes);
    auto got = ReadAll(path);
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss) << got.status();
    EXPECT_THAT(got.status().message(), HasSubstr(path));
  }
  std::string flipped = gz;
  flipped[flipped.size() / 2] ^= 0x5a;
  auto got = ReadAll(Write("flipped.gz", flipped));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss) << got.status();
  // Bytes after a zlib stream are damage too (zlib has no second member).
  got = ReadAll(Write("trail.zz", Deflate(raw, Compression::kZlib) + "junk"));
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(got.status().message(), HasSubstr("after the end of the zlib stream"));
}

// The inflater checks what zlib did: each gzip member's CRC-32 and length,
// the zlib stream's Adler-32, the header, and what follows a member; and a
// compressible stream of many 64 KiB input chunks, with members ending
// anywhere in a chunk, reads whole.
TEST_F(RecordReaderTest, TheInflaterChecksTrailersHeadersAndLongStreams) {
  std::mt19937 rng(5);
  // Records of random bytes: the stream spans many 64 KiB input chunks.
  auto random_records = [&rng](int n, int size, std::vector<std::string>* records) {
    std::string raw;
    for (int i = 0; i < n; ++i) {
      std::string r(size, '\0');
      for (char& c : r) c = static_cast<char>(rng());
      AppendRecord(r, &raw);
      records->push_back(std::move(r));
    }
    return raw;
  };
  std::vector<std::string> records;
  const std::string raw = random_records(4000, 300, &records);
  const std::string gz = Deflate(raw, Compression::kGzip);
  const std::string zz = Deflate(raw, Compression::kZlib);
  ASSERT_GT(gz.size(), 16 * kChunkForTest);
  struct Case {
    const char* name;
    std::string bytes;
    Compression compression;
  };
  std::string crc = gz, isize = gz, adler = zz, header = gz;
  crc[crc.size() - 8] ^= 1;      // the trailer's CRC-32
  isize[isize.size() - 1] ^= 1;  // its ISIZE
  adler[adler.size() - 1] ^= 1;  // the zlib stream's Adler-32
  header[0] ^= 1;                // gzip's magic
  const Case cases[] = {
      {"crc.gz", crc, Compression::kGzip},
      {"isize.gz", isize, Compression::kGzip},
      {"adler.zz", adler, Compression::kZlib},
      {"header.gz", header, Compression::kGzip},
      {"junk.gz", gz + "junk after the member", Compression::kGzip},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = Write(c.name, c.bytes);
    auto reader = RecordReader::Open(io::LocalFileSystem(), path, c.compression);
    ASSERT_TRUE(reader.ok()) << reader.status();
    std::string rec;
    bool end = false;
    absl::Status s;
    for (int i = 0; i < 5000 && s.ok() && !end; ++i) s = (*reader)->Next(&rec, &end);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
    EXPECT_THAT(s.message(), HasSubstr(absl::StrCat(path, ": ", CompressionName(c.compression))));
  }
  auto whole = ReadAll(Write("long.gz", gz));
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(*whole, records);
  // Two members, the first ending at or just before the edge of the first
  // 64 KiB input chunk (its 8-byte trailer whole, split or just past it):
  // the second is read from what the refill brings.
  for (const size_t before_edge : {0, 1, 4, 7, 8, 9}) {
    SCOPED_TRACE(before_edge);
    std::vector<std::string> two;
    const std::string first = random_records(100, 400, &two);
    const std::string second = random_records(50, 300, &two);
    const size_t bare = Deflate(first, Compression::kGzip).size();
    ASSERT_LT(bare + before_edge, kChunkForTest);
    const std::string member =
        Deflate(first, Compression::kGzip, kChunkForTest - before_edge - bare);
    ASSERT_EQ(member.size(), kChunkForTest - before_edge);
    auto got = ReadAll(Write("edge.gz", member + Deflate(second, Compression::kGzip)));
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, two);
  }
}

// A header declaring `length` (its masked CRC right).
std::string Header(uint64_t length) {
  std::string h;
  for (int i = 0; i < 8; ++i) h.push_back(static_cast<char>((length >> (8 * i)) & 0xff));
  const uint32_t crc = io::MaskedCrc32c(h.data(), 8);
  for (int i = 0; i < 4; ++i) h.push_back(static_cast<char>((crc >> (8 * i)) & 0xff));
  return h;
}

// A length over the limit is refused from the header, before the record is
// read or allocated: a header declaring 2^60 bytes after a good record, in
// a plain file and in a gzip stream; a record at the limit is read.
TEST_F(RecordReaderTest, ALengthOverTheLimitIsRefusedFromItsHeader) {
  const std::string raw = EncodeRecord("ok") + Header(uint64_t{1} << 60);
  for (const std::string& bytes : {raw, Deflate(raw, Compression::kGzip)}) {
    const std::string path = Write("huge", bytes);
    auto got = ReadAll(path);
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), absl::StatusCode::kResourceExhausted) << got.status();
    EXPECT_THAT(got.status().message(), HasSubstr(path));
    EXPECT_THAT(got.status().message(), HasSubstr("1152921504606846976 bytes at offset 18"));
    EXPECT_THAT(got.status().message(), HasSubstr("--max_record_bytes=67108864"));
  }
  const std::string exact = Write("exact", EncodeRecord(std::string(100, 'a')));
  EXPECT_TRUE(ReadAll(exact, 100).ok());
  EXPECT_EQ(ReadAll(exact, 99).status().code(), absl::StatusCode::kResourceExhausted);
  for (uint64_t bad : {uint64_t{0}, kMaxRecordBytesLimit + 1}) {
    EXPECT_EQ(RecordReader::Open(io::LocalFileSystem(), exact, std::nullopt, bad).status().code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

TEST(CompressionTest, DetectionAndNames) {
  EXPECT_EQ(DetectCompression(""), Compression::kNone);
  EXPECT_EQ(DetectCompression(EncodeRecord("abc").substr(0, 12)), Compression::kNone);
  EXPECT_EQ(DetectCompression(std::string("\x1f\x8b\x08\x00", 4)), Compression::kGzip);
  EXPECT_EQ(DetectCompression(std::string("\x78\x9c", 2)), Compression::kZlib);
  EXPECT_EQ(DetectCompression(std::string("\x78\x01", 2)), Compression::kZlib);
  EXPECT_EQ(DetectCompression("not a record"), Compression::kNone);
  EXPECT_EQ(ParseCompression("GZIP")->value(), Compression::kGzip);
  EXPECT_EQ(ParseCompression("")->value(), Compression::kNone);
  EXPECT_FALSE(ParseCompression("auto")->has_value());
  EXPECT_EQ(ParseCompression("lz4").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tfrecord
}  // namespace psc
