// NumPy files as a data loader reads them. The first byte picks the reader:
// even, the .npy header parser on the rest; odd, the rest as a file (an
// in-memory one) read as an .npz archive and as a .npy file. Whatever reads
// must be readable whole: each array's bytes are touched, and read as labels.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/data/npy.h"
#include "common/data/numpy_file.h"
#include "common/data/numpy_labels.h"

namespace {

void Touch(const psc::data::NumpyArray& a) {
  const auto* p = static_cast<const volatile unsigned char*>(a.data());
  unsigned sum = 0;
  for (uint64_t i = 0; i < a.header().data_bytes; i += 4096) sum += p[i];
  if (a.header().data_bytes > 0) sum += p[a.header().data_bytes - 1];
  (void)sum;
  (void)psc::data::LabelsFromArray(a, 10, "fuzz");  // as a data loader reads labels
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace psc::data;
  if (size < 1) return 0;
  const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  if (data[0] % 2 == 0) {
    (void)ParseNpyHeader(body, "fuzz.npy", kMaxNumpyArrayBytes);
    return 0;
  }
  const int fd = memfd_create("npz_fuzz", MFD_CLOEXEC);
  if (fd < 0) return 0;
  if (write(fd, body.data(), body.size()) == static_cast<ssize_t>(body.size())) {
    const std::string path = "/proc/self/fd/" + std::to_string(fd);
    if (auto arrays = ReadNpzFile(path); arrays.ok()) {
      for (const auto& [name, a] : *arrays) Touch(a);
    }
    if (auto a = ReadNpyFile(path); a.ok()) Touch(*a);
  }
  close(fd);
  return 0;
}
