// NCCL collectives between GPUs, behind the CUDA-free interfaces of
// collective.h:
//   - CreateNcclCollective: one rank per worker process (multi_worker_mirrored
//     on GPUs), the group formed through the chief's KeyValueStore;
//   - CreateLocalNcclGroup: one process driving several GPUs (mirrored on one
//     worker), every device's communicator in this process.
// Both take and return host memory: each call copies the host data to a
// device buffer the object keeps (grown on demand, freed with it), runs the
// collective on a stream of its own, copies the result back and waits.
//
// This header includes no CUDA or NCCL header. Builds without CUDA link
// nccl_collective_stub.cc, where every entry point is UNIMPLEMENTED
// ("built without CUDA"), so callers build either way.
//
// Errors (what the caller can do about them):
//   INVALID_ARGUMENT     the caller's arguments (checked before any CUDA call)
//   DEADLINE_EXCEEDED    the group did not form, or an operation did not
//                        finish, within the timeout (a peer is missing or hung)
//   UNAVAILABLE          NCCL reported a system, remote or internal error
//                        (a peer died, the network failed): form the group again
//   FAILED_PRECONDITION  no usable GPU (no driver, no such device), or the
//                        group is unusable after an earlier failure
//   RESOURCE_EXHAUSTED   the device buffer could not be allocated
//   INTERNAL             any other CUDA or NCCL error, naming the call
//   UNIMPLEMENTED        built without CUDA
#ifndef PSC_COMMON_COLLECTIVE_NCCL_COLLECTIVE_H_
#define PSC_COMMON_COLLECTIVE_NCCL_COLLECTIVE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/collective/collective.h"

namespace psc {
namespace collective {

// The store key (after `prefix`) under which rank 0 publishes the NCCL
// unique id (its 128 bytes, as the value).
inline constexpr char kNcclUniqueIdKey[] = "nccl_unique_id";

// Forms rank `rank` of a group of `size` processes on CUDA device `device`.
// Rank 0 creates the NCCL unique id and Sets it under prefix +
// kNcclUniqueIdKey in `store`; the other ranks Get it, waiting for it. Then
// every rank joins the communicator (non-blocking NCCL, polled).
//
// `timeout` bounds the whole formation (the wait for the id and the joining)
// and, separately, each later AllReduceSum or Broadcast; a group that misses
// it is aborted (DEADLINE_EXCEEDED) and must be formed again, under a new
// prefix. INVALID_ARGUMENT for a null store, size < 1, a rank outside
// [0, size), a negative device or a non-positive timeout, before any CUDA
// call. `store` is used only during the call. The result is
// thread-compatible (collective.h); its Describe() is "nccl <version> on GPU
// <device>".
absl::StatusOr<std::unique_ptr<Collective>> CreateNcclCollective(KeyValueStore* store,
                                                                 const std::string& prefix,
                                                                 int rank, int size, int device,
                                                                 absl::Duration timeout);

// One communicator per device of this process, from ncclCommInitAll.
// Thread-compatible: one operation at a time.
class LocalNcclGroup {
 public:
  struct Impl;  // CUDA and NCCL state, defined where CUDA is

  explicit LocalNcclGroup(std::unique_ptr<Impl> impl);
  ~LocalNcclGroup();
  LocalNcclGroup(const LocalNcclGroup&) = delete;
  LocalNcclGroup& operator=(const LocalNcclGroup&) = delete;

  // The CUDA devices, in the order the spans of AllReduceSum follow.
  const std::vector<int>& devices() const;

  // Sums the spans element-wise over the devices and writes the sum into
  // every span (host memory; span i is device i's copy). INVALID_ARGUMENT
  // unless there is one span per device, all of the same length. Any CUDA
  // or NCCL failure leaves the group unusable (FAILED_PRECONDITION after).
  absl::Status AllReduceSum(const std::vector<absl::Span<float>>& per_device_host);

  // "nccl <version> on GPUs 0,1"
  std::string Describe() const;

 private:
  std::unique_ptr<Impl> impl_;
};

// A group over `devices` (distinct CUDA ordinals, at least one).
// INVALID_ARGUMENT for an empty list, a negative or repeated ordinal (before
// any CUDA call); FAILED_PRECONDITION when a device does not exist.
absl::StatusOr<std::unique_ptr<LocalNcclGroup>> CreateLocalNcclGroup(
    const std::vector<int>& devices);

}  // namespace collective
}  // namespace psc

#endif  // PSC_COMMON_COLLECTIVE_NCCL_COLLECTIVE_H_
