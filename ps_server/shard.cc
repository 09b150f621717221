#include "ps_server/shard.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "common/base/checked_size.h"
#include "common/base/status_macros.h"
#include "common/tensor/topk.h"
#include "common/tensor/wire_dtype.h"
#include "google/protobuf/util/message_differencer.h"

namespace psc {
namespace ps_server {
namespace {

// The live set of `request` over `num_workers` workers (every worker when it
// names none), or INVALID_ARGUMENT for one out of range.
absl::StatusOr<std::vector<bool>> LiveWorkers(
    const google::protobuf::RepeatedField<int32_t>& workers, int num_workers) {
  std::vector<bool> live(num_workers, workers.empty());
  for (int32_t w : workers) {
    if (w < 0 || w >= num_workers) {
      return absl::InvalidArgumentError(
          absl::StrCat("live worker ", w, " out of range [0, ", num_workers, ")"));
    }
    live[w] = true;
  }
  return live;
}

}  // namespace

Shard::Shard(ShardOptions options) : options_(options) {}

Shard::~Shard() { Shutdown(); }

absl::Status Shard::Configure(const proto::ConfigureRequest& request) {
  proto::ConfigureRequest c = request;
  if (c.num_shards() < 1) return absl::InvalidArgumentError("num_shards must be at least 1");
  if (c.shard_index() < 0 || c.shard_index() >= c.num_shards()) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard_index ", c.shard_index(), " out of range [0, ", c.num_shards(), ")"));
  }
  PSC_RETURN_IF_ERROR(base::CheckInRange(c.num_shards(), 1, kMaxReplicas, "num_shards"));
  PSC_RETURN_IF_ERROR(base::CheckInRange(c.num_workers(), 1, kMaxReplicas, "num_workers"));
  proto::UpdatePolicy* p = c.mutable_policy();
  switch (p->mode()) {
    case proto::MODE_SYNC:
      if (p->replicas_to_aggregate() == 0) p->set_replicas_to_aggregate(c.num_workers());
      if (p->replicas_to_aggregate() < 1 || p->replicas_to_aggregate() > kMaxReplicas) {
        return absl::InvalidArgumentError(absl::StrCat("replicas_to_aggregate ",
                                                       p->replicas_to_aggregate(),
                                                       " out of range [1, ", kMaxReplicas, "]"));
      }
      break;
    case proto::MODE_ASYNC:
      break;
    case proto::MODE_SSP:
      if (p->staleness() < 0 || p->staleness() > kMaxCount) {
        return absl::InvalidArgumentError(
            absl::StrCat("staleness ", p->staleness(), " out of range [0, ", kMaxCount, "]"));
      }
      break;
    default:
      return absl::InvalidArgumentError("policy.mode must be MODE_SYNC, MODE_ASYNC or MODE_SSP");
  }
  PSC_ASSIGN_OR_RETURN(std::vector<bool> live, LiveWorkers(p->live_workers(), c.num_workers()));
  if (p->live_workers().empty()) {
    for (int w = 0; w < c.num_workers(); ++w) p->add_live_workers(w);
  }
  if (p->max_request_bytes() < 0) {
    return absl::InvalidArgumentError("max_request_bytes must not be negative");
  }
  p->set_wire_dtype(tensor::WireDtypeOrFloat32(p->wire_dtype()));
  if (absl::Status s = tensor::WireElementBytes(p->wire_dtype()).status(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("policy.wire_dtype: ", s.message()));
  }
  if (absl::Status s = tensor::CheckTopKRatio(p->topk_ratio()); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("policy.topk_ratio: ", s.message()));
  }
  if (p->has_loss_scale()) {
    if (absl::Status s = optimizer::CheckLossScaleConfig(p->loss_scale()); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("policy.loss_scale: ", s.message()));
    }
  }
  PSC_ASSIGN_OR_RETURN(*c.mutable_optimizer(), optimizer::CompleteOptimizerConfig(c.optimizer()));
  PSC_ASSIGN_OR_RETURN(GradientRules rules, GradientRules::FromConfig(c));

  absl::WriterMutexLock values_lock(&values_mu_);
  if (configured_) {
    if (google::protobuf::util::MessageDifferencer::Equals(config_, c)) return absl::OkStatus();
    if (!store_.empty()) {
      return absl::FailedPreconditionError(
          "the shard is already configured differently and holds variables; restart it to "
          "change its configuration");
    }
  }
  absl::MutexLock lock(&mu_);
  config_ = c;
  store_.set_gradient_rules(std::move(rules));
  store_.set_optimizer(c.optimizer());
  learning_rate_ = 0;
  configured_ = true;
  accumulator_ = SyncAccumulator(p->mode() == proto::MODE_SYNC ? p->replicas_to_aggregate() : 1);
  clocks_.Reset(p->staleness(), std::move(live));
  refusals_.Clear();
  loss_scale_.reset();
  if (p->has_loss_scale()) loss_scale_.emplace(p->loss_scale());
  stats_.set_shard_index(c.shard_index());
  stats_.set_mode(p->mode());
  return absl::OkStatus();
}

absl::Status Shard::CreateVariables(const proto::CreateVariablesRequest& request,
                                    proto::CreateVariablesResponse* response) {
  absl::WriterMutexLock values_lock(&values_mu_);
  if (!configured_) return absl::FailedPreconditionError("the shard is not configured yet");
  for (const proto::MovingAverage& ma : request.moving_averages()) {
    if (store_.gradient_rules().Of(ma.variable()) != proto::GRADIENT_DENSE) {
      return absl::InvalidArgumentError(
          absl::StrCat("moving average \"", ma.variable(),
                       "\" is declared a sparse gradient; its statistic travels dense"));
    }
  }
  PSC_RETURN_IF_ERROR(CheckGeneratedBytes(request.generated()));
  int created = 0, existing = 0;
  PSC_RETURN_IF_ERROR(store_.Create(request.variables(), request.moving_averages(),
                                    request.generated(), &created, &existing));
  response->set_created(created);
  response->set_existing(existing);
  return absl::OkStatus();
}

absl::Status Shard::CheckGeneratedBytes(
    const google::protobuf::RepeatedPtrField<proto::GeneratedVariable>& generated) const {
  if (generated.empty()) return absl::OkStatus();
  int64_t limit = options_.max_generated_bytes;
  if (limit <= 0) {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    limit = pages > 0 && page > 0 && pages < INT64_MAX / page ? int64_t{pages} * page : INT64_MAX;
  }
  // Each one's values and slots, as float32 (shapes unchecked yet: an
  // element count beyond the limit is refused here, the rest by the store).
  const uint64_t copies =
      1 + (store_.optimizer() == nullptr ? 0 : store_.optimizer()->slot_initial_values().size());
  std::vector<uint64_t> sizes;
  for (const proto::GeneratedVariable& g : generated) {
    absl::StatusOr<uint64_t> bytes =
        base::ByteSize(g.shape(), sizeof(float) * copies, static_cast<uint64_t>(limit),
                       absl::StrCat("variable \"", g.name(), "\" with its optimizer slots"));
    if (!bytes.ok()) return absl::ResourceExhaustedError(bytes.status().message());
    sizes.push_back(*bytes);
  }
  absl::StatusOr<uint64_t> total = base::BoundedSum(
      sizes, static_cast<uint64_t>(limit), "the variables this request has the shard make");
  if (!total.ok()) {
    return absl::ResourceExhaustedError(
        absl::StrCat(total.status().message(), " (", limit, " bytes: this server's limit)"));
  }
  return absl::OkStatus();
}

int64_t Shard::MaxRequestBytes() const {
  const int64_t own = config_.policy().max_request_bytes();
  return own > 0 ? own : options_.max_request_bytes;
}

// ---------------------------------------------------------------- push

absl::Status Shard::Push(const proto::PushRequest& request, proto::PushResponse* response) {
  if (IsPushPart(request.id())) return PushPart(request, response);
  return PushWhole(request, response);
}

absl::Status Shard::PushPart(const proto::PushRequest& request, proto::PushResponse* response) {
  proto::PushRequest whole;
  std::vector<Waiter> clock_ready;  // ssp: the pulls this part's clock lets read
  // Served once every lock is released, whatever the part's outcome.
  absl::Cleanup serve = [&] { ServeWaiters(std::move(clock_ready)); };
  {
    absl::ReaderMutexLock values_lock(&values_mu_);
    absl::Status valid = ValidatePushHeader(request);
    if (valid.ok()) valid = store_.CheckShapes(request.gradients(), config_.shard_index());
    absl::MutexLock lock(&mu_);
    if (!valid.ok()) {
      stats_.set_requests_rejected(stats_.requests_rejected() + 1);
      return valid;
    }
    response->set_version(version_);
    // Once the push is whole the ledger holds it: every part is a duplicate.
    // ssp: a part moves its worker's clock only when its push will not be
    // (a duplicate, a stale one); a whole push moves it in PushWhole.
    if (ledger_.Seen(request.id())) {
      NoteClock(request, &clock_ready);
      stats_.set_pushes_duplicate(stats_.pushes_duplicate() + 1);
      response->set_outcome(proto::PushResponse::DUPLICATE);
      return absl::OkStatus();
    }
    absl::StatusOr<PushAssembler::Verdict> verdict = assembler_.Add(request, &whole);
    stats_.set_push_parts_abandoned(stats_.push_parts_abandoned() + assembler_.TakeAbandoned());
    if (!verdict.ok()) {
      stats_.set_requests_rejected(stats_.requests_rejected() + 1);
      return verdict.status();
    }
    switch (*verdict) {
      case PushAssembler::Verdict::kDuplicate:
        NoteClock(request, &clock_ready);
        stats_.set_pushes_duplicate(stats_.pushes_duplicate() + 1);
        response->set_outcome(proto::PushResponse::DUPLICATE);
        return absl::OkStatus();
      case PushAssembler::Verdict::kStale:
        NoteClock(request, &clock_ready);
        stats_.set_push_parts_abandoned(stats_.push_parts_abandoned() + 1);
        response->set_outcome(proto::PushResponse::DROPPED_STALE);
        return absl::OkStatus();
      case PushAssembler::Verdict::kHeld:
        stats_.set_push_parts_received(stats_.push_parts_received() + 1);
        response->set_outcome(proto::PushResponse::PART_RECEIVED);
        return absl::OkStatus();
      case PushAssembler::Verdict::kComplete:
        stats_.set_push_parts_received(stats_.push_parts_received() + 1);
        break;
    }
  }
  // The whole push goes every way a push goes; its checks (every variable
  // present, finite values, the version) come now.
  return PushWhole(whole, response);
}

absl::Status Shard::PushWhole(const proto::PushRequest& request, proto::PushResponse* response) {
  std::vector<Waiter> ready;
  SyncAccumulator::Step step;
  int64_t epoch = 0;
  // A refusal that leaves the sync step unable to complete fails the pulls
  // waiting for it, once every lock is released.
  std::optional<absl::Status> answer;
  std::vector<Waiter> doomed;
  absl::Status doom;
  {
    absl::ReaderMutexLock values_lock(&values_mu_);
    std::vector<absl::string_view> gradients;
    std::vector<std::vector<float>> decoded;  // wire dtypes' float32 values
    bool nonfinite = false;
    // Validate: every check before any state changes.
    const absl::Status valid = ValidatePush(request, &gradients, &decoded, &nonfinite);
    const bool sync = mode() == proto::MODE_SYNC;
    int64_t iteration = -1;
    {
      absl::MutexLock lock(&mu_);
      // The ledger: a rejected, duplicate or skipped push ends here.
      answer = Admit(request, valid, nonfinite, gradients, response);
      // ssp: every push that is not refused (a duplicate too: an heir redoes
      // what was pushed) moves its worker's clock.
      if (valid.ok()) NoteClock(request, &ready);
      if (answer) {
        if (!valid.ok() && sync) NoteRefusal(request, valid, &doomed, &doom);
      } else if (sync) {  // the mode's rule
        if (!Accumulate(request, gradients, response, &step)) answer = absl::OkStatus();
        epoch = restore_epoch_;
      } else if (request.gradients_overflow()) {  // async, ssp: skipped on arrival
        SkipOverflow(1, request.loss_scale());
        response->set_outcome(proto::PushResponse::SKIPPED_OVERFLOW);
        response->set_loss_scale(CurrentLossScale());
        answer = absl::OkStatus();
      } else {
        RecordStaleness(version_ - request.computed_on_version(), 1);
        iteration = updates_++;
      }
    }
    // The store (async, ssp: now; sync: once the step is complete).
    if (!answer && !sync) {
      ApplyNow(gradients, iteration, request.loss_scale(), response, &ready);
    }
  }
  if (answer) {
    for (Waiter& w : doomed) w.done(doom);
    ServeWaiters(std::move(ready));  // those a clock let read
    return *answer;
  }
  if (!step.empty()) ApplyCompleteStep(std::move(step), epoch, response, &ready);
  // Wake the pulls the new version satisfies.
  ServeWaiters(std::move(ready));
  return absl::OkStatus();
}

void Shard::NoteRefusal(const proto::PushRequest& request, const absl::Status& why,
                        std::vector<Waiter>* doomed, absl::Status* doom) {
  // Only a refusal of a gradient for the step being gathered, and only one
  // that the same push would meet again (bad values or shapes): a shard not
  // configured yet, or a push from the future, is the chief's to recover.
  if (!absl::IsInvalidArgument(why) || !configured_ ||
      request.computed_on_version() != accumulator_.step()) {
    return;
  }
  refusals_.Refuse(accumulator_.step(), request.id().worker(), why);
  *doom = refusals_.Blocked(accumulator_.step(), accumulator_.replicas(), clocks_.num_live());
  if (doom->ok()) return;
  const int64_t gathering = accumulator_.step();
  for (Waiter& w : waiters_.TakeReady(
           [gathering](const proto::PullRequest& r) { return r.min_version() > gathering; })) {
    doomed->push_back(std::move(w));
  }
}

absl::Status Shard::PullDoomed(const proto::PullRequest& request) const {
  if (mode() != proto::MODE_SYNC || request.min_version() <= accumulator_.step()) {
    return absl::OkStatus();
  }
  return refusals_.Blocked(accumulator_.step(), accumulator_.replicas(), clocks_.num_live());
}

absl::Status Shard::ValidatePush(const proto::PushRequest& request,
                                 std::vector<absl::string_view>* gradients,
                                 std::vector<std::vector<float>>* decoded, bool* nonfinite) const {
  PSC_RETURN_IF_ERROR(ValidatePushHeader(request));
  if (!request.step_refused().empty()) {
    // The worker refuses its own step: refused as a bad gradient is.
    constexpr size_t kMaxReason = 4096;
    const std::string reason = request.step_refused().substr(0, kMaxReason);
    return absl::InvalidArgumentError(absl::StrCat("worker:", request.id().worker(),
                                                   " refused its own step ", request.id().step(),
                                                   ": ", reason));
  }
  if (request.gradients_overflow() && !config_.policy().has_loss_scale()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker:", request.id().worker(), " flags step ", request.id().step(),
        " as a loss-scale overflow; this job has no loss scaling (the worker runs another job's "
        "settings)"));
  }
  PSC_RETURN_IF_ERROR(store_.Match(request.gradients(), config_.shard_index(), gradients, decoded));
  // An overflow's values are never read.
  if (request.gradients_overflow()) return absl::OkStatus();
  absl::Status finite = store_.CheckFinite(*gradients);
  *nonfinite = !finite.ok();
  if (*nonfinite && !config_.policy().skip_nonfinite()) return finite;
  return absl::OkStatus();
}

absl::Status Shard::ValidatePushHeader(const proto::PushRequest& request) const {
  if (!configured_) return absl::FailedPreconditionError("the shard is not configured yet");
  if (store_.empty()) return absl::FailedPreconditionError("the shard has no variables yet");
  int64_t bytes = 0;
  for (const proto::NamedTensor& g : request.gradients()) {
    bytes += g.tensor().data().size() + g.tensor().indices().size();
  }
  if (bytes > MaxRequestBytes()) {
    return absl::InvalidArgumentError(
        absl::StrCat("push of ", bytes, " bytes exceeds the limit of ", MaxRequestBytes()));
  }
  const proto::PushId& id = request.id();
  if (id.worker() < 0 || id.worker() >= config_.num_workers()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "push id: worker ", id.worker(), " out of range [0, ", config_.num_workers(), ")"));
  }
  if (request.has_clock_worker() &&
      (request.clock_worker() < 0 || request.clock_worker() >= config_.num_workers())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "clock_worker ", request.clock_worker(), " out of range [0, ", config_.num_workers(), ")"));
  }
  PSC_RETURN_IF_ERROR(base::CheckInRange(id.unit(), 0, kMaxCount, "push id: unit"));
  PSC_RETURN_IF_ERROR(base::CheckInRange(id.step(), 0, kMaxCount, "push id: step"));
  PSC_RETURN_IF_ERROR(
      base::CheckInRange(id.replica_slot(), 0, kMaxReplicas - 1, "push id: replica_slot"));
  PSC_RETURN_IF_ERROR(
      base::CheckInRange(request.computed_on_version(), 0, kMaxCount, "computed_on_version"));
  PSC_RETURN_IF_ERROR(base::CheckInRange(request.worker_clock(), 0, kMaxCount, "worker_clock"));
  if (!(std::isfinite(request.loss_scale()) && request.loss_scale() >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "loss_scale ", request.loss_scale(), " must be finite and >= 0 (0: the current one)"));
  }
  if (request.pull_after()) {
    // The pull that follows, checked before the push changes anything.
    PSC_RETURN_IF_ERROR(CheckPullWireDtype(request.pull_wire_dtype()));
  }
  return CheckPushParts(id);
}

absl::Status Shard::CheckGradientShapes(const proto::PushRequest& meta) const {
  absl::ReaderMutexLock values_lock(&values_mu_);
  if (!configured_) return absl::FailedPreconditionError("the shard is not configured yet");
  if (store_.empty()) return absl::FailedPreconditionError("the shard has no variables yet");
  return store_.CheckShapes(meta.gradients(), config_.shard_index());
}

std::optional<absl::Status> Shard::Admit(const proto::PushRequest& request,
                                         const absl::Status& valid, bool nonfinite,
                                         const std::vector<absl::string_view>& gradients,
                                         proto::PushResponse* response) {
  if (!valid.ok()) {
    stats_.set_requests_rejected(stats_.requests_rejected() + 1);
    return valid;
  }
  response->set_version(version_);
  response->set_loss_scale(CurrentLossScale());
  if (ledger_.Seen(request.id())) {
    stats_.set_pushes_duplicate(stats_.pushes_duplicate() + 1);
    response->set_outcome(proto::PushResponse::DUPLICATE);
    return absl::OkStatus();
  }
  if (nonfinite) {
    stats_.set_gradients_nonfinite_skipped(stats_.gradients_nonfinite_skipped() + 1);
    response->set_outcome(proto::PushResponse::SKIPPED_NONFINITE);
    return absl::OkStatus();
  }
  if (request.computed_on_version() > version_) {
    stats_.set_requests_rejected(stats_.requests_rejected() + 1);
    return absl::FailedPreconditionError(
        absl::StrCat("gradient computed on version ", request.computed_on_version(),
                     " but this shard is at version ", version_,
                     " (it was restored from a checkpoint?): pull again"));
  }
  int64_t bytes = 0;  // as they came, in the wire dtype
  for (const proto::NamedTensor& g : request.gradients()) {
    bytes += g.tensor().data().size() + g.tensor().indices().size();
  }
  stats_.set_bytes_in(stats_.bytes_in() + bytes);
  stats_.set_pushes_accepted(stats_.pushes_accepted() + 1);
  ledger_.Record(request.id());
  return std::nullopt;
}

bool Shard::Accumulate(const proto::PushRequest& request,
                       const std::vector<absl::string_view>& gradients,
                       proto::PushResponse* response, SyncAccumulator::Step* step) {
  switch (accumulator_.Add(request.id(), request.computed_on_version(), gradients, step,
                           request.gradients_overflow())) {
    case SyncAccumulator::Verdict::kStale:
      stats_.set_gradients_dropped_stale(stats_.gradients_dropped_stale() + 1);
      response->set_outcome(proto::PushResponse::DROPPED_STALE);
      return false;
    case SyncAccumulator::Verdict::kAccumulated:
      stats_.set_gradients_pending(accumulator_.pending());
      response->set_outcome(proto::PushResponse::ACCUMULATED);
      return false;
    case SyncAccumulator::Verdict::kComplete:
      stats_.set_gradients_pending(0);
      response->set_outcome(proto::PushResponse::ACCUMULATED);
      return true;
  }
  return false;
}

void Shard::ApplyNow(const std::vector<absl::string_view>& gradients, int64_t iteration,
                     float used_scale, proto::PushResponse* response, std::vector<Waiter>* ready) {
  const absl::Time start = options_.clock->Now();
  store_.Apply(gradients, iteration);
  const absl::Duration took = options_.clock->Now() - start;
  absl::MutexLock lock(&mu_);
  ++version_;
  if (loss_scale_) loss_scale_->Update(true, used_scale);
  stats_.set_updates(stats_.updates() + 1);
  stats_.set_gradients_applied(stats_.gradients_applied() + 1);
  stats_.set_apply_seconds(stats_.apply_seconds() + absl::ToDoubleSeconds(took));
  response->set_outcome(proto::PushResponse::APPLIED);
  response->set_version(version_);
  response->set_loss_scale(CurrentLossScale());
  TakeReadyWaiters(ready);
}

void Shard::ApplyCompleteStep(SyncAccumulator::Step step, int64_t epoch,
                              proto::PushResponse* response, std::vector<Waiter>* ready) {
  absl::WriterMutexLock values_lock(&values_mu_);
  {
    absl::MutexLock lock(&mu_);
    if (epoch != restore_epoch_) {
      // A restore replaced the state this step was for.
      stats_.set_gradients_discarded(stats_.gradients_discarded() + step.size());
      return;
    }
  }
  ApplyStep(step, ready);
  absl::MutexLock lock(&mu_);
  response->set_outcome(step.overflow() ? proto::PushResponse::SKIPPED_OVERFLOW
                                        : proto::PushResponse::APPLIED);
  response->set_version(version_);
  response->set_loss_scale(CurrentLossScale());
}

void Shard::SkipOverflow(int64_t gradients, float used) {
  stats_.set_gradients_skipped_overflow(stats_.gradients_skipped_overflow() + gradients);
  if (loss_scale_) loss_scale_->Update(false, used);
}

void Shard::ApplyStep(const SyncAccumulator::Step& step, std::vector<Waiter>* ready) {
  if (step.overflow()) {
    // Skipped on every shard alike: each holds the same step's flags.
    absl::MutexLock lock(&mu_);
    ++version_;
    SkipOverflow(step.size());
    TakeReadyWaiters(ready);
    return;
  }
  const absl::Time start = options_.clock->Now();
  int64_t iteration;
  {
    absl::MutexLock lock(&mu_);
    iteration = updates_;
  }
  store_.ApplyStep(step, iteration);
  const absl::Duration took = options_.clock->Now() - start;
  absl::MutexLock lock(&mu_);
  ++version_;
  ++updates_;
  if (loss_scale_) loss_scale_->Update(true);
  stats_.set_updates(stats_.updates() + 1);
  stats_.set_gradients_applied(stats_.gradients_applied() + step.size());
  RecordStaleness(0, step.size());
  stats_.set_apply_seconds(stats_.apply_seconds() + absl::ToDoubleSeconds(took));
  TakeReadyWaiters(ready);
}

void Shard::RecordStaleness(int64_t staleness, int64_t count) {
  const int buckets = std::max(2, options_.staleness_buckets);
  if (stats_.staleness_histogram_size() < buckets)
    stats_.mutable_staleness_histogram()->Resize(buckets, 0);
  const int bucket = static_cast<int>(std::min<int64_t>(staleness, buckets - 1));
  stats_.set_staleness_histogram(bucket, stats_.staleness_histogram(bucket) + count);
  stats_.set_staleness_max(std::max(stats_.staleness_max(), staleness));
  stats_.set_staleness_sum(stats_.staleness_sum() + static_cast<double>(staleness * count));
}

// ---------------------------------------------------------------- pull

absl::Status Shard::ValidatePull(const proto::PullRequest& request) const {
  if (!configured_) return absl::FailedPreconditionError("the shard is not configured yet");
  PSC_RETURN_IF_ERROR(base::CheckInRange(request.min_version(), 0, kMaxCount, "min_version"));
  PSC_RETURN_IF_ERROR(base::CheckInRange(request.worker_clock(), 0, kMaxCount, "worker_clock"));
  PSC_RETURN_IF_ERROR(CheckPullWireDtype(request.wire_dtype()));
  if (config_.policy().mode() == proto::MODE_SSP &&
      (request.worker() < 0 || request.worker() >= config_.num_workers())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker ", request.worker(), " out of range [0, ", config_.num_workers(), ")"));
  }
  PSC_RETURN_IF_ERROR(store_.CheckNames(request.names(), config_.shard_index()));
  if (request.rows().empty()) return absl::OkStatus();
  // The rows asked are checked as they will be read, nothing written.
  VariableStore::Tensors unused;
  return store_
      .ReadRows(request.rows(), request.names(), config_.shard_index(), proto::DT_FLOAT32, &unused)
      .status();
}

absl::Status Shard::CheckPullWireDtype(proto::DataType dtype) const {
  const proto::DataType wire = tensor::WireDtypeOrFloat32(dtype);
  if (wire == proto::DT_FLOAT32 || wire == config_.policy().wire_dtype()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("pull asks for ", tensor::WireDtypeName(wire), "; this job's --wire_dtype is ",
                   tensor::WireDtypeName(config_.policy().wire_dtype()),
                   " (the worker runs another job's settings: a job fingerprint mismatch)"));
}

void Shard::NoteClock(const proto::PushRequest& request, std::vector<Waiter>* ready) {
  if (mode() != proto::MODE_SSP) return;
  const int worker = request.has_clock_worker() ? request.clock_worker() : request.id().worker();
  clocks_.Advance(worker, request.worker_clock());
  if (request.ends_unit()) clocks_.End(worker);
  TakeReadyWaiters(ready);
}

bool Shard::PullReady(const proto::PullRequest& request) const {
  if (version_ < request.min_version()) return false;
  if (stats_.mode() != proto::MODE_SSP) return true;
  return clocks_.MayRead(request.worker_clock());
}

std::string Shard::NotReadyReason(const proto::PullRequest& request) const {
  if (version_ < request.min_version()) {
    return absl::StrCat("version ", request.min_version(), " not reached (the shard is at ",
                        version_, ")");
  }
  return clocks_.WhyWaiting(request.worker(), request.worker_clock());
}

void Shard::FillPull(const proto::PullRequest& request, proto::PullResponse* response) {
  response->Clear();
  {
    absl::MutexLock lock(&mu_);
    response->set_version(version_);
    response->set_loss_scale(CurrentLossScale());
  }
  const proto::DataType wire = tensor::WireDtypeOrFloat32(request.wire_dtype());
  // Rows asked with no names: the rows alone (a worker's pull of a step's).
  int64_t bytes = request.names().empty() && !request.rows().empty()
                      ? 0
                      : store_.Read(request.names(), wire, request.skip_frozen(),
                                    request.skip_row_sparse(), response->mutable_variables());
  // Validated (ValidatePull) under the same values lock: it cannot fail.
  absl::StatusOr<int64_t> rows = store_.ReadRows(
      request.rows(), request.names(), config_.shard_index(), wire, response->mutable_variables());
  if (rows.ok()) bytes += *rows;
  absl::MutexLock lock(&mu_);
  stats_.set_pulls(stats_.pulls() + 1);
  stats_.set_bytes_out(stats_.bytes_out() + bytes);
}

void Shard::Pull(const proto::PullRequest& request, absl::Time deadline,
                 proto::PullResponse* response, PullDone done) {
  absl::Status status;
  std::vector<Waiter> clock_ready;  // ssp: the pulls a started unit lets read
  absl::Cleanup serve = [&] { ServeWaiters(std::move(clock_ready)); };
  {
    absl::ReaderMutexLock values_lock(&values_mu_);
    status = ValidatePull(request);
    if (status.ok()) {
      absl::MutexLock lock(&mu_);
      if (shut_down_) {
        status = absl::UnavailableError("the parameter server is shutting down");
      } else if (request.starts_unit() && mode() == proto::MODE_SSP) {
        // The worker runs from this step on; the pulls its old clock held
        // back may read now, and so may this one.
        clocks_.Start(request.worker(), request.worker_clock());
        TakeReadyWaiters(&clock_ready);
      }
      if (status.ok() && !PullReady(request)) {
        if (absl::Status doomed = PullDoomed(request); !doomed.ok()) {
          status = doomed;
        } else if (deadline <= options_.clock->Now()) {
          status = absl::DeadlineExceededError(NotReadyReason(request));
        } else {
          waiters_.Add(Waiter{request, deadline, response, std::move(done)});
          return;
        }
      }
    }
    if (status.ok()) FillPull(request, response);
  }
  done(status);
}

void Shard::TakeReadyWaiters(std::vector<Waiter>* ready) {
  std::vector<Waiter> now = waiters_.TakeReady(
      [this](const proto::PullRequest& r) ABSL_NO_THREAD_SAFETY_ANALYSIS { return PullReady(r); });
  for (Waiter& w : now) ready->push_back(std::move(w));
}

void Shard::ServeWaiters(std::vector<Waiter> ready) {
  for (Waiter& w : ready) {
    {
      absl::ReaderMutexLock values_lock(&values_mu_);
      FillPull(w.request, w.response);
    }
    w.done(absl::OkStatus());
  }
}

// ---------------------------------------------------------------- membership

absl::Status Shard::UpdateMembership(const proto::UpdateMembershipRequest& request,
                                     proto::UpdateMembershipResponse* response) {
  std::vector<Waiter> ready;
  {
    absl::WriterMutexLock values_lock(&values_mu_);
    if (!configured_) return absl::FailedPreconditionError("the shard is not configured yet");
    if (request.replicas_to_aggregate() < 0 || request.replicas_to_aggregate() > kMaxReplicas) {
      return absl::InvalidArgumentError(absl::StrCat("replicas_to_aggregate ",
                                                     request.replicas_to_aggregate(),
                                                     " out of range [0, ", kMaxReplicas, "]"));
    }
    if (!proto::UpdateMembershipRequest::Partial_IsValid(request.partial())) {
      return absl::InvalidArgumentError(
          absl::StrCat("partial ", request.partial(), " is not COMPLETE or DISCARD"));
    }
    PSC_ASSIGN_OR_RETURN(std::vector<bool> live,
                         LiveWorkers(request.live_workers(), config_.num_workers()));
    if (request.learning_rate() != 0 &&
        !(std::isfinite(request.learning_rate()) && request.learning_rate() > 0)) {
      return absl::InvalidArgumentError(absl::StrCat("learning_rate ", request.learning_rate(),
                                                     " must be finite and > 0 (0: unchanged)"));
    }
    if (request.learning_rate() != 0) SetLearningRate(request.learning_rate());
    SyncAccumulator::Step step;
    {
      absl::MutexLock lock(&mu_);
      if (!request.live_workers().empty()) clocks_.SetLive(std::move(live));
      int64_t discarded = 0;
      if (request.replicas_to_aggregate() > 0) {
        accumulator_.set_replicas(request.replicas_to_aggregate());
      }
      if (request.partial() == proto::UpdateMembershipRequest::DISCARD) {
        discarded = accumulator_.Discard();
        stats_.set_push_parts_abandoned(stats_.push_parts_abandoned() + assembler_.Clear());
      } else {
        accumulator_.TakeIfComplete(&step);
      }
      stats_.set_gradients_discarded(stats_.gradients_discarded() + discarded);
      stats_.set_gradients_pending(accumulator_.pending());
      response->set_discarded(discarded);
      TakeReadyWaiters(&ready);
    }
    if (!step.empty()) ApplyStep(step, &ready);
    absl::MutexLock lock(&mu_);
    response->set_version(version_);
  }
  ServeWaiters(std::move(ready));
  return absl::OkStatus();
}

// ---------------------------------------------------------------- the rest

void Shard::SetLearningRate(double lr) {
  proto::OptimizerConfig o = config_.optimizer();
  if (lr > 0) o.set_learning_rate(lr);
  store_.set_optimizer(o);
  learning_rate_ = lr;
}

proto::ShardStats Shard::Stats() const {
  absl::ReaderMutexLock values_lock(&values_mu_);
  absl::MutexLock lock(&mu_);
  proto::ShardStats out = stats_;
  out.set_version(version_);
  out.set_num_variables(store_.size());
  out.set_num_elements(store_.num_elements());
  out.set_gradients_pending(accumulator_.pending());
  out.set_ledger_entries(ledger_.size());
  out.set_pulls_waiting(waiters_.size());
  out.set_learning_rate(learning_rate_ > 0 ? learning_rate_ : config_.optimizer().learning_rate());
  if (loss_scale_) {
    out.set_loss_scale(loss_scale_->scale());
    out.set_steps_skipped_overflow(loss_scale_->State().skipped_steps());
  }
  return out;
}

void Shard::ExpireWaiters() {
  std::vector<std::pair<Waiter, std::string>> expired;
  {
    absl::MutexLock lock(&mu_);
    for (Waiter& w : waiters_.TakeExpired(options_.clock->Now())) {
      std::string reason = NotReadyReason(w.request);
      expired.emplace_back(std::move(w), std::move(reason));
    }
  }
  for (auto& [w, reason] : expired) w.done(absl::DeadlineExceededError(reason));
}

void Shard::Shutdown() {
  std::vector<Waiter> waiters;
  {
    absl::MutexLock lock(&mu_);
    shut_down_ = true;
    waiters = waiters_.TakeAll();
  }
  for (Waiter& w : waiters) w.done(absl::UnavailableError("the parameter server is shutting down"));
}

int Shard::num_waiters() const {
  absl::MutexLock lock(&mu_);
  return waiters_.size();
}

}  // namespace ps_server
}  // namespace psc
