#include "worker/whole_push_exchange.h"

#include "common/base/status_macros.h"
#include "common/tensor/wire_dtype.h"

namespace psc {
namespace worker {

WholePushExchange::WholePushExchange(ExchangeContext context)
    : StepExchange(std::move(context)),
      wire_(tensor::WireDtypeOrFloat32(ctx_.job->policy().wire_dtype())),
      pushes_(ctx_.client->num_shards()) {}

absl::Status WholePushExchange::Gradients(const ExchangeStep& step, compute::StepResult* result,
                                          ExchangeTimes*) {
  PSC_RETURN_IF_ERROR(step.compute(params().loss_scale(), result));
  return ctx_.replicas->CopyGradients(&params().grads());
}

absl::Status WholePushExchange::Encode(std::vector<std::vector<proto::NamedTensor>>* split) {
  const std::vector<std::vector<float>>& grads = params().grads();
  const proto::DataType dense_wire = ctx_.topk == nullptr ? wire_ : proto::DT_FLOAT32;
  if (ctx_.tables == nullptr) {
    PSC_RETURN_IF_ERROR(ctx_.sharded->Split(grads, dense_wire, split));
  } else {
    PSC_RETURN_IF_ERROR(
        ctx_.sharded->SplitVariables(grads, ctx_.tables->dense_variables(), dense_wire, split));
  }
  if (ctx_.topk != nullptr) {
    for (std::vector<proto::NamedTensor>& shard : *split) {
      PSC_RETURN_IF_ERROR(ctx_.topk->Encode(wire_, &shard));
    }
  }
  if (ctx_.tables != nullptr)
    PSC_RETURN_IF_ERROR(ctx_.tables->EncodeGradients(grads, wire_, split));
  return absl::OkStatus();
}

absl::Status WholePushExchange::PullRows(const ExchangeStep& step, ExchangeTimes* times) {
  const absl::Time t0 = ctx_.clock->Now();
  PSC_RETURN_IF_ERROR(ctx_.tables->Remap(step.inputs, step.examples, step.per_example));
  std::vector<proto::PullRequest> requests(ctx_.client->num_shards());
  for (proto::PullRequest& r : requests) {
    // The step's version in sync (this worker has not pushed it yet, so the
    // servers hold exactly that one), what is newest otherwise.
    if (ctx_.job->policy().mode() == proto::MODE_SYNC) r.set_min_version(step.step);
    r.set_worker(ctx_.worker_index);
    r.set_worker_clock(step.step);
    r.set_wire_dtype(ctx_.job->policy().wire_dtype());
  }
  ctx_.tables->AddRowPulls(&requests);
  PSC_RETURN_IF_ERROR(ctx_.client->PullAll(requests, &rows_, WorkerParameters::kStepTimeout));
  PSC_RETURN_IF_ERROR(ctx_.tables->TakeRows(rows_, &params().values()));
  times->comm += ctx_.clock->Now() - t0;
  return absl::OkStatus();
}

absl::StatusOr<ExchangeResult> WholePushExchange::Step(const ExchangeStep& step,
                                                       ExchangeTimes* times) {
  if (ctx_.tables != nullptr) PSC_RETURN_IF_ERROR(PullRows(step, times));
  const absl::Time t0 = ctx_.clock->Now();
  PSC_RETURN_IF_ERROR(ctx_.replicas->SetParameters(params().values()));
  ExchangeResult out;
  PSC_RETURN_IF_ERROR(Gradients(step, &out.result, times));
  // Loss scaling: unscaled before anything reads them (Keras clips the
  // unscaled gradients); an overflow goes as zeros, flagged.
  PSC_ASSIGN_OR_RETURN(const bool overflow,
                       params().UnscaleGradients(ctx_.trainable, step.identity, step.step));
  Clip();
  PSC_RETURN_IF_ERROR(Encode(&split_));
  if (step.straggler_factor > 1.0) {
    // An experiment's slow worker: as if its compute took factor times as long.
    const absl::Time idle_start = ctx_.clock->Now();
    PSC_RETURN_IF_ERROR(
        IdleFor(ctx_.clock, (idle_start - t0) * (step.straggler_factor - 1.0), *step.cancelled));
    times->idle += ctx_.clock->Now() - idle_start;
  }
  const absl::Time t1 = ctx_.clock->Now();
  for (int shard = 0; shard < ctx_.client->num_shards(); ++shard) {
    proto::PushRequest& p = pushes_[shard];
    params().PushHeader(*step.unit, step.step, step.identity, wire_, shard, &p);
    for (auto& t : split_[shard]) *p.add_gradients() = std::move(t);
    p.set_gradients_overflow(overflow);
    if (ctx_.job->policy().has_loss_scale()) p.set_loss_scale(params().loss_scale());
  }
  // A non-finite loss with finite gradients is refused by the worker itself,
  // in the push, to the same effect as the servers' refusal of a gradient.
  const std::string report = params().RefusalReport(out.result.loss_sum);
  if (!report.empty()) {
    for (proto::PushRequest& p : pushes_) p.set_step_refused(report);
  }
  const absl::Status pushed =
      ctx_.client->PushAll(pushes_, &replies_, WorkerParameters::kStepTimeout);
  PSC_RETURN_IF_ERROR(params().CheckFinite(out.result.loss_sum, step.identity, step.step, pushed));
  PSC_RETURN_IF_ERROR(pushed);
  PSC_RETURN_IF_ERROR(params().TakeReplies(replies_));
  if (push_is_local()) {
    times->compute += ctx_.clock->Now() - t0;
  } else {
    times->compute += t1 - t0;
    times->comm += ctx_.clock->Now() - t1;
  }
  out.version = params().version(0);
  out.dropped = replies_[0].outcome() == proto::PushResponse::DROPPED_STALE;
  return out;
}

}  // namespace worker
}  // namespace psc
