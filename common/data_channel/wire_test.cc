#include "common/data_channel/wire.h"

#include "gtest/gtest.h"

namespace psc {
namespace data_channel {
namespace {

TEST(WireTest, HeadRoundTrips) {
  FrameHeader h;
  h.kind = Kind::kPush;
  h.call_id = 0x0102030405060708ull;
  h.meta_bytes = 77;
  h.code = -5;
  const std::vector<uint64_t> sizes = {0, 1741224, uint64_t{1} << 20};
  const std::string head = EncodeFrameHead(h, sizes);
  ASSERT_EQ(head.size(), kHeaderBytes + 8 * sizes.size());
  EXPECT_EQ(head.substr(0, 4), "PSCD");
  auto decoded = DecodeFrameHeader(absl::string_view(head).substr(0, kHeaderBytes), Limits{});
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->kind, Kind::kPush);
  EXPECT_EQ(decoded->call_id, h.call_id);
  EXPECT_EQ(decoded->meta_bytes, 77u);
  EXPECT_EQ(decoded->num_blobs, 3u);
  EXPECT_EQ(decoded->code, -5);
  auto back = DecodeBlobSizes(absl::string_view(head).substr(kHeaderBytes), 3, Limits{});
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, sizes);
}

TEST(WireTest, RefusesMalformedHeaders) {
  FrameHeader h;
  h.kind = Kind::kPull;
  const std::string good = EncodeFrameHead(h, {});
  EXPECT_TRUE(DecodeFrameHeader(good, Limits{}).ok());

  EXPECT_EQ(DecodeFrameHeader(good.substr(0, 27), Limits{}).status().code(),
            absl::StatusCode::kInvalidArgument);
  std::string bad_magic = good;
  bad_magic[0] = 'X';
  EXPECT_EQ(DecodeFrameHeader(bad_magic, Limits{}).status().message(),
            "data channel: bad frame magic (not a pscluster data channel peer?)");
  std::string bad_version = good;
  bad_version[4] = 9;
  EXPECT_EQ(DecodeFrameHeader(bad_version, Limits{}).status().message(),
            "data channel: frame version 9; this build speaks 1");
  std::string bad_kind = good;
  bad_kind[6] = 42;
  EXPECT_EQ(DecodeFrameHeader(bad_kind, Limits{}).status().message(),
            "data channel: unknown frame kind 42");
  bad_kind[6] = 0;
  EXPECT_FALSE(DecodeFrameHeader(bad_kind, Limits{}).ok());

  Limits small;
  small.max_meta_bytes = 10;
  small.max_blobs = 1;
  h.meta_bytes = 11;
  EXPECT_EQ(DecodeFrameHeader(EncodeFrameHead(h, {}), small).status().code(),
            absl::StatusCode::kInvalidArgument);
  h.meta_bytes = 10;
  EXPECT_TRUE(DecodeFrameHeader(EncodeFrameHead(h, {}), small).ok());
  EXPECT_EQ(DecodeFrameHeader(
                EncodeFrameHead(h, std::vector<uint64_t>{1, 2}).substr(0, kHeaderBytes), small)
                .status()
                .message(),
            "data channel: frame has 2 tensors; the limit is 1");
}

TEST(WireTest, RefusesBlobSizesBeyondTheLimit) {
  Limits limits;
  limits.max_blob_bytes = 100;
  const std::string ok = EncodeFrameHead(FrameHeader{}, std::vector<uint64_t>{60, 40});
  EXPECT_TRUE(DecodeBlobSizes(absl::string_view(ok).substr(kHeaderBytes), 2, limits).ok());
  const std::string over = EncodeFrameHead(FrameHeader{}, std::vector<uint64_t>{60, 41});
  EXPECT_EQ(
      DecodeBlobSizes(absl::string_view(over).substr(kHeaderBytes), 2, limits).status().message(),
      "data channel: frame carries more than 100 tensor bytes");
  // A size that would overflow the sum is refused too.
  const std::string huge = EncodeFrameHead(FrameHeader{}, std::vector<uint64_t>{50, ~uint64_t{0}});
  EXPECT_FALSE(DecodeBlobSizes(absl::string_view(huge).substr(kHeaderBytes), 2, limits).ok());
  EXPECT_FALSE(DecodeBlobSizes(absl::string_view(ok).substr(kHeaderBytes), 3, limits).ok());
}

}  // namespace
}  // namespace data_channel
}  // namespace psc
