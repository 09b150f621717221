#include "common/io/crc32c.h"

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psc {
namespace io {
namespace {

// Bit-at-a-time CRC-32C, the reference for the table-driven one.
uint32_t ReferenceCrc32c(const uint8_t* p, size_t n) {
  uint32_t crc = 0xffffffff;
  for (size_t i = 0; i < n; ++i) {
    crc ^= p[i];
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ ((crc & 1) ? 0x82F63B78 : 0);
  }
  return ~crc;
}

TEST(Crc32cTest, StandardCheckValues) {
  EXPECT_EQ(Crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(Crc32c("", 0), 0u);

  // RFC 3720 (iSCSI) section B.4.
  uint8_t buf[48] = {};
  EXPECT_EQ(Crc32c(buf, 32), 0x8a9136aau);
  std::memset(buf, 0xff, 32);
  EXPECT_EQ(Crc32c(buf, 32), 0x62a8ab43u);
  for (int i = 0; i < 32; ++i) buf[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(Crc32c(buf, 32), 0x46dd794eu);
  for (int i = 0; i < 32; ++i) buf[i] = static_cast<uint8_t>(31 - i);
  EXPECT_EQ(Crc32c(buf, 32), 0x113fdb5cu);
  const uint8_t iscsi_read[48] = {0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                                  0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00,
                                  0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00,
                                  0x00, 0x18, 0x28, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                                  0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
  EXPECT_EQ(Crc32c(iscsi_read, sizeof(iscsi_read)), 0xd9963a56u);
}

TEST(Crc32cTest, TableDrivenMatchesBitwiseAtEveryLengthAndAlignment) {
  std::mt19937 rng(42);
  std::vector<uint8_t> buf(300);
  for (uint8_t& b : buf) b = static_cast<uint8_t>(rng());
  for (size_t start = 0; start < 8; ++start) {
    for (size_t n = 0; n + start <= buf.size(); ++n) {
      ASSERT_EQ(Crc32c(buf.data() + start, n), ReferenceCrc32c(buf.data() + start, n))
          << "start " << start << " n " << n;
    }
  }
}

// The crc32 instruction and the table agree at every length, alignment
// and starting CRC (where the CPU has SSE4.2; the table alone elsewhere,
// checked above).
TEST(Crc32cTest, HardwareMatchesTheTable) {
  if (!internal::Crc32cHardware()) {
    GTEST_SKIP() << "this CPU has no SSE4.2 crc32: Crc32c runs the table, checked above";
  }
  std::mt19937 rng(7);
  std::vector<uint8_t> buf(300);
  for (uint8_t& b : buf) b = static_cast<uint8_t>(rng());
  for (uint32_t seed : {0u, 0xffffffffu, 0x12345678u}) {
    for (size_t start = 0; start < 8; ++start) {
      for (size_t n = 0; n + start <= buf.size(); ++n) {
        ASSERT_EQ(internal::Crc32cExtendHardware(seed, buf.data() + start, n),
                  internal::Crc32cExtendTable(seed, buf.data() + start, n))
            << "seed " << seed << " start " << start << " n " << n;
      }
    }
  }
  EXPECT_EQ(internal::Crc32cExtendHardware(0, "123456789", 9), 0xE3069283u);
}

TEST(Crc32cTest, ExtendEqualsWholeBuffer) {
  const std::string s = "The quick brown fox jumps over the lazy dog, twice over.";
  for (size_t split = 0; split <= s.size(); ++split) {
    EXPECT_EQ(Crc32cExtend(Crc32c(s.data(), split), s.data() + split, s.size() - split),
              Crc32c(s.data(), s.size()));
  }
}

TEST(Crc32cTest, MaskedMatchesTfRecordVectors) {
  // From real TensorFlow event files (TensorBoard's masked_crc.rs and tf_record.rs).
  const absl::string_view event(
      "\x1a\x11"
      "CRC test, one two",
      19);
  EXPECT_EQ(MaskedCrc32c(event.data(), event.size()), 0x5794d08au);
  const uint8_t length24[8] = {0x18, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(MaskedCrc32c(length24, 8), 0x224b7fa3u);
  EXPECT_NE(MaskedCrc32c("123456789", 9), Crc32c("123456789", 9));
}

}  // namespace
}  // namespace io
}  // namespace psc
