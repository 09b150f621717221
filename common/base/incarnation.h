// A process's incarnation: the random number a task registers with, so that
// a restart of the same task is told apart from the process before it.
#ifndef PSC_COMMON_BASE_INCARNATION_H_
#define PSC_COMMON_BASE_INCARNATION_H_

#include <cstdint>

namespace psc {
namespace base {

// A random, non-zero incarnation (getrandom, else std::random_device).
uint64_t NewIncarnation();

}  // namespace base
}  // namespace psc

#endif  // PSC_COMMON_BASE_INCARNATION_H_
