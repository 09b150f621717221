// Sizes computed from untrusted input: shapes, counts and lengths that arrive
// in requests, checkpoint files, data-channel frames and (later) model and
// data files. Every product and sum is checked for overflow and bounded
// before anything is allocated, here and nowhere else, so that a reader of a
// new format cannot get it subtly wrong:
//
//   PSC_ASSIGN_OR_RETURN(uint64_t bytes,
//                        base::ByteSize(shape, sizeof(float), limit, "variable \"w\""));
//   buffer.resize(bytes);  // bytes <= limit, no wrap
//
// Errors are INVALID_ARGUMENT naming `what`; a caller reading a file turns
// them into DATA_LOSS. Pure functions; thread-safe.
#ifndef PSC_COMMON_BASE_CHECKED_SIZE_H_
#define PSC_COMMON_BASE_CHECKED_SIZE_H_

#include <cstddef>
#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace psc {
namespace base {

// The most bytes one tensor may hold anywhere in pscluster: protobuf's limit
// on a bytes field (2 GiB - 1). A request, a checkpoint or a frame that
// announces more is refused before any allocation.
inline constexpr uint64_t kMaxTensorBytes = (uint64_t{1} << 31) - 1;

// a * b and a + b, or nullopt when the result does not fit uint64_t.
std::optional<uint64_t> CheckedMul(uint64_t a, uint64_t b);
std::optional<uint64_t> CheckedAdd(uint64_t a, uint64_t b);

// The number of elements of `dims` (1 for a scalar): INVALID_ARGUMENT for a
// negative dimension, or a product over `max_elements` (which also catches
// every overflow; the check runs after each factor, so no intermediate
// product wraps).
absl::StatusOr<int64_t> ElementCount(absl::Span<const int64_t> dims, int64_t max_elements,
                                     absl::string_view what);

// The bytes of `dims` elements of `element_bytes` each, at most `max_bytes`.
absl::StatusOr<uint64_t> ByteSize(absl::Span<const int64_t> dims, size_t element_bytes,
                                  uint64_t max_bytes, absl::string_view what);

// `count * element_bytes` (a count read from input, e.g. a table of u64
// sizes), at most `max_bytes`.
absl::StatusOr<uint64_t> ArrayBytes(uint64_t count, size_t element_bytes, uint64_t max_bytes,
                                    absl::string_view what);

// The sum of `sizes`, at most `max_total`.
absl::StatusOr<uint64_t> BoundedSum(absl::Span<const uint64_t> sizes, uint64_t max_total,
                                    absl::string_view what);

// OK when `value` lies in [lo, hi]; else INVALID_ARGUMENT "what <value> out
// of range [lo, hi]".
absl::Status CheckInRange(int64_t value, int64_t lo, int64_t hi, absl::string_view what);

}  // namespace base
}  // namespace psc

#endif  // PSC_COMMON_BASE_CHECKED_SIZE_H_
