// glibc malloc settings for processes that move megabyte tensors every step.
//
// By default glibc serves blocks above a (dynamic) threshold with fresh
// mmap()s and gives freed heap tops back to the kernel, so every push or pull
// of a model touches new pages: page faults and zeroing cost as much as the
// copy itself (measured on the data channel: about 10% of a ps_server's time
// in exc_page_fault). Keeping such blocks on the heap makes them reusable.
#ifndef PSC_COMMON_BASE_MALLOC_TUNING_H_
#define PSC_COMMON_BASE_MALLOC_TUNING_H_

namespace psc {
namespace base {

// Serve blocks up to 32 MiB from the heap and keep up to 1 GiB of free heap
// top. Call once at the start of main, before threads start.
void KeepLargeBuffersOnTheHeap();

}  // namespace base
}  // namespace psc

#endif  // PSC_COMMON_BASE_MALLOC_TUNING_H_
