#include "common/base/malloc_tuning.h"

#include <malloc.h>

namespace psc {
namespace base {

void KeepLargeBuffersOnTheHeap() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // the largest glibc accepts on 64-bit
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

}  // namespace base
}  // namespace psc
