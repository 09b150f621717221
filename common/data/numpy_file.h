// NumPy arrays from files as np.save and np.savez write them: a .npy file,
// or the members of an .npz archive (a zip of .npy files; np.savez stores
// them, np.savez_compressed deflates them).
//
// A .npy file and an uncompressed (stored) member are memory-mapped, not
// copied: the array's elements are the file's pages, so a 2 GB training set
// costs the page cache, not the heap. A deflated member is decompressed into
// memory, its size bounded by what its compressed size can expand to. The zip
// is read with minizip (Debian's libminizip-dev), whose
// unzGetCurrentFileZStreamPos64 gives a stored member's offset in the file.
//
// Every size read from a file goes through common/base/checked_size.h.
// Errors: NOT_FOUND for a missing file; DATA_LOSS naming the file (and the
// member) and what is wrong for anything corrupt or unsupported. A stored
// member's CRC is not checked (that would read every page of it); a deflated
// member's is. Thread-compatible; a NumpyArray is immutable and may be shared.
#ifndef PSC_COMMON_DATA_NUMPY_FILE_H_
#define PSC_COMMON_DATA_NUMPY_FILE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/data/npy.h"

namespace psc::data {

class NumpyArray {
 public:
  // An array held in memory: `elements` are shape's elements of `type`, C
  // order, little-endian. INVALID_ARGUMENT if their size does not match.
  static absl::StatusOr<NumpyArray> FromElements(NpyType type, std::vector<int64_t> shape,
                                                 std::string elements);

  const NpyHeader& header() const { return header_; }
  // header().data_bytes bytes of elements, in C order, little-endian. A
  // stored .npz member's may sit at any address (a zip aligns nothing): read
  // through memcpy, or check the alignment before using as<T>().
  const void* data() const { return data_; }
  template <typename T>
  const T* as() const {
    return static_cast<const T*>(data_);
  }
  // True when the elements are the file's mapped pages.
  bool mapped() const { return mapped_; }
  // Mapped arrays: drops every page holding any of data() bytes [offset,
  // offset + bytes) from this process's resident set. The mapping is
  // read-only, so nothing is lost: the pages stay in the page cache and are
  // faulted back in when read again. Keeps a pass over a 2 GB array from
  // leaving 2 GB resident. The caller checks the range. No-op for arrays in
  // memory.
  void ReleasePages(uint64_t offset, uint64_t bytes) const;

 private:
  friend class NumpyArrayMaker;
  NpyHeader header_;
  std::shared_ptr<const void> storage_;  // the mapping or the heap buffer
  const void* data_ = nullptr;
  bool mapped_ = false;
};

// The most bytes one array may hold (mapped or not): 64 GiB.
inline constexpr uint64_t kMaxNumpyArrayBytes = uint64_t{64} << 30;

// A .npy file, memory-mapped.
absl::StatusOr<NumpyArray> ReadNpyFile(const std::string& path);

// The .npy members of an .npz archive by name, without ".npy" ("x_train").
// Members of other names are ignored. DATA_LOSS for a corrupt archive, an
// encrypted member, a compression other than stored or deflate, two members
// of one name, or a member whose .npy header is bad or whose size disagrees
// with its header.
absl::StatusOr<std::map<std::string, NumpyArray>> ReadNpzFile(const std::string& path);

// The .npy headers of an .npz archive's members by name, as ReadNpzFile
// names them, each read from its member's first bytes (a deflated member is
// inflated no further): the shapes of the arrays without their elements.
// DATA_LOSS as ReadNpzFile's for a corrupt archive or header; a member's
// size is not checked against its header.
absl::StatusOr<std::map<std::string, NpyHeader>> ReadNpzHeaders(const std::string& path);

}  // namespace psc::data

#endif  // PSC_COMMON_DATA_NUMPY_FILE_H_
