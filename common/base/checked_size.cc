#include "common/base/checked_size.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"

namespace psc {
namespace base {

std::optional<uint64_t> CheckedMul(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

std::optional<uint64_t> CheckedAdd(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

absl::StatusOr<int64_t> ElementCount(absl::Span<const int64_t> dims, int64_t max_elements,
                                     absl::string_view what) {
  uint64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": negative dimension ", d));
    }
    std::optional<uint64_t> next = CheckedMul(n, static_cast<uint64_t>(d));
    if (!next.has_value() || *next > static_cast<uint64_t>(max_elements)) {
      // Refused even when a later dimension is 0: no legitimate shape
      // has a prefix this large.
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": more than ", max_elements, " elements"));
    }
    n = *next;
  }
  return static_cast<int64_t>(n);
}

absl::StatusOr<uint64_t> ByteSize(absl::Span<const int64_t> dims, size_t element_bytes,
                                  uint64_t max_bytes, absl::string_view what) {
  if (element_bytes == 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": 0-byte elements"));
  }
  uint64_t bytes = element_bytes;
  for (int64_t d : dims) {
    if (d < 0) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": negative dimension ", d));
    }
    std::optional<uint64_t> next = CheckedMul(bytes, static_cast<uint64_t>(d));
    if (!next.has_value() || *next > max_bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": exceeds the limit of ", max_bytes, " bytes"));
    }
    bytes = *next;
  }
  return bytes;
}

absl::StatusOr<uint64_t> ArrayBytes(uint64_t count, size_t element_bytes, uint64_t max_bytes,
                                    absl::string_view what) {
  std::optional<uint64_t> bytes = CheckedMul(count, element_bytes);
  if (!bytes.has_value() || *bytes > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", count, " entries of ", element_bytes,
                                                   " bytes exceed the limit of ", max_bytes,
                                                   " bytes"));
  }
  return *bytes;
}

absl::StatusOr<uint64_t> BoundedSum(absl::Span<const uint64_t> sizes, uint64_t max_total,
                                    absl::string_view what) {
  uint64_t total = 0;
  for (uint64_t s : sizes) {
    std::optional<uint64_t> next = CheckedAdd(total, s);
    if (!next.has_value() || *next > max_total) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": more than ", max_total, " bytes in all"));
    }
    total = *next;
  }
  return total;
}

absl::Status CheckInRange(int64_t value, int64_t lo, int64_t hi, absl::string_view what) {
  if (value < lo || value > hi) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", value, " out of range [", lo, ", ", hi, "]"));
  }
  return absl::OkStatus();
}

}  // namespace base
}  // namespace psc
