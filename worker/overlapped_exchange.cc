#include "worker/overlapped_exchange.h"

#include "absl/strings/str_cat.h"
#include "common/base/logging.h"
#include "common/base/status_macros.h"
#include "common/collective/bucketed_reducer.h"
#include "common/job/step_batch.h"
#include "common/tensor/wire_dtype.h"

namespace psc {
namespace worker {

OverlappedExchange::OverlappedExchange(ExchangeContext context)
    : StepExchange(std::move(context)),
      wire_(tensor::WireDtypeOrFloat32(ctx_.job->policy().wire_dtype())),
      headers_(ctx_.client->num_shards()) {}

absl::StatusOr<std::unique_ptr<OverlappedExchange>> OverlappedExchange::Create(
    ExchangeContext context) {
  if (context.replicas->size() != 1) {
    return absl::FailedPreconditionError(
        absl::StrCat("pushes in parts need one local replica (the hooks are one executor's); "
                     "this worker has ",
                     context.replicas->size()));
  }
  std::unique_ptr<OverlappedExchange> x(new OverlappedExchange(std::move(context)));
  const ExchangeContext& ctx = x->ctx_;
  const int64_t bucket = ctx.job->push().bucket_bytes() > 0
                             ? ctx.job->push().bucket_bytes()
                             : collective::BucketedReducer::kDefaultBucketBytes;
  PSC_ASSIGN_OR_RETURN(x->overlapped_,
                       OverlappedPush::Create(ctx.sharded, ctx.ready_order, bucket, ctx.client,
                                              WorkerParameters::kStepTimeout, ctx.clock));
  x->overlapped_->set_compressor(ctx.topk);
  ctx.params->SizeGradients();
  OverlappedExchange* self = x.get();
  // The step's parameters, pulled in parts after the last step's push, are
  // set layer by layer as the forward pass reaches them.
  ctx.replicas->primary()->SetParametersNeededHook([self](int layer) -> absl::Status {
    if (!self->pull_step_) return absl::OkStatus();
    const ExchangeContext& c = self->ctx_;
    for (int v : compute::LayerVariableIndices(c.model->layer_variables()[layer])) {
      PSC_RETURN_IF_ERROR(self->overlapped_->TakeVariable(v, &c.params->values()));
      PSC_RETURN_IF_ERROR(c.replicas->primary()->SetParameter(v, c.params->values()[v]));
    }
    return absl::OkStatus();
  });
  ctx.replicas->primary()->SetGradientReadyHook([self](int layer) -> absl::Status {
    if (!self->overlap_step_) return absl::OkStatus();
    const ExchangeContext& c = self->ctx_;
    for (int v : compute::LayerVariableIndices(c.model->layer_variables()[layer])) {
      PSC_RETURN_IF_ERROR(
          c.replicas->primary()->CopyGradient(v, absl::MakeSpan(c.params->grads()[v])));
      PSC_RETURN_IF_ERROR(self->overlapped_->Ready(v));
    }
    return absl::OkStatus();
  });
  std::string parts;
  for (int s = 0; s < ctx.client->num_shards(); ++s) {
    absl::StrAppend(&parts, s == 0 ? "" : ", ", x->overlapped_->num_parts(s));
  }
  base::Logf(
      "worker %d: pushes in parts as the backward pass makes them, pulls in parts as the "
      "forward pass needs them (%d buckets of %d bytes; parts per shard: %s)",
      ctx.worker_index, x->overlapped_->num_buckets(), bucket, parts);
  return x;
}

absl::StatusOr<ExchangeResult> OverlappedExchange::Step(const ExchangeStep& step,
                                                        ExchangeTimes* times) {
  const absl::Time t0 = ctx_.clock->Now();
  // With pulls in parts the forward pass sets the parameters as they come.
  const bool pulling = overlapped_->pulls_pending();
  if (!pulling) PSC_RETURN_IF_ERROR(ctx_.replicas->SetParameters(params().values()));
  // Parts go out from the backward pass's hook; a straggler's idle comes
  // before any (its gradients must not arrive early).
  for (int shard = 0; shard < ctx_.client->num_shards(); ++shard) {
    params().PushHeader(*step.unit, step.step, step.identity, wire_, shard, &headers_[shard]);
  }
  overlapped_->Begin(headers_, wire_, &params().grads());
  overlap_step_ = step.straggler_factor <= 1.0;
  pull_step_ = pulling;
  ExchangeResult out;
  absl::Status computed = step.compute(params().loss_scale(), &out.result);
  overlap_step_ = false;
  pull_step_ = false;
  if (computed.ok() && step.straggler_factor > 1.0) {
    const absl::Time idle_start = ctx_.clock->Now();
    computed = ctx_.replicas->CopyGradients(&params().grads());
    if (computed.ok()) {
      computed =
          IdleFor(ctx_.clock, (idle_start - t0) * (step.straggler_factor - 1.0), *step.cancelled);
    }
    times->idle += ctx_.clock->Now() - idle_start;
    for (int v : ctx_.ready_order) {
      if (computed.ok()) computed = overlapped_->Ready(v);
    }
  }
  // Waits for the parts sent even when the pass failed.
  absl::Status pushed = overlapped_->Finish(&replies_);
  PSC_RETURN_IF_ERROR(computed);
  // The parts went out as the pass made them: the servers refused a
  // non-finite one (and fail the sync step's waiting pulls).
  PSC_RETURN_IF_ERROR(params().CheckFinite(out.result.loss_sum, step.identity, step.step, pushed));
  PSC_RETURN_IF_ERROR(pushed);
  for (int shard = 0; shard < ctx_.client->num_shards(); ++shard) {
    params().set_version(shard, overlapped_->pulled_version(shard));
  }
  // The unit's last step takes the whole next version now (the next unit
  // may start from it); other steps' forward passes take it.
  const int64_t next =
      NextStep(step.step, params().version(0), step.end, job::HasBackupWorkers(*ctx_.job));
  if (next >= step.end) PSC_RETURN_IF_ERROR(overlapped_->TakeAll(&params().values()));
  absl::Duration comm, exposed;
  overlapped_->TakeTimes(&comm, &exposed);
  times->comm += comm;
  times->exposed += exposed;
  // The pass and the apply, the waits for the last answers included.
  times->compute += ctx_.clock->Now() - t0;
  out.version = params().version(0);
  out.dropped = replies_[0].outcome() == proto::PushResponse::DROPPED_STALE;
  return out;
}

void OverlappedExchange::FailUnit() {
  if (overlapped_->pulls_pending()) overlapped_->Abandon();
  StepExchange::FailUnit();
}

}  // namespace worker
}  // namespace psc
