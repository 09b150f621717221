// The data channel's framing: how tensor bytes travel beside gRPC on a plain
// TCP connection (see data_server.h for the protocol).
//
// Every message is one frame:
//
//   header (28 bytes, little-endian)
//     u32 magic "PSCD" | u16 version (1) | u16 kind | u64 call_id
//     u32 meta_bytes   | u32 num_blobs   | i32 code
//   u64 blob_size[num_blobs]
//   meta[meta_bytes]   a serialized protobuf whose tensors have empty `data`
//   blob[0] .. blob[num_blobs-1]   the tensors' `data`, in message order
//
// `code` is the timeout in milliseconds in a request (0 = none) and an
// absl::StatusCode in a response (whose meta is then the error message when
// the code is not OK). Pure functions; thread-safe.
#ifndef PSC_COMMON_DATA_CHANNEL_WIRE_H_
#define PSC_COMMON_DATA_CHANNEL_WIRE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace psc {
namespace data_channel {

inline constexpr uint32_t kMagic = 0x44435350;  // "PSCD" as little-endian bytes
inline constexpr uint16_t kVersion = 1;
inline constexpr size_t kHeaderBytes = 28;

enum class Kind : uint16_t {
  kHello = 1,     // client -> server, meta = the ticket from OpenDataChannel
  kHelloOk = 2,   // server -> client
  kPush = 3,      // meta = PushRequest, blobs = its gradients' data
  kPull = 4,      // meta = PullRequest, no blobs
  kResponse = 5,  // meta = Push/PullResponse (blobs = its variables' data) or an error message
};

struct FrameHeader {
  Kind kind = Kind::kResponse;
  uint64_t call_id = 0;
  uint32_t meta_bytes = 0;
  uint32_t num_blobs = 0;
  int32_t code = 0;
};

struct Limits {
  uint32_t max_meta_bytes = 16u << 20;
  uint32_t max_blobs = 1u << 16;
  uint64_t max_blob_bytes = uint64_t{1} << 30;  // all blobs of one frame together
};

// The header followed by the blob-size table.
std::string EncodeFrameHead(const FrameHeader& header, absl::Span<const uint64_t> blob_sizes);

// Parses kHeaderBytes bytes. INVALID_ARGUMENT for a short buffer, a wrong
// magic or version, an unknown kind, or counts beyond `limits`.
absl::StatusOr<FrameHeader> DecodeFrameHeader(absl::string_view bytes, const Limits& limits);

// Parses `num_blobs` u64 sizes. INVALID_ARGUMENT if the buffer has another
// length or the sizes add up to more than limits.max_blob_bytes.
absl::StatusOr<std::vector<uint64_t>> DecodeBlobSizes(absl::string_view bytes, uint32_t num_blobs,
                                                      const Limits& limits);

}  // namespace data_channel
}  // namespace psc

#endif  // PSC_COMMON_DATA_CHANNEL_WIRE_H_
