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
// This header includes no CUDA or NCCL header. Builds without CUDA link
// nccl_collective_stub.cc, where every entry point is UNIMPLEMENTED
// ("built without CUDA"), so callers build either way.
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

// One communicator per device of this process, from ncclCommInitAll (NCCL
// needs one rank per device: the devices are distinct GPUs).
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

  // The same sum over buffers in device memory, in place, without a host
  // copy: per_device[i][t] is device i's copy of buffer t, counts[t] floats
  // on devices()[i] (not owned; alive until the call returns), and
  // afterwards every copy of buffer t holds the sum over the devices.
  // streams[i] is a cudaStream_t of device i, as void* (null: its legacy
  // default stream), whose queued work writes the buffers: each device's
  // all-reduce starts after the work queued on streams[i] so far (an event
  // the group's stream waits for), one ncclAllReduce per buffer inside one
  // ncclGroupStart/End on the group's own streams. The call returns once
  // every sum is complete on every device (it waits for the group's
  // streams), so any stream, or a copy to the host, may read the buffers
  // after it; with one device they are left as they are. INVALID_ARGUMENT
  // unless there is one list of buffers and one stream per device and one
  // count per buffer in each list, for a null buffer of a nonzero count, and
  // for a buffer the CUDA runtime does not know as device memory of its
  // device (a host pointer): all checked before anything is queued, leaving
  // the group usable. Any later CUDA or NCCL failure leaves it unusable
  // (FAILED_PRECONDITION after), the buffers' contents undefined.
  absl::Status AllReduceSumOnDevice(const std::vector<std::vector<float*>>& per_device,
                                    const std::vector<size_t>& counts,
                                    const std::vector<void*>& streams);

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
