// Sending and receiving whole data-channel frames (wire.h) on a SocketStream,
// with the tensors' bytes going straight between the socket and the
// protobuf's `data` strings: no serialization of tensor bytes, no copy.
#ifndef PSC_COMMON_DATA_CHANNEL_FRAME_IO_H_
#define PSC_COMMON_DATA_CHANNEL_FRAME_IO_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/data_channel/socket_stream.h"
#include "common/data_channel/wire.h"
#include "google/protobuf/repeated_field.h"
#include "proto/common.pb.h"

namespace psc {
namespace data_channel {

// Sends one frame: header (num_blobs and meta_bytes are filled in here),
// sizes, `meta`, then `blobs`, in one gathered write.
absl::Status SendFrame(SocketStream* stream, FrameHeader header, absl::string_view meta,
                       absl::Span<const absl::string_view> blobs, absl::Time deadline);

// The part of a frame before its blobs.
struct FrameHead {
  FrameHeader header;
  std::vector<uint64_t> blob_sizes;
  std::string meta;
};

// Reads `n` bytes into `out`, allocating as they arrive (never `n` up
// front for bytes a peer has only announced). A buffer already of size `n`
// is reused without zeroing.
absl::Status ReadAsItArrives(SocketStream* stream, uint64_t n, std::string* out,
                             absl::Time deadline);

// Reads header, sizes and meta. INVALID_ARGUMENT for a malformed frame (the
// stream is then out of step and must be closed); socket errors as
// SocketStream reports them.
absl::StatusOr<FrameHead> ReceiveFrameHead(SocketStream* stream, const Limits& limits,
                                           absl::Time deadline);

// Reads the frame's blobs into `into` (one string per blob, grown as the
// bytes arrive; buffers of the right size, e.g. reused ones, are read into
// as they are).
// INVALID_ARGUMENT, before reading anything, if the counts differ.
absl::Status ReceiveBlobs(SocketStream* stream, const FrameHead& head,
                          absl::Span<std::string* const> into, absl::Time deadline);

// Tensors <-> blobs.
//
// Appends to `meta` a copy of each of `tensors` without its data, and to
// `blobs` a view of each one's data (valid while `tensors` is).
void SplitTensors(const google::protobuf::RepeatedPtrField<proto::NamedTensor>& tensors,
                  google::protobuf::RepeatedPtrField<proto::NamedTensor>* meta,
                  std::vector<absl::string_view>* blobs);
// Moves each tensor's data out into `storage` (no copy), leaving it empty.
void TakeTensorData(google::protobuf::RepeatedPtrField<proto::NamedTensor>* tensors,
                    std::vector<std::string>* storage);
// Where each tensor's data goes, for ReceiveBlobs.
std::vector<std::string*> TensorDataSlots(
    google::protobuf::RepeatedPtrField<proto::NamedTensor>* tensors);

std::vector<absl::string_view> Views(const std::vector<std::string>& storage);

}  // namespace data_channel
}  // namespace psc

#endif  // PSC_COMMON_DATA_CHANNEL_FRAME_IO_H_
