#include "common/tensor/topk.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/tensor/tensor.h"
#include "common/tensor/wire_dtype.h"

namespace psc {
namespace tensor {
namespace {

float Magnitude(float x) {
  return std::isnan(x) ? std::numeric_limits<float>::infinity() : std::fabs(x);
}

}  // namespace

absl::Status CheckTopKRatio(double ratio) {
  if (ratio == 0 || (std::isfinite(ratio) && ratio > 0 && ratio < 1)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "--topk_ratio=", ratio,
      ": the fraction of each gradient's elements a push carries must be in (0, 1), or 0 (off)"));
}

int64_t TopKCount(int64_t n, double ratio) {
  const double k = std::ceil(ratio * static_cast<double>(n));
  if (!(k < static_cast<double>(n))) return n;
  return std::max<int64_t>(1, static_cast<int64_t>(k));
}

std::vector<uint32_t> SelectTopK(absl::Span<const float> values, int64_t k) {
  std::vector<uint32_t> order(values.size());
  std::iota(order.begin(), order.end(), 0u);
  // A strict total order: magnitude down, then index up.
  auto before = [&](uint32_t a, uint32_t b) {
    const float ma = Magnitude(values[a]), mb = Magnitude(values[b]);
    return ma > mb || (ma == mb && a < b);
  };
  if (k < static_cast<int64_t>(order.size())) {
    std::nth_element(order.begin(), order.begin() + k, order.end(), before);
    order.resize(static_cast<size_t>(k));
  }
  std::sort(order.begin(), order.end());
  return order;
}

absl::Status SetSparseTensor(absl::Span<const int64_t> shape, absl::Span<const float> values,
                             absl::Span<const uint32_t> indices, proto::DataType dtype,
                             proto::Tensor* out, std::vector<float>* sent) {
  std::vector<float> picked(indices.size());
  for (size_t j = 0; j < indices.size(); ++j) picked[j] = values[indices[j]];
  out->Clear();
  out->set_dtype(dtype);
  for (int64_t d : shape) out->add_shape(d);
  PSC_RETURN_IF_ERROR(EncodeFloats(picked, dtype, out->mutable_data()));
  // Host order, as every tensor's bytes (the hosts are little-endian).
  out->mutable_indices()->assign(reinterpret_cast<const char*>(indices.data()),
                                 indices.size() * sizeof(uint32_t));
  if (sent != nullptr) {
    sent->resize(picked.size());
    PSC_RETURN_IF_ERROR(DecodeFloats(out->data(), dtype, absl::MakeSpan(*sent)));
  }
  return absl::OkStatus();
}

absl::Status DecodeSparse(const proto::Tensor& t, proto::DataType dtype, int64_t want_k,
                          absl::string_view what, absl::Span<float> out) {
  const std::string& bytes = t.indices();
  if (bytes.size() % sizeof(uint32_t) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": ", bytes.size(), " bytes of indices is not a whole number of uint32s"));
  }
  const int64_t k = static_cast<int64_t>(bytes.size() / sizeof(uint32_t));
  if (k != want_k) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " carries ", k, " values; this job's --topk_ratio sends ", want_k, " of its ",
        out.size(), " (the worker runs another job's settings: a job fingerprint mismatch)"));
  }
  std::vector<float> values(static_cast<size_t>(k));
  if (absl::Status s = DecodeFloats(t.data(), dtype, absl::MakeSpan(values)); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", s.message()));
  }
  std::fill(out.begin(), out.end(), 0.0f);
  int64_t previous = -1;
  for (int64_t j = 0; j < k; ++j) {
    uint32_t index;
    std::memcpy(&index, bytes.data() + j * sizeof(uint32_t), sizeof(index));
    const int64_t i = index;
    if (i <= previous || i >= static_cast<int64_t>(out.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": index ", i, " at position ", j, " is ",
                       i <= previous ? "not above the one before it" : "out of range", " (",
                       out.size(), " elements)"));
    }
    out[static_cast<size_t>(i)] = values[static_cast<size_t>(j)];
    previous = i;
  }
  return absl::OkStatus();
}

absl::Status CheckErrorFeedback(const proto::ErrorFeedbackState& state, absl::string_view what) {
  absl::flat_hash_set<int32_t> workers;
  for (const proto::ErrorFeedback& f : state.workers()) {
    const std::string who = absl::StrCat(what, ": error feedback of worker ", f.worker());
    if (f.worker() < 0 || f.step() < 0 || !workers.insert(f.worker()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(who, " at step ", f.step(), ": a negative number or a repeated worker"));
    }
    absl::flat_hash_set<absl::string_view> names;
    for (const proto::NamedTensor& r : f.residuals()) {
      const std::string name = absl::StrCat(who, ", residual \"", r.name(), "\"");
      if (r.name().empty() || !names.insert(r.name()).second) {
        return absl::InvalidArgumentError(absl::StrCat(name, ": empty or repeated name"));
      }
      PSC_RETURN_IF_ERROR(ValidateFloatTensor(r.tensor(), name));
      if (!r.tensor().indices().empty()) {
        return absl::InvalidArgumentError(absl::StrCat(name, ": sparse"));
      }
      if (int64_t bad = FirstNonFinite(r.tensor().data()); bad >= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(name, ": non-finite value at element ", bad));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace tensor
}  // namespace psc
