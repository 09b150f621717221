#include "common/data_channel/wire.h"

#include "absl/strings/str_cat.h"

namespace psc {
namespace data_channel {
namespace {

template <typename T>
void Put(std::string* out, T v) {
  char b[sizeof(T)];
  for (size_t i = 0; i < sizeof(T); ++i)
    b[i] = static_cast<char>((static_cast<uint64_t>(v) >> (8 * i)) & 0xff);
  out->append(b, sizeof(T));
}

template <typename T>
T Get(const char* p) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= uint64_t{static_cast<unsigned char>(p[i])} << (8 * i);
  return static_cast<T>(v);
}

}  // namespace

std::string EncodeFrameHead(const FrameHeader& header, absl::Span<const uint64_t> blob_sizes) {
  std::string out;
  out.reserve(kHeaderBytes + 8 * blob_sizes.size());
  Put<uint32_t>(&out, kMagic);
  Put<uint16_t>(&out, kVersion);
  Put<uint16_t>(&out, static_cast<uint16_t>(header.kind));
  Put<uint64_t>(&out, header.call_id);
  Put<uint32_t>(&out, header.meta_bytes);
  Put<uint32_t>(&out, static_cast<uint32_t>(blob_sizes.size()));
  Put<uint32_t>(&out, static_cast<uint32_t>(header.code));
  for (uint64_t s : blob_sizes) Put<uint64_t>(&out, s);
  return out;
}

absl::StatusOr<FrameHeader> DecodeFrameHeader(absl::string_view bytes, const Limits& limits) {
  if (bytes.size() != kHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat("data channel: frame header has ", bytes.size(),
                                                   " bytes, want ", kHeaderBytes));
  }
  const char* p = bytes.data();
  if (Get<uint32_t>(p) != kMagic) {
    return absl::InvalidArgumentError(
        "data channel: bad frame magic (not a pscluster data channel peer?)");
  }
  if (const uint16_t v = Get<uint16_t>(p + 4); v != kVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("data channel: frame version ", v, "; this build speaks ", kVersion));
  }
  FrameHeader h;
  const uint16_t kind = Get<uint16_t>(p + 6);
  if (kind < static_cast<uint16_t>(Kind::kHello) || kind > static_cast<uint16_t>(Kind::kResponse)) {
    return absl::InvalidArgumentError(absl::StrCat("data channel: unknown frame kind ", kind));
  }
  h.kind = static_cast<Kind>(kind);
  h.call_id = Get<uint64_t>(p + 8);
  h.meta_bytes = Get<uint32_t>(p + 16);
  h.num_blobs = Get<uint32_t>(p + 20);
  h.code = static_cast<int32_t>(Get<uint32_t>(p + 24));
  if (h.meta_bytes > limits.max_meta_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("data channel: frame metadata of ", h.meta_bytes,
                                                   " bytes exceeds the limit of ",
                                                   limits.max_meta_bytes));
  }
  if (h.num_blobs > limits.max_blobs) {
    return absl::InvalidArgumentError(absl::StrCat("data channel: frame has ", h.num_blobs,
                                                   " tensors; the limit is ", limits.max_blobs));
  }
  return h;
}

absl::StatusOr<std::vector<uint64_t>> DecodeBlobSizes(absl::string_view bytes, uint32_t num_blobs,
                                                      const Limits& limits) {
  if (bytes.size() != 8 * size_t{num_blobs}) {
    return absl::InvalidArgumentError(absl::StrCat("data channel: size table has ", bytes.size(),
                                                   " bytes for ", num_blobs, " tensors"));
  }
  std::vector<uint64_t> sizes(num_blobs);
  uint64_t total = 0;
  for (uint32_t i = 0; i < num_blobs; ++i) {
    sizes[i] = Get<uint64_t>(bytes.data() + 8 * i);
    if (sizes[i] > limits.max_blob_bytes || total + sizes[i] > limits.max_blob_bytes) {
      return absl::InvalidArgumentError(absl::StrCat("data channel: frame carries more than ",
                                                     limits.max_blob_bytes, " tensor bytes"));
    }
    total += sizes[i];
  }
  return sizes;
}

}  // namespace data_channel
}  // namespace psc
