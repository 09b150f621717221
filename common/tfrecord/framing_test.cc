#include "common/tfrecord/framing.h"

#include <string>

#include "gtest/gtest.h"

namespace psc {
namespace tfrecord {
namespace {

// A record's header holds its length under a masked CRC, and its footer the
// data's: both verify, and one flipped bit fails them.
TEST(FramingTest, HeaderAndFooterVerify) {
  const std::string data = "CRC test, one two";
  const std::string rec = EncodeRecord(data);
  ASSERT_EQ(rec.size(), kHeaderBytes + data.size() + kFooterBytes);
  uint64_t length = 0;
  ASSERT_TRUE(DecodeHeader(rec.data(), &length));
  EXPECT_EQ(length, data.size());
  EXPECT_TRUE(FooterMatches(rec.data() + kHeaderBytes + data.size(), data));
  for (size_t bit = 0; bit < 8 * kHeaderBytes; ++bit) {
    std::string bad = rec;
    bad[bit / 8] = static_cast<char>(bad[bit / 8] ^ (1 << (bit % 8)));
    EXPECT_FALSE(DecodeHeader(bad.data(), &length)) << "bit " << bit;
  }
  std::string other = data;
  other[0] = 'c';
  EXPECT_FALSE(FooterMatches(rec.data() + kHeaderBytes + data.size(), other));
  std::string two;
  AppendRecord("a", &two);
  AppendRecord("", &two);
  EXPECT_EQ(two, EncodeRecord("a") + EncodeRecord(""));
}

// The bytes TensorFlow writes for a 24-byte record's header (TensorBoard's
// tf_record.rs): the masked CRC of the length.
TEST(FramingTest, MatchesTensorFlowsBytes) {
  const std::string rec = EncodeRecord(std::string(24, 'x'));
  const unsigned char want[12] = {0x18, 0, 0, 0, 0, 0, 0, 0, 0xa3, 0x7f, 0x4b, 0x22};
  EXPECT_EQ(rec.substr(0, 12), std::string(reinterpret_cast<const char*>(want), 12));
}

}  // namespace
}  // namespace tfrecord
}  // namespace psc
