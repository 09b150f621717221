#include "common/base/incarnation.h"

#include <sys/random.h>

#include <random>

namespace psc {
namespace base {

uint64_t NewIncarnation() {
  uint64_t x = 0;
  while (x == 0) {
    if (getrandom(&x, sizeof(x), 0) != static_cast<ssize_t>(sizeof(x))) {
      x = std::random_device()() | (uint64_t{std::random_device()()} << 32);
    }
  }
  return x;
}

}  // namespace base
}  // namespace psc
