// Top-k sparsification (the job's --topk_ratio, after Deep Gradient
// Compression): of a gradient of n elements, only the k of largest
// magnitude travel, as a sparse tensor (proto::Tensor.indices: uint32
// little-endian, strictly increasing; `data` one value per index, in the
// job's wire dtype). Workers keep what was left out as error feedback
// (worker/error_feedback.h); servers scatter the values into zeros.
// Pure functions; thread-safe.
#ifndef PSC_COMMON_TENSOR_TOPK_H_
#define PSC_COMMON_TENSOR_TOPK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "proto/common.pb.h"
#include "proto/job.pb.h"

namespace psc {
namespace tensor {

// The largest element count a sparse tensor may index (uint32 indices).
inline constexpr int64_t kMaxSparseElements = int64_t{1} << 32;

// OK for a ratio of the job's --topk_ratio: 0 (off) or finite in (0, 1);
// INVALID_ARGUMENT naming the flag otherwise.
absl::Status CheckTopKRatio(double ratio);

// The values sent of n >= 1 elements: max(1, ceil(ratio * n)), at most n.
// `ratio` in (0, 1).
int64_t TopKCount(int64_t n, double ratio);

// The indices of the k elements of `values` with the largest magnitude
// (NaN counts as largest; ties go to the lower index), ascending. k in
// [1, values.size()], values.size() at most kMaxSparseElements.
std::vector<uint32_t> SelectTopK(absl::Span<const float> values, int64_t k);

// A sparse tensor of `shape` holding values[i] for each of `indices` (as
// SelectTopK returns them), encoded as `dtype` (EncodeFloats's errors).
// `sent`, if not null, receives the values as the receiver decodes them
// (rounded to `dtype`), one per index.
absl::Status SetSparseTensor(absl::Span<const int64_t> shape, absl::Span<const float> values,
                             absl::Span<const uint32_t> indices, proto::DataType dtype,
                             proto::Tensor* out, std::vector<float>* sent = nullptr);

// Scatters sparse tensor `t`'s values (in `dtype`) into `out`, which holds
// product(shape) elements and is zeroed first. INVALID_ARGUMENT, naming
// `what`, unless `t` carries exactly `want_k` indices, strictly increasing
// and below out.size(), and `data` holds exactly one `dtype` value each.
absl::Status DecodeSparse(const proto::Tensor& t, proto::DataType dtype, int64_t want_k,
                          absl::string_view what, absl::Span<float> out);

// OK for workers' error-feedback residuals as a checkpoint or a unit
// carries them: each worker at most once, worker and step >= 0, each
// residual named once, a float32 tensor (ValidateFloatTensor) of finite
// values. INVALID_ARGUMENT naming `what` otherwise. Whether the names and
// shapes are the job's is the worker's to check.
absl::Status CheckErrorFeedback(const proto::ErrorFeedbackState& state, absl::string_view what);

}  // namespace tensor
}  // namespace psc

#endif  // PSC_COMMON_TENSOR_TOPK_H_
