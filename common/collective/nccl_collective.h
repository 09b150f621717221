// NCCL collectives between GPUs, behind the CUDA-free interfaces of
// collective.h:
//   - CreateNcclCollective: one rank per worker process (multi_worker_mirrored
//     on GPUs), the group formed through the chief's KeyValueStore;
//   - CreateLocalNcclGroup: one process driving several GPUs (mirrored on one
//     worker), every device's communicator in this process.
// Their host-memory calls (Collective's, LocalNcclGroup::AllReduceSum) copy
// the host data to a device buffer the object keeps (grown on demand, freed
// with it), run the collective on a stream of its own, copy the result back
// and wait. LocalNcclGroup::AllReduceSumOnDevice sums the caller's device
// buffers in place instead (mirrored replicas' gradients on their GPUs): no
// host copy, ordered after the work the caller's streams have queued, and
// complete when it returns.
//
// This header includes no CUDA or NCCL header; its definitions are built
// only into the GPU plugin (gpu_plugin/gpu_api.h), which is how the rest of
// pscluster reaches them.
//
// Errors (what the caller can do about them):
//   INVALID_ARGUMENT     the caller's arguments (checked before any CUDA call,
//                        but for AllReduceSumOnDevice's query of where its
//                        buffers live); the group stays usable
//   DEADLINE_EXCEEDED    the group did not form, or an operation did not
//                        finish, within the timeout (a peer is missing or hung)
//   UNAVAILABLE          NCCL reported a system, remote or internal error
//                        (a peer died, the network failed): form the group again
//   FAILED_PRECONDITION  no usable GPU (no driver, no such device), or the
//                        group is unusable after an earlier failure
//   RESOURCE_EXHAUSTED   the device buffer could not be allocated
//   INTERNAL             any other CUDA or NCCL error, naming the call
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
#include "common/collective/nccl_group.h"

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

// A group over `devices` (distinct CUDA ordinals, at least one).
// INVALID_ARGUMENT for an empty list, a negative or repeated ordinal (before
// any CUDA call); FAILED_PRECONDITION when a device does not exist.
absl::StatusOr<std::unique_ptr<LocalNcclGroup>> CreateLocalNcclGroup(
    const std::vector<int>& devices);

}  // namespace collective
}  // namespace psc

#endif  // PSC_COMMON_COLLECTIVE_NCCL_COLLECTIVE_H_
