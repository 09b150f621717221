// nccl_collective.h on the CUDA runtime and NCCL.
//
// Every wait is bounded: the communicator is non-blocking (config.blocking =
// 0), so joining the group and each collective return at once and this file
// polls ncclCommGetAsyncError (and cudaStreamQuery) until success, an error
// or the deadline, and aborts the communicator (ncclCommAbort) at the
// deadline. A group that failed is aborted when destroyed, never finalized.
//
// Lifecycle of an NcclCollective:
//   Create: validate -> id via the store -> cudaSetDevice -> stream ->
//           ncclCommInitRankConfig, polled -> READY
//   READY --AllReduceSum/Broadcast ok--> READY
//   READY --any CUDA/NCCL failure or timeout--> BROKEN (comm aborted at once
//           on a timeout, else in the destructor; every call
//           FAILED_PRECONDITION)
//   destructor: READY: ncclCommFinalize, polled, then ncclCommDestroy;
//               BROKEN: ncclCommAbort; then the buffer and the stream.
#include "common/collective/nccl_collective.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstring>
#include <limits>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/checked_size.h"
#include "common/base/clock.h"
#include "common/base/status_macros.h"

namespace psc {
namespace collective {
namespace {

// How often a pending NCCL or CUDA state is polled.
constexpr absl::Duration kPollInterval = absl::Microseconds(200);

std::string NcclVersion() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "?";
  // NCCL_VERSION(X, Y, Z) is X * 10000 + Y * 100 + Z since 2.9.
  return absl::StrCat(v / 10000, ".", (v % 10000) / 100, ".", v % 100);
}

absl::StatusCode NcclStatusCode(ncclResult_t r) {
  switch (r) {
    case ncclSuccess:
      return absl::StatusCode::kOk;
    case ncclSystemError:
    case ncclRemoteError:
    case ncclInternalError:
      return absl::StatusCode::kUnavailable;
    case ncclInvalidArgument:
    case ncclInvalidUsage:
      return absl::StatusCode::kInvalidArgument;
    default:  // ncclUnhandledCudaError, codes of a newer NCCL
      return absl::StatusCode::kInternal;
  }
}

// "<call>: <NCCL's string for r> (<NCCL's last error text>)".
absl::Status NcclStatus(ncclResult_t r, const char* call) {
  if (r == ncclSuccess) return absl::OkStatus();
  const char* last = ncclGetLastError(nullptr);
  return absl::Status(NcclStatusCode(r),
                      absl::StrCat(call, ": ", ncclGetErrorString(r),
                                   last != nullptr && *last != '\0' ? absl::StrCat(" (", last, ")")
                                                                    : std::string()));
}

// A failed runtime call's error is consumed (cudaGetLastError) so that a
// later call does not report it again.
absl::Status CudaStatus(cudaError_t e, const char* call) {
  if (e == cudaSuccess) return absl::OkStatus();
  cudaGetLastError();
  const std::string message =
      absl::StrCat(call, ": ", cudaGetErrorName(e), ": ", cudaGetErrorString(e));
  switch (e) {
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(message);
    case cudaErrorNoDevice:
    case cudaErrorInvalidDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorCallRequiresNewerDriver:
    case cudaErrorDevicesUnavailable:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
    case cudaErrorSystemNotReady:
    case cudaErrorStubLibrary:
      return absl::FailedPreconditionError(absl::StrCat("no usable GPU: ", message));
    default:
      return absl::InternalError(message);
  }
}

#define PSC_NCCL_RETURN_IF_ERROR(call) PSC_RETURN_IF_ERROR(NcclStatus((call), #call))
#define PSC_CUDART_RETURN_IF_ERROR(call) PSC_RETURN_IF_ERROR(CudaStatus((call), #call))

// Polls `comm` until its pending operation (init, a collective, finalize)
// completes: OK, the error it reports, or DEADLINE_EXCEEDED naming `what`
// once `deadline` passes (the caller aborts the communicator).
absl::Status WaitForComm(ncclComm_t comm, absl::Time deadline, base::Clock& clock,
                         const std::string& what) {
  while (true) {
    ncclResult_t state = ncclInProgress;
    PSC_NCCL_RETURN_IF_ERROR(ncclCommGetAsyncError(comm, &state));
    if (state == ncclSuccess) return absl::OkStatus();
    if (state != ncclInProgress) return NcclStatus(state, what.c_str());
    if (clock.Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(what, " did not complete in time"));
    }
    clock.SleepFor(kPollInterval);
  }
}

// Polls `stream` until the work on it is done, watching `comm` for an
// asynchronous error (a peer that died) meanwhile.
absl::Status WaitForStream(cudaStream_t stream, ncclComm_t comm, absl::Time deadline,
                           base::Clock& clock, const std::string& what) {
  while (true) {
    const cudaError_t q = cudaStreamQuery(stream);
    if (q == cudaSuccess) return absl::OkStatus();
    if (q != cudaErrorNotReady) return CudaStatus(q, "cudaStreamQuery");
    ncclResult_t state = ncclSuccess;
    PSC_NCCL_RETURN_IF_ERROR(ncclCommGetAsyncError(comm, &state));
    if (state != ncclSuccess && state != ncclInProgress) return NcclStatus(state, what.c_str());
    if (clock.Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(what, " did not complete in time"));
    }
    clock.SleepFor(kPollInterval);
  }
}

// The bytes of `count` floats, checked before anything is allocated.
absl::StatusOr<size_t> FloatBytes(size_t count) {
  PSC_ASSIGN_OR_RETURN(uint64_t bytes,
                       base::ArrayBytes(count, sizeof(float), std::numeric_limits<size_t>::max(),
                                        "collective element count"));
  return static_cast<size_t>(bytes);
}

// Makes `device` current, consuming an error: for destructors, which can do
// nothing about one.
void SetDeviceQuietly(int device) {
  if (cudaSetDevice(device) != cudaSuccess) cudaGetLastError();
}

// Device memory for floats on one device, kept and grown. Thread-compatible.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(int device) : device_(device) {}
  ~DeviceBuffer() {
    if (data_ == nullptr) return;
    SetDeviceQuietly(device_);
    cudaFree(data_);  // an error here (a dead context at exit) leaves nothing to do
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  float* data() const { return data_; }

  // Makes room for `count` floats (the caller made the device current).
  absl::Status Reserve(size_t count) {
    if (count <= capacity_) return absl::OkStatus();
    PSC_ASSIGN_OR_RETURN(size_t bytes, FloatBytes(count));
    if (data_ != nullptr) {
      float* old = data_;
      data_ = nullptr;
      capacity_ = 0;
      PSC_CUDART_RETURN_IF_ERROR(cudaFree(old));
    }
    void* p = nullptr;
    PSC_CUDART_RETURN_IF_ERROR(cudaMalloc(&p, bytes));
    data_ = static_cast<float*>(p);
    capacity_ = count;
    return absl::OkStatus();
  }

 private:
  const int device_;
  float* data_ = nullptr;
  size_t capacity_ = 0;
};

// A non-blocking stream of its own on one device. Thread-compatible.
class Stream {
 public:
  explicit Stream(int device) : device_(device) {}
  ~Stream() {
    if (stream_ == nullptr) return;
    SetDeviceQuietly(device_);
    cudaStreamDestroy(stream_);
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  // The caller made the device current.
  absl::Status Create() {
    PSC_CUDART_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    return absl::OkStatus();
  }
  cudaStream_t get() const { return stream_; }

 private:
  const int device_;
  cudaStream_t stream_ = nullptr;
};

// An event (no timing) on one device, for ordering the group's stream after
// a caller's. Thread-compatible.
class Event {
 public:
  explicit Event(int device) : device_(device) {}
  ~Event() {
    if (event_ == nullptr) return;
    SetDeviceQuietly(device_);
    cudaEventDestroy(event_);
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  // The caller made the device current.
  absl::Status Create() {
    PSC_CUDART_RETURN_IF_ERROR(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
    return absl::OkStatus();
  }
  cudaEvent_t get() const { return event_; }

 private:
  const int device_;
  cudaEvent_t event_ = nullptr;
};

absl::Status ValidateCount(size_t count) {
  // NCCL counts are size_t; a span of floats always fits, but its bytes must.
  return FloatBytes(count).status();
}

// Thread-compatible (collective.h).
class NcclCollective : public Collective {
 public:
  NcclCollective(int rank, int size, int device, absl::Duration timeout)
      : rank_(rank),
        size_(size),
        device_(device),
        timeout_(timeout),
        version_(NcclVersion()),
        stream_(device),
        buffer_(device) {}

  ~NcclCollective() override {
    SetDeviceQuietly(device_);
    if (comm_ != nullptr) {
      if (broken_.ok() && Finalize().ok()) {
        ncclCommDestroy(comm_);
      } else {
        ncclCommAbort(comm_);
      }
      comm_ = nullptr;
    }
    // buffer_ then stream_, by member order.
  }

  // Everything after the arguments are checked and the id is known.
  absl::Status Join(const ncclUniqueId& id, absl::Time deadline) {
    PSC_CUDART_RETURN_IF_ERROR(cudaSetDevice(device_));
    PSC_RETURN_IF_ERROR(stream_.Create());
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    const ncclResult_t r = ncclCommInitRankConfig(&comm_, size_, id, rank_, &config);
    if (r != ncclSuccess && r != ncclInProgress) {
      // NCCL frees a communicator that failed at once and clears the
      // handle; one it left set is aborted by the destructor.
      return Break(NcclStatus(r, "ncclCommInitRankConfig"));
    }
    absl::Status s = WaitForComm(
        comm_, deadline, clock_,
        absl::StrCat("ncclCommInitRank (rank ", rank_, " of ", size_, " on GPU ", device_, ")"));
    if (!s.ok()) return Break(std::move(s));
    return absl::OkStatus();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  absl::Status AllReduceSum(absl::Span<float> data) override {
    PSC_RETURN_IF_ERROR(Usable());
    PSC_RETURN_IF_ERROR(ValidateCount(data.size()));
    if (data.empty()) return absl::OkStatus();
    return Run(data, /*upload=*/true, /*download=*/true, "ncclAllReduce", [&] {
      return ncclAllReduce(buffer_.data(), buffer_.data(), data.size(), ncclFloat, ncclSum, comm_,
                           stream_.get());
    });
  }

  absl::Status Broadcast(absl::Span<float> data, int root) override {
    PSC_RETURN_IF_ERROR(Usable());
    if (root < 0 || root >= size_) {
      return absl::InvalidArgumentError(
          absl::StrCat("broadcast root ", root, " outside the group [0, ", size_, ")"));
    }
    PSC_RETURN_IF_ERROR(ValidateCount(data.size()));
    if (data.empty()) return absl::OkStatus();
    const bool is_root = root == rank_;
    return Run(data, /*upload=*/is_root, /*download=*/!is_root, "ncclBroadcast", [&] {
      return ncclBroadcast(buffer_.data(), buffer_.data(), data.size(), ncclFloat, root, comm_,
                           stream_.get());
    });
  }

  std::string Describe() const override {
    return absl::StrCat("nccl ", version_, " on GPU ", device_);
  }

 private:
  absl::Status Usable() const {
    if (broken_.ok()) return absl::OkStatus();
    return absl::FailedPreconditionError(
        absl::StrCat("the NCCL group is unusable after an earlier failure (", broken_.ToString(),
                     "); form it again"));
  }

  // Marks the group broken by `s` and returns `s`. A timeout aborts the
  // communicator now, so that the kernels it left running stop.
  absl::Status Break(absl::Status s) {
    broken_ = s;
    if (s.code() == absl::StatusCode::kDeadlineExceeded && comm_ != nullptr) {
      ncclCommAbort(comm_);
      comm_ = nullptr;
    }
    return s;
  }

  // Copies `data` up (if `upload`), runs `collective` on the buffer, waits
  // for it within the timeout, and copies the result down (if `download`).
  // The copy down is issued only after the collective finished, so nothing
  // writes into `data` after a failed call returns.
  template <typename Launch>
  absl::Status Run(absl::Span<float> data, bool upload, bool download, const char* name,
                   Launch collective) {
    const absl::Time deadline = clock_.Now() + timeout_;
    const std::string what = absl::StrCat(name, " of ", data.size(), " floats (rank ", rank_,
                                          " of ", size_, " on GPU ", device_, ")");
    absl::Status s = [&]() -> absl::Status {
      PSC_CUDART_RETURN_IF_ERROR(cudaSetDevice(device_));
      PSC_RETURN_IF_ERROR(buffer_.Reserve(data.size()));
      const size_t bytes = data.size() * sizeof(float);  // checked by ValidateCount
      if (upload) {
        PSC_CUDART_RETURN_IF_ERROR(cudaMemcpyAsync(buffer_.data(), data.data(), bytes,
                                                   cudaMemcpyHostToDevice, stream_.get()));
      }
      const ncclResult_t r = collective();
      if (r != ncclSuccess && r != ncclInProgress) return NcclStatus(r, name);
      // Until the call is enqueued (state ncclSuccess) nothing else may go
      // on the stream.
      if (r == ncclInProgress) PSC_RETURN_IF_ERROR(WaitForComm(comm_, deadline, clock_, what));
      PSC_RETURN_IF_ERROR(WaitForStream(stream_.get(), comm_, deadline, clock_, what));
      if (download) {
        PSC_CUDART_RETURN_IF_ERROR(cudaMemcpyAsync(data.data(), buffer_.data(), bytes,
                                                   cudaMemcpyDeviceToHost, stream_.get()));
        PSC_CUDART_RETURN_IF_ERROR(cudaStreamSynchronize(stream_.get()));
      }
      return absl::OkStatus();
    }();
    // An allocation that failed leaves the group as it was; anything else
    // (the communicator or the stream may hold a half-done operation) breaks it.
    if (!s.ok() && s.code() != absl::StatusCode::kResourceExhausted) return Break(std::move(s));
    return s;
  }

  // ncclCommFinalize, polled within the timeout.
  absl::Status Finalize() {
    const ncclResult_t r = ncclCommFinalize(comm_);
    if (r != ncclSuccess && r != ncclInProgress) return NcclStatus(r, "ncclCommFinalize");
    return WaitForComm(comm_, clock_.Now() + timeout_, clock_, "ncclCommFinalize");
  }

  // Constant after construction.
  const int rank_;
  const int size_;
  const int device_;
  const absl::Duration timeout_;
  const std::string version_;
  base::RealClock clock_;

  // Destroyed in reverse order: the communicator (by the destructor's body)
  // before the buffer it used, the buffer before the stream.
  Stream stream_;
  DeviceBuffer buffer_;
  ncclComm_t comm_ = nullptr;
  absl::Status broken_;  // OK while READY
};

absl::Status ValidateGroupArguments(KeyValueStore* store, int rank, int size, int device,
                                    absl::Duration timeout) {
  if (store == nullptr) return absl::InvalidArgumentError("no rendezvous store");
  if (size < 1) return absl::InvalidArgumentError(absl::StrCat("group size ", size, " < 1"));
  if (rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, " outside the group [0, ", size, ")"));
  }
  if (device < 0) return absl::InvalidArgumentError(absl::StrCat("CUDA device ", device, " < 0"));
  if (timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("timeout ", absl::FormatDuration(timeout), " is not positive"));
  }
  return absl::OkStatus();
}

// Rank 0 makes the id and publishes it; the others wait for it.
absl::StatusOr<ncclUniqueId> RendezvousId(KeyValueStore* store, const std::string& key, int rank,
                                          absl::Duration wait) {
  ncclUniqueId id;
  if (rank == 0) {
    PSC_NCCL_RETURN_IF_ERROR(ncclGetUniqueId(&id));
    PSC_RETURN_IF_ERROR(store->Set(key, std::string(id.internal, sizeof(id.internal))));
    return id;
  }
  PSC_ASSIGN_OR_RETURN(std::string value, store->Get(key, wait));
  if (value.size() != sizeof(id.internal)) {
    return absl::InvalidArgumentError(absl::StrCat("store key \"", key, "\" holds ", value.size(),
                                                   " bytes, not an NCCL unique id (",
                                                   sizeof(id.internal), " bytes)"));
  }
  std::memcpy(id.internal, value.data(), sizeof(id.internal));
  return id;
}

// One device's share of a LocalNcclGroup. Its communicator is destroyed by
// ~Impl, before the buffer and the stream it used.
struct LocalReplica {
  explicit LocalReplica(int d) : device(d), stream(d), buffer(d), queued(d) {}
  const int device;
  Stream stream;
  DeviceBuffer buffer;
  Event queued;  // the caller's queued work, in AllReduceSumOnDevice
};

// INVALID_ARGUMENT unless `p` is device memory of `device` (or managed
// memory), as the runtime knows it; a failed query is consumed.
absl::Status CheckDevicePointer(const float* p, int device, size_t i, size_t t) {
  cudaPointerAttributes a{};
  const cudaError_t e = cudaPointerGetAttributes(&a, p);
  if (e != cudaSuccess) cudaGetLastError();
  const bool ok = e == cudaSuccess &&
                  (a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged) &&
                  a.device == device;
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("buffer ", t, " of device ", i, " is not memory of GPU ", device,
                   e != cudaSuccess ? absl::StrCat(" (", cudaGetErrorName(e), ")")
                   : a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged
                       ? absl::StrCat(" but of GPU ", a.device)
                       : " but host memory"));
}

// LocalNcclGroup (nccl_group.h) over this file's NCCL and CUDA state.
class NcclLocalGroup final : public LocalNcclGroup {
 public:
  struct Impl;  // CUDA and NCCL state, defined where CUDA is

  explicit NcclLocalGroup(std::unique_ptr<Impl> impl);
  ~NcclLocalGroup() override;
  NcclLocalGroup(const NcclLocalGroup&) = delete;
  NcclLocalGroup& operator=(const NcclLocalGroup&) = delete;

  const std::vector<int>& devices() const override;
  absl::Status AllReduceSum(const std::vector<absl::Span<float>>& per_device_host) override;
  absl::Status AllReduceSumOnDevice(const std::vector<std::vector<float*>>& per_device,
                                    const std::vector<size_t>& counts,
                                    const std::vector<void*>& streams) override;
  std::string Describe() const override;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Collective>> CreateNcclCollective(KeyValueStore* store,
                                                                 const std::string& prefix,
                                                                 int rank, int size, int device,
                                                                 absl::Duration timeout) {
  PSC_RETURN_IF_ERROR(ValidateGroupArguments(store, rank, size, device, timeout));
  base::RealClock clock;
  const absl::Time deadline = clock.Now() + timeout;
  PSC_ASSIGN_OR_RETURN(ncclUniqueId id,
                       RendezvousId(store, prefix + kNcclUniqueIdKey, rank, timeout));
  auto group = std::make_unique<NcclCollective>(rank, size, device, timeout);
  PSC_RETURN_IF_ERROR(group->Join(id, deadline));
  return std::unique_ptr<Collective>(std::move(group));
}

// ---- LocalNcclGroup

struct NcclLocalGroup::Impl {
  explicit Impl(const std::vector<int>& d) : devices(d), version(NcclVersion()) {
    for (int device : devices) replicas.push_back(std::make_unique<LocalReplica>(device));
    comms.assign(devices.size(), nullptr);
  }

  ~Impl() {
    for (size_t i = 0; i < comms.size(); ++i) {
      if (comms[i] == nullptr) continue;
      SetDeviceQuietly(devices[i]);
      // Blocking communicators: destroy waits for their work, abort cancels it.
      if (broken.ok()) {
        ncclCommDestroy(comms[i]);
      } else {
        ncclCommAbort(comms[i]);
      }
    }
  }

  // Constant after construction.
  const std::vector<int> devices;
  const std::string version;

  std::vector<std::unique_ptr<LocalReplica>> replicas;  // in the order of `devices`
  std::vector<ncclComm_t> comms;                        // likewise
  absl::Status broken;                                  // OK while usable

  absl::Status Init() {
    for (size_t i = 0; i < devices.size(); ++i) {
      PSC_CUDART_RETURN_IF_ERROR(cudaSetDevice(devices[i]));
      PSC_RETURN_IF_ERROR(replicas[i]->stream.Create());
      PSC_RETURN_IF_ERROR(replicas[i]->queued.Create());
    }
    const ncclResult_t r =
        ncclCommInitAll(comms.data(), static_cast<int>(devices.size()), devices.data());
    if (r != ncclSuccess) {
      // What NCCL left in the handles after a failed start is not
      // documented: forget them (a leak at worst) rather than destroy
      // something NCCL already freed.
      comms.assign(devices.size(), nullptr);
      return NcclStatus(r, "ncclCommInitAll");
    }
    return absl::OkStatus();
  }

  absl::Status AllReduceSum(const std::vector<absl::Span<float>>& spans) {
    const size_t count = spans[0].size();
    const size_t bytes = count * sizeof(float);  // checked by the caller
    for (size_t i = 0; i < devices.size(); ++i) {
      PSC_CUDART_RETURN_IF_ERROR(cudaSetDevice(devices[i]));
      PSC_RETURN_IF_ERROR(replicas[i]->buffer.Reserve(count));
      PSC_CUDART_RETURN_IF_ERROR(cudaMemcpyAsync(replicas[i]->buffer.data(), spans[i].data(), bytes,
                                                 cudaMemcpyHostToDevice,
                                                 replicas[i]->stream.get()));
    }
    PSC_NCCL_RETURN_IF_ERROR(ncclGroupStart());
    absl::Status launched;
    for (size_t i = 0; i < devices.size() && launched.ok(); ++i) {
      launched =
          NcclStatus(ncclAllReduce(replicas[i]->buffer.data(), replicas[i]->buffer.data(), count,
                                   ncclFloat, ncclSum, comms[i], replicas[i]->stream.get()),
                     "ncclAllReduce");
    }
    // The group is closed even when a launch failed, so that NCCL's state is clean.
    const absl::Status ended = NcclStatus(ncclGroupEnd(), "ncclGroupEnd");
    PSC_RETURN_IF_ERROR(launched);
    PSC_RETURN_IF_ERROR(ended);
    for (size_t i = 0; i < devices.size(); ++i) {
      PSC_CUDART_RETURN_IF_ERROR(cudaSetDevice(devices[i]));
      PSC_CUDART_RETURN_IF_ERROR(cudaMemcpyAsync(spans[i].data(), replicas[i]->buffer.data(), bytes,
                                                 cudaMemcpyDeviceToHost,
                                                 replicas[i]->stream.get()));
    }
    for (size_t i = 0; i < devices.size(); ++i) {
      PSC_CUDART_RETURN_IF_ERROR(cudaSetDevice(devices[i]));
      PSC_CUDART_RETURN_IF_ERROR(cudaStreamSynchronize(replicas[i]->stream.get()));
    }
    return absl::OkStatus();
  }

  // The arguments were checked.
  absl::Status AllReduceSumOnDevice(const std::vector<std::vector<float*>>& per_device,
                                    const std::vector<size_t>& counts,
                                    const std::vector<void*>& streams) {
    // Each group stream waits for what its caller's stream has queued.
    for (size_t i = 0; i < devices.size(); ++i) {
      PSC_CUDART_RETURN_IF_ERROR(cudaSetDevice(devices[i]));
      PSC_CUDART_RETURN_IF_ERROR(
          cudaEventRecord(replicas[i]->queued.get(), static_cast<cudaStream_t>(streams[i])));
      PSC_CUDART_RETURN_IF_ERROR(
          cudaStreamWaitEvent(replicas[i]->stream.get(), replicas[i]->queued.get(), 0));
    }
    PSC_NCCL_RETURN_IF_ERROR(ncclGroupStart());
    absl::Status launched;
    // Buffer by buffer, every device's call: each communicator sees the
    // calls in the same order.
    for (size_t t = 0; t < counts.size() && launched.ok(); ++t) {
      if (counts[t] == 0) continue;
      for (size_t i = 0; i < devices.size() && launched.ok(); ++i) {
        launched =
            NcclStatus(ncclAllReduce(per_device[i][t], per_device[i][t], counts[t], ncclFloat,
                                     ncclSum, comms[i], replicas[i]->stream.get()),
                       "ncclAllReduce");
      }
    }
    // The group is closed even when a launch failed, so that NCCL's state is clean.
    const absl::Status ended = NcclStatus(ncclGroupEnd(), "ncclGroupEnd");
    PSC_RETURN_IF_ERROR(launched);
    PSC_RETURN_IF_ERROR(ended);
    for (size_t i = 0; i < devices.size(); ++i) {
      PSC_CUDART_RETURN_IF_ERROR(cudaSetDevice(devices[i]));
      PSC_CUDART_RETURN_IF_ERROR(cudaStreamSynchronize(replicas[i]->stream.get()));
    }
    return absl::OkStatus();
  }
};

NcclLocalGroup::NcclLocalGroup(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
NcclLocalGroup::~NcclLocalGroup() = default;

const std::vector<int>& NcclLocalGroup::devices() const { return impl_->devices; }

absl::Status NcclLocalGroup::AllReduceSum(const std::vector<absl::Span<float>>& per_device_host) {
  if (!impl_->broken.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the local NCCL group is unusable after an earlier failure (",
                     impl_->broken.ToString(), "); form it again"));
  }
  if (per_device_host.size() != impl_->devices.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(per_device_host.size(), " spans for ", impl_->devices.size(), " devices"));
  }
  const size_t count = per_device_host[0].size();
  for (size_t i = 1; i < per_device_host.size(); ++i) {
    if (per_device_host[i].size() != count) {
      return absl::InvalidArgumentError(absl::StrCat(
          "span ", i, " holds ", per_device_host[i].size(), " floats, span 0 holds ", count));
    }
  }
  PSC_RETURN_IF_ERROR(ValidateCount(count));
  if (count == 0) return absl::OkStatus();
  absl::Status s = impl_->AllReduceSum(per_device_host);
  if (!s.ok() && s.code() != absl::StatusCode::kResourceExhausted) impl_->broken = s;
  return s;
}

absl::Status NcclLocalGroup::AllReduceSumOnDevice(
    const std::vector<std::vector<float*>>& per_device, const std::vector<size_t>& counts,
    const std::vector<void*>& streams) {
  if (!impl_->broken.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the local NCCL group is unusable after an earlier failure (",
                     impl_->broken.ToString(), "); form it again"));
  }
  const size_t devices = impl_->devices.size();
  if (per_device.size() != devices || streams.size() != devices) {
    return absl::InvalidArgumentError(absl::StrCat(per_device.size(), " buffer lists and ",
                                                   streams.size(), " streams for ", devices,
                                                   " devices"));
  }
  for (size_t t = 0; t < counts.size(); ++t) PSC_RETURN_IF_ERROR(ValidateCount(counts[t]));
  for (size_t i = 0; i < devices; ++i) {
    if (per_device[i].size() != counts.size()) {
      return absl::InvalidArgumentError(absl::StrCat("device ", i, " has ", per_device[i].size(),
                                                     " buffers for ", counts.size(), " counts"));
    }
    for (size_t t = 0; t < counts.size(); ++t) {
      if (per_device[i][t] == nullptr && counts[t] > 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("buffer ", t, " of device ", i, " is null (", counts[t], " floats)"));
      }
    }
  }
  for (size_t i = 0; i < devices; ++i) {
    for (size_t t = 0; t < counts.size(); ++t) {
      if (counts[t] == 0) continue;
      PSC_RETURN_IF_ERROR(CheckDevicePointer(per_device[i][t], impl_->devices[i], i, t));
    }
  }
  absl::Status s = impl_->AllReduceSumOnDevice(per_device, counts, streams);
  if (!s.ok()) impl_->broken = s;
  return s;
}

std::string NcclLocalGroup::Describe() const {
  return absl::StrCat("nccl ", impl_->version, " on GPUs ", absl::StrJoin(impl_->devices, ","));
}

absl::StatusOr<std::unique_ptr<LocalNcclGroup>> CreateLocalNcclGroup(
    const std::vector<int>& devices) {
  if (devices.empty()) return absl::InvalidArgumentError("no devices for a local NCCL group");
  std::set<int> seen;
  for (int d : devices) {
    if (d < 0) return absl::InvalidArgumentError(absl::StrCat("CUDA device ", d, " < 0"));
    if (!seen.insert(d).second) {
      return absl::InvalidArgumentError(absl::StrCat("CUDA device ", d, " listed twice"));
    }
  }
  int count = 0;
  PSC_CUDART_RETURN_IF_ERROR(cudaGetDeviceCount(&count));
  for (int d : devices) {
    if (d >= count) {
      return absl::FailedPreconditionError(
          absl::StrCat("no usable GPU: no CUDA device ", d, " (", count, " present)"));
    }
  }
  auto impl = std::make_unique<NcclLocalGroup::Impl>(devices);
  PSC_RETURN_IF_ERROR(impl->Init());
  return std::unique_ptr<LocalNcclGroup>(new NcclLocalGroup(std::move(impl)));
}

}  // namespace collective
}  // namespace psc
