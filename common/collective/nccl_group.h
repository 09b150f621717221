// A group of this process's GPUs that sums buffers over them with NCCL
// (mirrored replicas on one worker): the CUDA-free interface, made by
// CreateLocalNcclGroup (nccl_collective.h) inside the GPU plugin and used
// through it (gpu_plugin/gpu_api.h).
#ifndef PSC_COMMON_COLLECTIVE_NCCL_GROUP_H_
#define PSC_COMMON_COLLECTIVE_NCCL_GROUP_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace psc {
namespace collective {

// One communicator per device of this process, from ncclCommInitAll (NCCL
// needs one rank per device: the devices are distinct GPUs).
// Thread-compatible: one operation at a time.
class LocalNcclGroup {
 public:
  virtual ~LocalNcclGroup() = default;

  // The CUDA devices, in the order the spans of AllReduceSum follow.
  virtual const std::vector<int>& devices() const = 0;

  // Sums the spans element-wise over the devices and writes the sum into
  // every span (host memory; span i is device i's copy). INVALID_ARGUMENT
  // unless there is one span per device, all of the same length. Any CUDA
  // or NCCL failure leaves the group unusable (FAILED_PRECONDITION after).
  virtual absl::Status AllReduceSum(const std::vector<absl::Span<float>>& per_device_host) = 0;

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
  virtual absl::Status AllReduceSumOnDevice(const std::vector<std::vector<float*>>& per_device,
                                            const std::vector<size_t>& counts,
                                            const std::vector<void*>& streams) = 0;

  // "nccl <version> on GPUs 0,1"
  virtual std::string Describe() const = 0;
};

}  // namespace collective
}  // namespace psc

#endif  // PSC_COMMON_COLLECTIVE_NCCL_GROUP_H_
