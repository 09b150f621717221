#include "evaluator/checkpoint_reader.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/checked_size.h"
#include "common/base/status_macros.h"
#include "common/placement/placement.h"
#include "common/ps_client/sharded_parameters.h"
#include "common/tensor/row_sparse.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/wire_format_lite.h"

namespace psc {
namespace evaluator {
namespace {

using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedInputStream;
using google::protobuf::io::CodedOutputStream;
using google::protobuf::io::StringOutputStream;

// A file read from its start, as protobuf's streams read.
class FileStream : public google::protobuf::io::CopyingInputStream {
 public:
  explicit FileStream(const io::RandomAccessFile* file) : file_(file) {}
  int Read(void* buffer, int size) override {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(file_->size() - position_, size));
    if (n == 0) return 0;
    if (absl::Status s = file_->Read(position_, n, static_cast<char*>(buffer)); !s.ok()) {
      error_ = std::move(s);
      return -1;
    }
    position_ += n;
    return static_cast<int>(n);
  }
  // The read that failed, or OK.
  const absl::Status& error() const { return error_; }
  int Skip(int count) override {
    const uint64_t n = std::min<uint64_t>(file_->size() - position_, count);
    position_ += n;
    return static_cast<int>(n);
  }

 private:
  const io::RandomAccessFile* file_;
  uint64_t position_ = 0;
  absl::Status error_;
};

constexpr uint32_t Tag(int field, WireFormatLite::WireType type) {
  return static_cast<uint32_t>(field) << 3 | static_cast<uint32_t>(type);
}

// A tensor whose data was skipped: its other fields, and where the data is.
struct WalkedTensor {
  proto::Tensor header;
  uint64_t offset = 0, bytes = 0;
};
struct WalkedVariable {
  proto::ShardCheckpoint::Variable header;  // without value and slots
  WalkedTensor value;
  bool has_value = false;
  std::vector<WalkedTensor> slots;
};

// The length-delimited message `in` is at, walked by `field` (false for a
// field it does not take: copied into `rest`). False on malformed bytes.
template <typename Field>
bool WalkMessage(CodedInputStream* in, std::string* rest, Field field) {
  uint32_t length = 0;
  if (!in->ReadVarint32(&length)) return false;
  // Within its parent (PushLimit would quietly cut it to the parent's end).
  const int left = in->BytesUntilLimit();
  if (length > static_cast<uint32_t>(INT_MAX) || (left >= 0 && static_cast<int>(length) > left)) {
    return false;
  }
  const CodedInputStream::Limit limit = in->PushLimit(static_cast<int>(length));
  {
    StringOutputStream sos(rest);
    CodedOutputStream out(&sos);
    while (const uint32_t tag = in->ReadTag()) {
      bool ok = false;
      if (!field(tag, &ok)) ok = WireFormatLite::SkipField(in, tag, &out);
      if (!ok) return false;
    }
  }
  if (in->BytesUntilLimit() != 0) return false;
  in->PopLimit(limit);
  return true;
}

bool WalkTensor(CodedInputStream* in, WalkedTensor* t) {
  std::string rest;
  bool seen = false;
  const bool ok = WalkMessage(in, &rest, [&](uint32_t tag, bool* ok) {
    if (tag != Tag(3, WireFormatLite::WIRETYPE_LENGTH_DELIMITED)) return false;
    uint32_t bytes = 0;
    *ok = !seen && in->ReadVarint32(&bytes);
    if (!*ok) return true;
    seen = true;
    t->offset = static_cast<uint64_t>(in->CurrentPosition());
    t->bytes = bytes;
    *ok = in->Skip(static_cast<int>(bytes));
    return true;
  });
  return ok && t->header.ParseFromString(rest);
}

bool WalkVariable(CodedInputStream* in, WalkedVariable* v) {
  std::string rest;
  const bool ok = WalkMessage(in, &rest, [&](uint32_t tag, bool* ok) {
    if (tag == Tag(2, WireFormatLite::WIRETYPE_LENGTH_DELIMITED)) {
      *ok = !v->has_value && WalkTensor(in, &v->value);
      v->has_value = true;
      return true;
    }
    if (tag == Tag(3, WireFormatLite::WIRETYPE_LENGTH_DELIMITED)) {
      v->slots.emplace_back();
      *ok = WalkTensor(in, &v->slots.back());
      return true;
    }
    return false;
  });
  return ok && v->header.ParseFromString(rest);
}

// The header (every field but the variables) and the variables of the
// ShardCheckpoint in `file`, its tensors' data skipped.
absl::Status WalkShard(const io::RandomAccessFile& file, const std::string& where,
                       proto::ShardCheckpoint* header, std::vector<WalkedVariable>* variables) {
  if (file.size() > static_cast<uint64_t>(INT_MAX)) {
    return absl::DataLossError(
        absl::StrCat(where, ": ", file.size(), " bytes, over the 2 GiB a shard writes"));
  }
  FileStream stream(&file);
  google::protobuf::io::CopyingInputStreamAdaptor adaptor(&stream);
  CodedInputStream in(&adaptor);
  in.SetTotalBytesLimit(INT_MAX);
  std::string rest;
  bool ok = true;
  {
    StringOutputStream sos(&rest);
    CodedOutputStream out(&sos);
    while (const uint32_t tag = in.ReadTag()) {
      if (tag == Tag(8, WireFormatLite::WIRETYPE_LENGTH_DELIMITED)) {
        variables->emplace_back();
        ok = WalkVariable(&in, &variables->back());
      } else {
        ok = WireFormatLite::SkipField(&in, tag, &out);
      }
      if (!ok) break;
    }
  }
  if (!stream.error().ok()) {
    return absl::DataLossError(absl::StrCat(where, ": ", stream.error().message()));
  }
  if (!ok || static_cast<uint64_t>(in.CurrentPosition()) != file.size() ||
      !header->ParseFromString(rest)) {
    return absl::DataLossError(absl::StrCat(where, ": cannot parse the checkpoint data"));
  }
  return absl::OkStatus();
}

// A tensor of float32 values of `shape`, dense, its bytes in the file.
absl::Status CheckTensor(const WalkedTensor& t, const std::vector<int64_t>& shape,
                         uint64_t file_size, const std::string& what) {
  const proto::Tensor& h = t.header;
  if (h.dtype() != proto::DT_FLOAT32 || !h.indices().empty() || !h.row_ids().empty() ||
      h.row_sparse()) {
    return absl::DataLossError(absl::StrCat(what, ": not dense float32 values"));
  }
  if (!std::equal(h.shape().begin(), h.shape().end(), shape.begin(), shape.end())) {
    return absl::DataLossError(absl::StrCat(what, " has shape ", tensor::ShapeString(h.shape()),
                                            "; its placement says ", tensor::ShapeString(shape)));
  }
  absl::StatusOr<uint64_t> want = base::ByteSize(h.shape(), sizeof(float), base::kMaxTensorBytes,
                                                 absl::StrCat(what, ": shape"));
  if (!want.ok()) return absl::DataLossError(want.status().message());
  if (t.bytes != *want || t.offset > file_size || t.bytes > file_size - t.offset) {
    return absl::DataLossError(
        absl::StrCat(what, ": ", t.bytes, " bytes of data for ", *want, " bytes of values"));
  }
  return absl::OkStatus();
}

std::string ShardName(const std::string& root, const checkpoint::CompleteCheckpoint& checkpoint,
                      int shard) {
  return absl::StrCat("checkpoint ", checkpoint::CheckpointDir(root, checkpoint.step), " shard ",
                      shard, " of ", checkpoint.num_shards);
}

}  // namespace

absl::StatusOr<std::unique_ptr<CheckpointReader>> CheckpointReader::Open(
    const std::string& root, const checkpoint::CompleteCheckpoint& checkpoint,
    const std::vector<tensor::VariableShape>& variables, io::FileSystem* fs) {
  if (root.empty()) return absl::InvalidArgumentError("checkpoint root is empty");
  if (checkpoint.num_shards < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_shards must be >= 1, got ", checkpoint.num_shards));
  }
  std::unique_ptr<CheckpointReader> r(new CheckpointReader());
  r->dir_ = checkpoint::CheckpointDir(root, checkpoint.step);
  r->variables_ = variables;
  std::vector<proto::ShardCheckpoint> headers(checkpoint.num_shards);
  std::vector<std::vector<WalkedVariable>> walked(checkpoint.num_shards);
  for (int s = 0; s < checkpoint.num_shards; ++s) {
    PSC_ASSIGN_OR_RETURN(
        checkpoint::OpenShardCheckpointData file,
        checkpoint::OpenShardCheckpoint(root, checkpoint.step, s, checkpoint.num_shards, fs));
    const std::string where = ShardName(root, checkpoint, s);
    PSC_RETURN_IF_ERROR(WalkShard(*file.file, where, &headers[s], &walked[s]));
    const proto::ShardCheckpoint& h = headers[s];
    if (h.format() != 1 || h.shard_index() != s || h.num_shards() != checkpoint.num_shards ||
        h.step() != checkpoint.step || h.row_sparse_left_out()) {
      return absl::DataLossError(absl::StrCat(where, ": header (format ", h.format(), ", shard ",
                                              h.shard_index(), " of ", h.num_shards(), ", step ",
                                              h.step(), ") does not match its file"));
    }
    r->files_.push_back(std::move(file));
  }
  // The placement: recorded by every shard, the same everywhere, for this
  // many shards, and placing exactly the model's variables.
  r->placement_ = headers[0].placement();
  const proto::Placement& placement = r->placement_;
  if (placement.num_shards() == 0 && placement.variables_size() == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint ", r->dir_, " records no placement of the variables"));
  }
  for (int s = 1; s < checkpoint.num_shards; ++s) {
    if (absl::Status same = placement::CheckSamePlacement(headers[s].placement(), placement);
        !same.ok()) {
      return absl::DataLossError(
          absl::StrCat(ShardName(root, checkpoint, s),
                       " records another placement than shard 0: ", same.message()));
    }
  }
  if (placement.num_shards() != checkpoint.num_shards) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint ", r->dir_, " has ", checkpoint.num_shards,
                     " shard files but records a placement on ", placement.num_shards()));
  }
  if (absl::Status fits = ps_client::ShardedParameters::Create(placement, variables).status();
      !fits.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint ", r->dir_, " does not fit the model: ", fits.message()));
  }
  // Each shard holds exactly the shard variables its placement puts there,
  // each value and slot float32 values of the part's shape.
  const std::vector<std::vector<tensor::VariableShape>> expected =
      placement::ShardVariables(placement);
  for (int s = 0; s < checkpoint.num_shards; ++s) {
    const std::string where = ShardName(root, checkpoint, s);
    if (walked[s].size() != expected[s].size()) {
      return absl::DataLossError(absl::StrCat(where, ": holds ", walked[s].size(),
                                              " variables; its placement puts ", expected[s].size(),
                                              " there"));
    }
    absl::flat_hash_map<std::string, const tensor::VariableShape*> by_name;
    for (const tensor::VariableShape& v : expected[s]) by_name[v.name] = &v;
    for (const WalkedVariable& v : walked[s]) {
      const std::string what = absl::StrCat(where, ": variable \"", v.header.name(), "\"");
      auto it = by_name.find(v.header.name());
      if (it == by_name.end()) {
        return absl::DataLossError(absl::StrCat(what, " is not placed on this shard"));
      }
      if (!v.has_value) return absl::DataLossError(absl::StrCat(what, " has no value"));
      ShardVariable sv;
      sv.shard = s;
      const uint64_t size = r->files_[s].file->size();
      PSC_RETURN_IF_ERROR(CheckTensor(v.value, it->second->shape, size, what));
      sv.tensors.push_back({it->second->shape, v.value.offset});
      for (size_t k = 0; k < v.slots.size(); ++k) {
        PSC_RETURN_IF_ERROR(
            CheckTensor(v.slots[k], it->second->shape, size, absl::StrCat(what, " slot ", k)));
        sv.tensors.push_back({it->second->shape, v.slots[k].offset});
      }
      r->shard_variables_[v.header.name()] = std::move(sv);
      by_name.erase(it);  // a repeated name is then "not placed"
    }
  }
  return r;
}

absl::Status CheckpointReader::ShardRows(const ShardVariable& sv, int slot,
                                         const std::vector<int64_t>& ids, float* out) const {
  const Extent& e = sv.tensors[slot];
  // A scalar is one row of one value.
  const size_t width =
      e.shape.empty() ? 1 : static_cast<size_t>(std::max<int64_t>(0, tensor::RowWidth(e.shape)));
  const uint64_t row_bytes = width * sizeof(float);
  const io::RandomAccessFile& file = *files_[sv.shard].file;
  // Runs of consecutive rows, one read each.
  for (size_t i = 0; i < ids.size();) {
    size_t j = i + 1;
    while (j < ids.size() && ids[j] == ids[j - 1] + 1) ++j;
    if (absl::Status s = file.Read(e.offset + static_cast<uint64_t>(ids[i]) * row_bytes,
                                   (j - i) * row_bytes, reinterpret_cast<char*>(out + i * width));
        !s.ok()) {
      return absl::DataLossError(absl::StrCat("checkpoint ", dir_, ": ", s.message()));
    }
    i = j;
  }
  return absl::OkStatus();
}

absl::Status CheckpointReader::Rows(int v, int slot, int64_t first, int64_t count,
                                    float* out) const {
  if (v < 0 || static_cast<size_t>(v) >= variables_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("no variable ", v));
  }
  const proto::VariablePlacement& vp = placement_.variables(v);
  const std::vector<int64_t>& shape = variables_[v].shape;
  const int64_t rows = shape.empty() ? 1 : shape[0];
  if (first < 0 || count < 0 || first > rows - count) {
    return absl::InvalidArgumentError(absl::StrCat("rows [", first, ", ", first + count, ") of \"",
                                                   vp.name(), "\": outside the variable"));
  }
  const int64_t width = shape.empty() ? 1 : std::max<int64_t>(0, tensor::RowWidth(shape));
  for (const proto::VariablePlacement::Part& part : vp.parts()) {
    // A scalar sits whole in its one part.
    const int64_t part_first = shape.empty() ? 0 : part.first_axis_offset();
    const int64_t part_rows = shape.empty() ? 1 : part.first_axis_size();
    const int64_t begin = std::max(first, part_first);
    const int64_t end = std::min(first + count, part_first + part_rows);
    if (begin >= end) continue;
    const ShardVariable& sv = shard_variables_.at(part.shard_variable());
    if (slot < 0 || static_cast<size_t>(slot) >= sv.tensors.size()) {
      return absl::InvalidArgumentError(absl::StrCat("\"", vp.name(), "\" has ",
                                                     sv.tensors.size() - 1,
                                                     " optimizer slot(s); slot ", slot, " asked"));
    }
    std::vector<int64_t> ids(static_cast<size_t>(end - begin));
    for (size_t i = 0; i < ids.size(); ++i) {
      ids[i] = begin - part_first + static_cast<int64_t>(i);
    }
    PSC_RETURN_IF_ERROR(ShardRows(sv, slot, ids, out + (begin - first) * width));
  }
  return absl::OkStatus();
}

absl::Status CheckpointReader::FillPull(int shard, const proto::PullRequest& request,
                                        proto::PullResponse* response) const {
  response->Clear();
  for (const proto::RowSelection& r : request.rows()) {
    const std::string what = absl::StrCat("rows of \"", r.variable(), "\"");
    auto it = shard_variables_.find(r.variable());
    if (it == shard_variables_.end() || it->second.shard != shard || r.slot() != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": not a variable of shard ", shard, " of ", dir_));
    }
    const std::vector<int64_t>& shape = it->second.tensors[0].shape;
    if (tensor::RowWidth(shape) < 0) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": a variable without rows"));
    }
    PSC_ASSIGN_OR_RETURN(std::vector<int64_t> ids,
                         tensor::DecodeRowIds(r.row_ids(), shape[0], what));
    std::vector<float> values(ids.size() * static_cast<size_t>(tensor::RowWidth(shape)));
    PSC_RETURN_IF_ERROR(ShardRows(it->second, 0, ids, values.data()));
    proto::NamedTensor* t = response->add_variables();
    t->set_name(r.variable());
    PSC_RETURN_IF_ERROR(
        tensor::SetRowSparseTensor(shape, ids, values, proto::DT_FLOAT32, t->mutable_tensor()));
  }
  return absl::OkStatus();
}

}  // namespace evaluator
}  // namespace psc
