#include "worker/nccl_replica_reducer.h"

#include <map>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace psc {
namespace worker {

absl::StatusOr<std::unique_ptr<NcclReplicaReducer>> NcclReplicaReducer::Create(
    gpu::GpuApi* gpu, const compute::Model* model,
    const std::vector<compute::ComputeBackend*>& backends,
    const std::vector<compute::Executor*>& executors) {
  if (executors.empty()) return absl::InvalidArgumentError("NcclReplicaReducer: no replicas");
  if (backends.size() != executors.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "NcclReplicaReducer: ", backends.size(), " backends for ", executors.size(), " replicas"));
  }
  std::unique_ptr<NcclReplicaReducer> r(new NcclReplicaReducer());
  r->gpu_ = gpu;
  r->primary_ = executors[0];
  const std::vector<std::optional<float>>& moving = model->moving_averages();
  const size_t variables = model->variables().size();
  std::vector<int> devices;
  std::map<int, size_t> replica_of_device;
  for (size_t i = 0; i < executors.size(); ++i) {
    absl::StatusOr<compute::CudaQueue> queue = gpu->Queue(backends[i]);
    if (!queue.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("replica ", i, " (", backends[i]->name(), ") is not on a GPU"));
    }
    auto [it, inserted] = replica_of_device.emplace(queue->device, i);
    if (!inserted) {
      return absl::FailedPreconditionError(absl::StrCat("replicas ", it->second, " and ", i,
                                                        " share GPU ", queue->device,
                                                        " (NCCL takes one rank per GPU)"));
    }
    devices.push_back(queue->device);
    Replica rep;
    rep.backend = backends[i];
    rep.stream = queue->stream;
    for (size_t v = 0; v < variables; ++v) {
      compute::DeviceTensor* g = executors[i]->GradientTensor(static_cast<int>(v));
      if (g == nullptr) {
        return absl::InternalError(absl::StrCat("replica ", i, " has no gradient ", v));
      }
      PSC_ASSIGN_OR_RETURN(float* data, gpu->TensorData(g));
      rep.gradients.push_back(g);
      rep.data.push_back(data);
      if (v < moving.size() && moving[v].has_value()) rep.statistics.push_back(g);
      if (i == 0) r->sizes_.push_back(static_cast<size_t>(g->size()));
    }
    r->replicas_.push_back(std::move(rep));
  }
  PSC_ASSIGN_OR_RETURN(r->group_, gpu->CreateLocalNcclGroup(devices));
  return r;
}

NcclReplicaReducer::~NcclReplicaReducer() = default;

std::string NcclReplicaReducer::Describe() const { return group_->Describe(); }

absl::Status NcclReplicaReducer::Reduce(const std::vector<int64_t>& counts,
                                        std::vector<std::vector<float>>* out) {
  if (counts.size() != replicas_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(counts.size(), " counts for ", replicas_.size(), " replicas"));
  }
  int64_t n = 0;
  for (int64_t c : counts) n += c > 0 ? c : 0;
  if (n == 0) return absl::FailedPreconditionError("CopyGradients before ComputeGradients");
  std::vector<std::vector<float*>> data;
  std::vector<void*> streams;
  for (size_t r = 0; r < replicas_.size(); ++r) {
    Replica& rep = replicas_[r];
    if (counts[r] <= 0) {
      PSC_RETURN_IF_ERROR(gpu_->ScaleOnDevice(rep.backend, rep.gradients, 0.0f));
    } else {
      // CombineReplicaGradients's weight, rounded the same way.
      const float weight =
          static_cast<float>(static_cast<double>(counts[r]) / static_cast<double>(n));
      PSC_RETURN_IF_ERROR(gpu_->ScaleOnDevice(rep.backend, rep.statistics, weight));
    }
    data.push_back(rep.data);
    streams.push_back(rep.stream);
  }
  PSC_RETURN_IF_ERROR(group_->AllReduceSumOnDevice(data, sizes_, streams));
  return primary_->CopyGradients(out);
}

}  // namespace worker
}  // namespace psc
