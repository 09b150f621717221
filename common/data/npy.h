// The NumPy .npy format (numpy.lib.format, versions 1.0, 2.0 and 3.0), as
// np.save and np.savez write it: a magic string, a version, a header that is
// a Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape':
// (60000, 28, 28)}, then the elements in C order.
//
// ParseNpyHeader reads only the header, so a caller can memory-map the data
// that follows. Every size goes through common/base/checked_size.h. Plain
// numbers and booleans only (no strings, objects or structured dtypes);
// little-endian or byte-order-free types; C order (a Fortran-ordered array of
// more than one dimension is refused, naming the fix). Pure; thread-safe.
#ifndef PSC_COMMON_DATA_NPY_H_
#define PSC_COMMON_DATA_NPY_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psc::data {

enum class NpyType {
  kBool,
  kInt8,
  kUint8,
  kInt16,
  kUint16,
  kInt32,
  kUint32,
  kInt64,
  kUint64,
  kFloat32,
  kFloat64
};

// "uint8", "float32", ...: NumPy's names.
const char* NpyTypeName(NpyType type);
size_t NpyTypeSize(NpyType type);
bool NpyTypeIsInteger(NpyType type);  // kBool counts as an integer type

struct NpyHeader {
  NpyType type = NpyType::kFloat32;
  std::vector<int64_t> shape;  // empty: a scalar
  int64_t count = 1;           // elements: the product of shape
  uint64_t data_offset = 0;    // bytes from the start of the .npy to the first element
  uint64_t data_bytes = 0;     // count * NpyTypeSize(type)
  // "(60000, 28, 28) uint8", for messages.
  std::string Text() const;
};

// The most header bytes accepted (NumPy's own reader stops at 10,000 by default).
inline constexpr uint64_t kMaxNpyHeaderBytes = 65536;
// The bytes before the header's text: magic, version and length (version
// 2.0 and 3.0's; 1.0's is 2 bytes shorter).
inline constexpr uint64_t kNpyPreambleBytes = 12;

// Parses the header at the start of `bytes` (which may hold only the start
// of the file: at least data_offset bytes). The array may hold at most
// `max_data_bytes`. Errors are DATA_LOSS naming `name` (the file, or
// "archive.npz: x_train.npy") and what is wrong: the magic, the version, a
// truncated header, the dict, an unsupported descr (named), a Fortran-ordered
// array, a shape whose size overflows or exceeds the limit.
absl::StatusOr<NpyHeader> ParseNpyHeader(absl::string_view bytes, absl::string_view name,
                                         uint64_t max_data_bytes);

// The header np.save writes for `shape` and `type` (version 1.0, padded to a
// multiple of 64 bytes, ending in '\n'); for tests and exporters.
std::string MakeNpyHeader(NpyType type, const std::vector<int64_t>& shape);

}  // namespace psc::data

#endif  // PSC_COMMON_DATA_NPY_H_
