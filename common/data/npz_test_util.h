// Test helpers: .npy bytes as np.save writes them, and .npz archives as
// np.savez (stored) and np.savez_compressed (deflated) write them, with
// minizip's zip writer. Tests only.
#ifndef PSC_COMMON_DATA_NPZ_TEST_UTIL_H_
#define PSC_COMMON_DATA_NPZ_TEST_UTIL_H_

#include <zip.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "common/data/idx_reader.h"
#include "common/data/npy.h"
#include "common/data/numpy_file.h"
#include "gtest/gtest.h"

namespace psc::data::testing {

// np.save's bytes: the header, then `bytes` bytes of elements from `data`.
inline std::string NpyBytes(NpyType type, const std::vector<int64_t>& shape, const void* data,
                            size_t bytes) {
  return MakeNpyHeader(type, shape) + std::string(static_cast<const char*>(data), bytes);
}

// A version 1.0 .npy header around `dict`, spelled exactly as given.
inline std::string NpyV1(const std::string& dict) {
  std::string h = "\x93NUMPY\x01";
  h.push_back('\0');
  h.push_back(static_cast<char>(dict.size() & 0xff));
  h.push_back(static_cast<char>(dict.size() >> 8));
  return h + dict;
}

// An array in memory of `values` (C order).
template <typename T>
NumpyArray ArrayOf(NpyType type, std::vector<int64_t> shape, const std::vector<T>& values) {
  std::string bytes(values.size() * sizeof(T), '\0');
  std::memcpy(bytes.data(), values.data(), bytes.size());
  auto a = NumpyArray::FromElements(type, std::move(shape), std::move(bytes));
  EXPECT_TRUE(a.ok()) << a.status();
  return *std::move(a);
}

struct NpzMember {
  std::string name;
  std::string bytes;
  bool deflate = false;
};

inline void WriteNpz(const std::string& path, const std::vector<NpzMember>& members) {
  zipFile zf = zipOpen64(path.c_str(), APPEND_STATUS_CREATE);
  ASSERT_NE(zf, nullptr) << path;
  for (const NpzMember& m : members) {
    zip_fileinfo zi = {};
    ASSERT_EQ(zipOpenNewFileInZip64(zf, m.name.c_str(), &zi, nullptr, 0, nullptr, 0, nullptr,
                                    m.deflate ? Z_DEFLATED : 0,
                                    m.deflate ? Z_DEFAULT_COMPRESSION : 0, /*zip64=*/1),
              ZIP_OK);
    ASSERT_EQ(zipWriteInFileInZip(zf, m.bytes.data(), static_cast<unsigned>(m.bytes.size())),
              ZIP_OK);
    ASSERT_EQ(zipCloseFileInZip(zf), ZIP_OK);
  }
  ASSERT_EQ(zipClose(zf, nullptr), ZIP_OK);
}

// Examples [first, first + n) of a Fashion-MNIST IDX pair (28 x 28 images)
// as the members x_<split> ((n, 28, 28) uint8) and y_<split> ((n,) uint8)
// of an .npz. The caller checks the range.
inline void AddIdxSplit(const IdxArray& images, const IdxArray& labels, int64_t first, int64_t n,
                        const std::string& split, std::vector<NpzMember>* members) {
  constexpr int64_t kPixels = 28 * 28;
  members->push_back(
      {"x_" + split + ".npy",
       NpyBytes(NpyType::kUint8, {n, 28, 28}, images.data.data() + first * kPixels, n * kPixels)});
  members->push_back(
      {"y_" + split + ".npy", NpyBytes(NpyType::kUint8, {n}, labels.data.data() + first, n)});
}

}  // namespace psc::data::testing

#endif  // PSC_COMMON_DATA_NPZ_TEST_UTIL_H_
