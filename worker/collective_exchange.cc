#include "worker/collective_exchange.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/base/logging.h"
#include "common/base/status_macros.h"
#include "common/collective/gloo_collective.h"
#include "common/collective/store_wait.h"
#include "common/io/crc32c.h"

namespace psc {
namespace worker {

absl::StatusOr<std::unique_ptr<CollectiveExchange>> CollectiveExchange::Create(
    ExchangeContext context, const CollectiveSetup* setup) {
  if (setup == nullptr || setup->store == nullptr) {
    return absl::FailedPreconditionError(
        "--strategy=multi_worker_mirrored: this worker has no coordinator to form its "
        "group through (its cluster has ps tasks, or no chief and it is not a collective "
        "cluster)");
  }
  std::unique_ptr<CollectiveExchange> x(new CollectiveExchange(std::move(context)));
  x->setup_ = *setup;
  const ExchangeContext& ctx = x->ctx_;
  // A frozen variable's gradient is not reduced (its slot is empty).
  const std::vector<bool> frozen = ctx.model->frozen_variables();
  std::vector<int64_t> sizes;
  for (size_t v = 0; v < frozen.size(); ++v) {
    sizes.push_back(frozen[v] ? 0 : tensor::NumElements(ctx.model->variables()[v].shape));
  }
  const int64_t bucket = ctx.job->collective().bucket_bytes() > 0
                             ? ctx.job->collective().bucket_bytes()
                             : collective::BucketedReducer::kDefaultBucketBytes;
  PSC_ASSIGN_OR_RETURN(
      x->reducer_, collective::BucketedReducer::Create(sizes, ctx.ready_order, bucket, ctx.clock));
  // With one local replica the executor hands each layer's gradients over
  // as the backward pass makes them; with several, they are combined on
  // the host first and reduced after the pass.
  if (ctx.job->collective().overlap() && ctx.replicas->size() == 1) {
    x->hooked_ = true;
    CollectiveExchange* self = x.get();
    ctx.replicas->primary()->SetGradientReadyHook([self](int layer) -> absl::Status {
      const ExchangeContext& c = self->ctx_;
      for (int v : compute::LayerVariableIndices(c.model->layer_variables()[layer])) {
        if (!c.sharded->frozen(v)) {
          PSC_RETURN_IF_ERROR(c.replicas->primary()->CopyGradient(v, self->reducer_->Slot(v)));
        }
        PSC_RETURN_IF_ERROR(self->SlotFilled(v));
      }
      return absl::OkStatus();
    });
  }
  return x;
}

absl::Duration CollectiveExchange::Timeout(const proto::JobSpec& job) {
  const double seconds = job.collective().timeout_seconds();
  return seconds > 0 ? absl::Seconds(seconds) : absl::Seconds(60);
}

absl::Status CollectiveExchange::BeginUnit(const proto::RunUnitRequest& unit,
                                           const std::function<bool()>& cancelled, ExchangeTimes*) {
  PSC_RETURN_IF_ERROR(JoinGroup(unit, cancelled));
  // The replica is local and may have been replaced by a peer's state
  // since the last unit: always pulled (a copy), and not comm.
  params().Reuse(unit.first_step());
  PSC_RETURN_IF_ERROR(params().Pull(unit.first_step()));
  if (params().version(0) != unit.first_step()) {
    return absl::FailedPreconditionError(absl::StrCat("this worker's replica holds step ",
                                                      params().version(0), "; the unit starts at ",
                                                      unit.first_step()));
  }
  return absl::OkStatus();
}

void CollectiveExchange::FailUnit() {
  WholePushExchange::FailUnit();
  // Leave the group: the peers' all-reduces with this worker fail now, not
  // at their timeout, and the chief forms the next one.
  group_.reset();
  group_prefix_.clear();
}

absl::Status CollectiveExchange::Gradients(const ExchangeStep& step, compute::StepResult* result,
                                           ExchangeTimes* times) {
  PSC_RETURN_IF_ERROR(reducer_->Begin(group_.get()));
  absl::Status computed = step.compute(params().loss_scale(), result);
  collective::ReduceTiming timing;
  // A failed pass still waits for the buckets it started (Finish).
  absl::Status reduced =
      computed.ok() ? ReduceStep(&timing) : reducer_->Finish(&params().grads(), &timing);
  PSC_RETURN_IF_ERROR(computed);
  PSC_RETURN_IF_ERROR(reduced);
  // Every member holds the same sum: each stops with the same report.
  PSC_RETURN_IF_ERROR(
      params().CheckFinite(result->loss_sum, step.identity, step.step, absl::OkStatus()));
  times->comm += timing.comm;
  times->exposed += timing.exposed;
  return absl::OkStatus();
}

absl::Status CollectiveExchange::CheckPeersRunThisJob(const proto::RunUnitRequest& unit,
                                                      absl::Duration timeout,
                                                      const std::function<bool()>& cancelled) {
  // What every member must agree on: the job (model, data, optimizer,
  // strategy: its serialized spec), the group's size and the unit.
  const std::string spec = ctx_.job->SerializeAsString();
  const std::string mine = absl::StrCat("job ", absl::Hex(io::Crc32c(spec.data(), spec.size())),
                                        ", group of ", unit.num_slots(), ", unit ", unit.unit(),
                                        " steps ", unit.first_step(), "+", unit.num_steps());
  const std::string& prefix = unit.group().prefix();
  PSC_RETURN_IF_ERROR(
      setup_.store->Set(absl::StrCat(prefix, "member/", unit.replica_slot()), mine));
  // One deadline for every peer, not one each.
  const absl::Time deadline = ctx_.clock->Now() + timeout;
  for (int rank = 0; rank < unit.num_slots(); ++rank) {
    if (rank == unit.replica_slot()) continue;
    timeout = std::max(deadline - ctx_.clock->Now(), absl::ZeroDuration());
    PSC_ASSIGN_OR_RETURN(const std::string theirs,
                         collective::WaitForKey(setup_.store, absl::StrCat(prefix, "member/", rank),
                                                collective::AbortKey(prefix), timeout, cancelled));
    if (theirs != mine) {
      return absl::FailedPreconditionError(
          absl::StrCat("collective group ", prefix, ": rank ", rank, " runs ", theirs,
                       "; this worker (rank ", unit.replica_slot(), ") runs ", mine));
    }
  }
  return absl::OkStatus();
}

absl::Status CollectiveExchange::JoinGroup(const proto::RunUnitRequest& unit,
                                           const std::function<bool()>& cancelled) {
  if (unit.group().prefix().empty()) {
    return absl::InvalidArgumentError("a multi_worker_mirrored unit without its group");
  }
  if (group_ != nullptr && group_prefix_ == unit.group().prefix() &&
      group_->rank() == unit.replica_slot() && group_->size() == unit.num_slots()) {
    return absl::OkStatus();
  }
  group_.reset();
  group_prefix_.clear();
  const absl::Duration timeout = Timeout(*ctx_.job);
  PSC_RETURN_IF_ERROR(CheckPeersRunThisJob(unit, timeout, cancelled));
  absl::StatusOr<std::unique_ptr<collective::Collective>> group;
  MirroredReplicas* replicas = ctx_.replicas;
  if (replicas->device(0).kind == LogicalDevice::kGpu && replicas->gpu() != nullptr) {
    group = replicas->gpu()->CreateNcclCollective(setup_.store, unit.group().prefix(),
                                                  unit.replica_slot(), unit.num_slots(),
                                                  replicas->device(0).gpu, timeout);
  } else {
    collective::GlooOptions options;
    options.hostname = setup_.hostname;
    options.timeout = timeout;
    options.abort_key = collective::AbortKey(unit.group().prefix());
    options.cancelled = cancelled;
    group = collective::CreateGlooCollective(setup_.store, unit.group().prefix(),
                                             unit.replica_slot(), unit.num_slots(), options);
  }
  if (!group.ok()) return group.status();
  group_ = *std::move(group);
  group_prefix_ = unit.group().prefix();
  base::Logf("worker %d: in collective group %s (%s)", ctx_.worker_index, group_prefix_,
             group_->Describe());
  return absl::OkStatus();
}

absl::Status CollectiveExchange::SlotFilled(int v) {
  const std::optional<float>& average = ctx_.model->moving_averages()[v];
  if (average.has_value() && group_->size() > 1) {
    // The group's mean statistic is the sum of each member's 1/size share.
    const float share = 1.0f / static_cast<float>(group_->size());
    for (float& x : reducer_->Slot(v)) x *= share;
  }
  return reducer_->MarkReady(v);
}

absl::Status CollectiveExchange::ReduceStep(collective::ReduceTiming* timing) {
  std::vector<std::vector<float>>& grads = params().grads();
  absl::Status filled;
  if (!hooked_) {
    filled = [&]() -> absl::Status {
      PSC_RETURN_IF_ERROR(ctx_.replicas->CopyGradients(&grads));
      for (int v : ctx_.ready_order) {
        absl::Span<float> slot = reducer_->Slot(v);
        if (ctx_.sharded->frozen(v)) {  // not reduced
          PSC_RETURN_IF_ERROR(SlotFilled(v));
          continue;
        }
        if (grads[v].size() != slot.size()) {
          return absl::InternalError(absl::StrCat("gradient ", v, " has ", grads[v].size(),
                                                  " elements; its variable ", slot.size()));
        }
        std::copy(grads[v].begin(), grads[v].end(), slot.begin());
        PSC_RETURN_IF_ERROR(SlotFilled(v));
      }
      return absl::OkStatus();
    }();
  }
  // Always closes the step: the buckets already handed over are waited for
  // before the group may be left.
  absl::Status finished = reducer_->Finish(&grads, timing);
  return filled.ok() ? finished : filled;
}

}  // namespace worker
}  // namespace psc
