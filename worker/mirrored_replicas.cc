#include "worker/mirrored_replicas.h"

#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/logging.h"
#include "common/base/status_context.h"
#include "common/base/status_macros.h"
#include "worker/nccl_replica_reducer.h"

namespace psc {
namespace worker {

absl::Status CombineReplicaGradients(
    const std::vector<const std::vector<std::vector<float>>*>& per_replica,
    const std::vector<int64_t>& counts, const std::vector<std::optional<float>>& moving_averages,
    std::vector<std::vector<float>>* out) {
  int64_t n = 0;
  int ran = 0, only = -1;
  for (size_t r = 0; r < per_replica.size() && r < counts.size(); ++r) {
    if (counts[r] <= 0) continue;
    n += counts[r];
    ++ran;
    only = static_cast<int>(r);
  }
  if (ran == 0) return absl::FailedPreconditionError("CopyGradients before ComputeGradients");
  if (ran == 1) {
    *out = *per_replica[only];
    return absl::OkStatus();
  }
  auto moving = [&moving_averages](size_t v) {
    return v < moving_averages.size() && moving_averages[v].has_value();
  };
  bool first = true;
  for (size_t r = 0; r < per_replica.size() && r < counts.size(); ++r) {
    if (counts[r] <= 0) continue;
    const auto& g = *per_replica[r];
    const float weight =
        static_cast<float>(static_cast<double>(counts[r]) / static_cast<double>(n));
    if (first) {
      *out = g;
      for (size_t v = 0; v < g.size(); ++v) {
        if (!moving(v)) continue;
        for (float& x : (*out)[v]) x *= weight;
      }
      first = false;
      continue;
    }
    for (size_t v = 0; v < g.size(); ++v) {
      float* o = (*out)[v].data();
      const float* in = g[v].data();
      if (moving(v)) {
        for (size_t i = 0; i < g[v].size(); ++i) o[i] += weight * in[i];
      } else {
        for (size_t i = 0; i < g[v].size(); ++i) o[i] += in[i];
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<MirroredReplicas>> MirroredReplicas::Create(
    const compute::Model* model, std::vector<ReplicaBackend> replicas, gpu::GpuApi* gpu) {
  if (replicas.empty()) return absl::InvalidArgumentError("MirroredReplicas: no replicas");
  std::unique_ptr<MirroredReplicas> m(new MirroredReplicas());
  m->model_ = model;
  m->gpu_ = gpu;
  m->replicas_ = std::move(replicas);
  for (ReplicaBackend& r : m->replicas_) {
    auto e = compute::Executor::Create(model, r.backend.get());
    if (!e.ok()) {
      return base::Prefix(e.status(), r.device.name);
    }
    m->executors_.push_back(*std::move(e));
  }
  m->host_grads_.resize(m->replicas_.size());
  m->counts_.assign(m->replicas_.size(), 0);
  m->ChooseReduction();
  return m;
}

MirroredReplicas::~MirroredReplicas() = default;

void MirroredReplicas::ChooseReduction() {
  if (size() < 2) return;
  std::vector<compute::ComputeBackend*> backends;
  std::vector<compute::Executor*> executors;
  bool any_gpu = false;
  for (int r = 0; r < size(); ++r) {
    backends.push_back(replicas_[r].backend.get());
    executors.push_back(executors_[r].get());
    any_gpu = any_gpu || replicas_[r].device.kind == LogicalDevice::kGpu;
  }
  absl::StatusOr<std::unique_ptr<NcclReplicaReducer>> reducer =
      gpu_ == nullptr ? absl::FailedPreconditionError("the GPU plugin is not loaded")
                      : NcclReplicaReducer::Create(gpu_, model_, backends, executors);
  if (reducer.ok()) {
    device_reducer_ = *std::move(reducer);
    base::Logf("mirrored: %d replicas reduce their gradients %s", size(), DescribeReduction());
  } else if (any_gpu) {
    base::Logf("mirrored: %d replicas reduce their gradients on the host: %s", size(),
               reducer.status().ToString());
  }
}

std::string MirroredReplicas::DescribeReduction() const {
  if (size() == 1) return "none (one replica)";
  if (device_reducer_ != nullptr) {
    return absl::StrCat("on the GPUs (", device_reducer_->Describe(), ")");
  }
  return "on the host";
}

absl::Status MirroredReplicas::CopyOutputs(std::vector<float>* outputs) {
  if (size() == 1) return executors_[0]->CopyOutputs(outputs);
  outputs->clear();
  std::vector<float> share;
  for (int r = 0; r < size(); ++r) {
    if (counts_[r] == 0) continue;  // ran nothing in the last step
    PSC_RETURN_IF_ERROR(executors_[r]->CopyOutputs(&share));
    outputs->insert(outputs->end(), share.begin(), share.end());
  }
  return absl::OkStatus();
}

absl::Status MirroredReplicas::SetParameters(const std::vector<std::vector<float>>& params) {
  for (auto& e : executors_) {
    PSC_RETURN_IF_ERROR(e->SetParameters(params));
  }
  return absl::OkStatus();
}

absl::Status MirroredReplicas::ComputeGradients(absl::Span<const float> images,
                                                absl::Span<const int32_t> labels,
                                                const compute::LossOptions& loss,
                                                compute::StepResult* result) {
  const int r_count = size();
  if (r_count == 1) {
    executors_[0]->SetDropoutKey(dropout_seed_, dropout_step_, dropout_first_);
    return executors_[0]->ComputeGradients(images, labels, loss, result);
  }
  const int64_t n = static_cast<int64_t>(labels.size());
  if (n < 1) return absl::InvalidArgumentError("empty batch");
  if (!loss.weights.empty() && loss.weights.size() != labels.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(loss.weights.size(), " example weights for ", n, " labels"));
  }
  if (static_cast<int64_t>(images.size()) % n != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(images.size(), " pixels do not split into ", n, " images"));
  }
  const int64_t pixels = static_cast<int64_t>(images.size()) / n;
  if (loss.targets.size() % static_cast<size_t>(n) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(loss.targets.size(), " targets do not split into ", n, " examples"));
  }
  const int64_t target_width = static_cast<int64_t>(loss.targets.size()) / n;
  std::vector<compute::StepResult> results(r_count);
  std::vector<absl::Status> statuses(r_count);
  auto run = [&](int r, int64_t first, int64_t count) {
    if (count == 0) return;
    compute::Executor* e = executors_[r].get();
    e->SetDropoutKey(dropout_seed_, dropout_step_, dropout_first_ + first);
    compute::LossOptions share = loss;
    if (!loss.weights.empty()) share.weights = loss.weights.subspan(first, count);
    if (!loss.targets.empty()) {
      share.targets = loss.targets.subspan(first * target_width, count * target_width);
    }
    statuses[r] = e->ComputeGradients(images.subspan(first * pixels, count * pixels),
                                      labels.subspan(first, count), share, &results[r]);
    // The host reduction takes each replica's gradients as soon as it is
    // done; the one on the GPUs leaves them there.
    if (statuses[r].ok() && device_reducer_ == nullptr) {
      statuses[r] = e->CopyGradients(&host_grads_[r]);
    }
  };
  reduced_ = false;
  std::vector<std::thread> threads;
  int64_t first = 0, first0 = 0, count0 = 0;
  for (int r = 0; r < r_count; ++r) {
    const int64_t count = n / r_count + (r < n % r_count ? 1 : 0);
    counts_[r] = count;
    if (r == 0) {
      first0 = first;
      count0 = count;
    } else {
      threads.emplace_back(run, r, first, count);
    }
    first += count;
  }
  run(0, first0, count0);
  for (std::thread& t : threads) t.join();
  *result = compute::StepResult();
  for (int r = 0; r < r_count; ++r) {
    if (!statuses[r].ok()) {
      return base::Prefix(statuses[r],
                          absl::StrCat("replica ", r, " (", replicas_[r].device.name, ")"));
    }
    result->loss_sum += results[r].loss_sum;
    result->correct += results[r].correct;
    result->examples += results[r].examples;
  }
  return absl::OkStatus();
}

absl::Status MirroredReplicas::Prepare(int64_t batch) {
  const int r_count = size();
  for (int r = 0; r < r_count; ++r) {
    const int64_t count = batch / r_count + (r < batch % r_count ? 1 : 0);
    if (absl::Status s = executors_[r]->Prepare({count}, /*training=*/true); !s.ok()) {
      return base::Prefix(s, absl::StrCat("replica ", r, " (", replicas_[r].device.name, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status MirroredReplicas::CopyGradients(std::vector<std::vector<float>>* grads) {
  if (size() == 1) return executors_[0]->CopyGradients(grads);
  if (device_reducer_ != nullptr) {
    bool ran = false;
    for (int64_t c : counts_) ran = ran || c > 0;
    if (!ran) return absl::FailedPreconditionError("CopyGradients before ComputeGradients");
    if (reduced_) return executors_[0]->CopyGradients(grads);
    absl::Status s = device_reducer_->Reduce(counts_, grads);
    if (s.ok()) {
      reduced_ = true;
      return s;
    }
    // This step's gradients are lost with the group; the next steps copy
    // them to the host.
    base::Logf(
        "mirrored: the reduction on the GPUs failed (%s); reducing on the host from the "
        "next step",
        s.ToString());
    device_reducer_.reset();
    counts_.assign(counts_.size(), 0);  // nothing on the host to combine until then
    return s;
  }
  std::vector<const std::vector<std::vector<float>>*> per_replica;
  for (const auto& g : host_grads_) per_replica.push_back(&g);
  return CombineReplicaGradients(per_replica, counts_, model_->moving_averages(), grads);
}

}  // namespace worker
}  // namespace psc
