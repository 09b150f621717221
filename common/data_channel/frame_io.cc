#include "common/data_channel/frame_io.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/base/checked_size.h"
#include "common/base/status_macros.h"

namespace psc {
namespace data_channel {

absl::Status SendFrame(SocketStream* stream, FrameHeader header, absl::string_view meta,
                       absl::Span<const absl::string_view> blobs, absl::Time deadline) {
  std::vector<uint64_t> sizes;
  sizes.reserve(blobs.size());
  for (absl::string_view b : blobs) sizes.push_back(b.size());
  header.meta_bytes = static_cast<uint32_t>(meta.size());
  header.num_blobs = static_cast<uint32_t>(blobs.size());
  const std::string head = EncodeFrameHead(header, sizes);
  std::vector<iovec> iov;
  iov.reserve(2 + blobs.size());
  iov.push_back({const_cast<char*>(head.data()), head.size()});
  iov.push_back({const_cast<char*>(meta.data()), meta.size()});
  for (absl::string_view b : blobs) iov.push_back({const_cast<char*>(b.data()), b.size()});
  return stream->WriteAll(std::move(iov), deadline);
}

absl::Status ReadAsItArrives(SocketStream* stream, uint64_t n, std::string* out,
                             absl::Time deadline) {
  // A buffer that already holds n bytes (a reused one) is read into as it
  // is; otherwise it grows with what has arrived, at most doubling, so a
  // peer that announces more than it sends costs at most twice what it sent.
  if (out->size() == n) return stream->ReadExact(out->data(), n, deadline);
  constexpr uint64_t kFirstChunk = 64 << 10;
  out->clear();
  uint64_t have = 0;
  while (have < n) {
    const uint64_t take = std::min<uint64_t>(n - have, std::max<uint64_t>(kFirstChunk, have));
    out->resize(have + take);
    PSC_RETURN_IF_ERROR(stream->ReadExact(out->data() + have, take, deadline));
    have += take;
  }
  return absl::OkStatus();
}

absl::StatusOr<FrameHead> ReceiveFrameHead(SocketStream* stream, const Limits& limits,
                                           absl::Time deadline) {
  char raw[kHeaderBytes];
  PSC_RETURN_IF_ERROR(stream->ReadExact(raw, sizeof(raw), deadline));
  PSC_ASSIGN_OR_RETURN(auto header, DecodeFrameHeader(absl::string_view(raw, sizeof(raw)), limits));
  FrameHead head;
  head.header = header;
  PSC_ASSIGN_OR_RETURN(
      const uint64_t table_bytes,
      base::ArrayBytes(header.num_blobs, sizeof(uint64_t), uint64_t{8} * limits.max_blobs,
                       "data channel: size table"));
  std::string table;
  PSC_RETURN_IF_ERROR(ReadAsItArrives(stream, table_bytes, &table, deadline));
  PSC_ASSIGN_OR_RETURN(auto sizes, DecodeBlobSizes(table, header.num_blobs, limits));
  head.blob_sizes = std::move(sizes);
  PSC_RETURN_IF_ERROR(ReadAsItArrives(stream, header.meta_bytes, &head.meta, deadline));
  return head;
}

absl::Status ReceiveBlobs(SocketStream* stream, const FrameHead& head,
                          absl::Span<std::string* const> into, absl::Time deadline) {
  if (into.size() != head.blob_sizes.size()) {
    return absl::InvalidArgumentError(absl::StrCat("data channel: frame carries ",
                                                   head.blob_sizes.size(), " tensors' bytes for ",
                                                   into.size(), " tensors"));
  }
  for (size_t i = 0; i < into.size(); ++i) {
    PSC_RETURN_IF_ERROR(ReadAsItArrives(stream, head.blob_sizes[i], into[i], deadline));
  }
  return absl::OkStatus();
}

void SplitTensors(const google::protobuf::RepeatedPtrField<proto::NamedTensor>& tensors,
                  google::protobuf::RepeatedPtrField<proto::NamedTensor>* meta,
                  std::vector<absl::string_view>* blobs) {
  for (const proto::NamedTensor& t : tensors) {
    proto::NamedTensor* m = meta->Add();
    m->set_name(t.name());
    m->mutable_tensor()->set_dtype(t.tensor().dtype());
    *m->mutable_tensor()->mutable_shape() = t.tensor().shape();
    // A sparse tensor's indices stay in the metadata (a few KB at most), as
    // a row-sparse tensor's row ids do (8 bytes a row, the rows in the blob).
    m->mutable_tensor()->set_indices(t.tensor().indices());
    m->mutable_tensor()->set_row_sparse(t.tensor().row_sparse());
    m->mutable_tensor()->set_row_ids(t.tensor().row_ids());
    blobs->push_back(t.tensor().data());
  }
}

void TakeTensorData(google::protobuf::RepeatedPtrField<proto::NamedTensor>* tensors,
                    std::vector<std::string>* storage) {
  for (proto::NamedTensor& t : *tensors) {
    storage->emplace_back().swap(*t.mutable_tensor()->mutable_data());
  }
}

std::vector<std::string*> TensorDataSlots(
    google::protobuf::RepeatedPtrField<proto::NamedTensor>* tensors) {
  std::vector<std::string*> slots;
  slots.reserve(tensors->size());
  for (proto::NamedTensor& t : *tensors) slots.push_back(t.mutable_tensor()->mutable_data());
  return slots;
}

std::vector<absl::string_view> Views(const std::vector<std::string>& storage) {
  return std::vector<absl::string_view>(storage.begin(), storage.end());
}

}  // namespace data_channel
}  // namespace psc
