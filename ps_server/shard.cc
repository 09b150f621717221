#include "ps_server/shard.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/tensor/tensor.h"
#include "google/protobuf/util/message_differencer.h"

namespace psc {
namespace ps_server {
namespace {

constexpr int kMaxNameLength = 512;
constexpr int32_t kMaxReplicas = 1 << 16;

absl::Status CheckName(const std::string& name) {
  if (name.empty()) return absl::InvalidArgumentError("empty variable name");
  if (name.size() > kMaxNameLength) {
    return absl::InvalidArgumentError(
        absl::StrCat("variable name longer than ", kMaxNameLength, " characters"));
  }
  for (char c : name) {
    if (c <= ' ' || c > '~') {
      return absl::InvalidArgumentError(
          absl::StrCat("variable name \"", name, "\" has a space or control character"));
    }
  }
  return absl::OkStatus();
}

// A float view of tensor bytes: the bytes themselves when aligned (protobuf
// keeps large strings in malloc'ed, aligned memory), else a copy.
class FloatView {
 public:
  explicit FloatView(absl::string_view bytes) {
    if (reinterpret_cast<uintptr_t>(bytes.data()) % alignof(float) == 0) {
      data_ = reinterpret_cast<const float*>(bytes.data());
    } else {
      copy_.resize(bytes.size() / sizeof(float));
      std::memcpy(copy_.data(), bytes.data(), copy_.size() * sizeof(float));
      data_ = copy_.data();
    }
  }
  const float* data() const { return data_; }

 private:
  const float* data_ = nullptr;
  std::vector<float> copy_;
};

}  // namespace

Shard::Variable::Variable(std::string n, std::vector<int64_t> s, int64_t size, int num_slots)
    : name(std::move(n)), shape(std::move(s)), size(size) {
  absl::MutexLock lock(&mu);
  values.assign(size, 0.0f);
  slots.assign(num_slots, std::vector<float>(size, 0.0f));
}

Shard::Shard(ShardOptions options) : options_(options) {}

Shard::~Shard() { Shutdown(); }

absl::Status Shard::Configure(const proto::ConfigureRequest& request) {
  proto::ConfigureRequest c = request;
  if (c.num_shards() < 1) return absl::InvalidArgumentError("num_shards must be at least 1");
  if (c.shard_index() < 0 || c.shard_index() >= c.num_shards()) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard_index ", c.shard_index(), " out of range [0, ", c.num_shards(), ")"));
  }
  if (c.num_workers() < 1) return absl::InvalidArgumentError("num_workers must be at least 1");
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
      if (p->staleness() < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("staleness ", p->staleness(), " must not be negative"));
      }
      break;
    default:
      return absl::InvalidArgumentError("policy.mode must be MODE_SYNC, MODE_ASYNC or MODE_SSP");
  }
  if (p->live_workers().empty()) {
    for (int w = 0; w < c.num_workers(); ++w) p->add_live_workers(w);
  }
  std::vector<bool> live(c.num_workers(), false);
  for (int32_t w : p->live_workers()) {
    if (w < 0 || w >= c.num_workers()) {
      return absl::InvalidArgumentError(
          absl::StrCat("live worker ", w, " out of range [0, ", c.num_workers(), ")"));
    }
    live[w] = true;
  }
  if (p->max_request_bytes() < 0) {
    return absl::InvalidArgumentError("max_request_bytes must not be negative");
  }
  auto optimizer = optimizer::CompleteOptimizerConfig(c.optimizer());
  if (!optimizer.ok()) return optimizer.status();
  *c.mutable_optimizer() = *optimizer;

  absl::WriterMutexLock values_lock(&values_mu_);
  if (configured_) {
    if (google::protobuf::util::MessageDifferencer::Equals(config_, c)) return absl::OkStatus();
    if (!variables_.empty()) {
      return absl::FailedPreconditionError(
          "the shard is already configured differently and holds variables; restart it to "
          "change its configuration");
    }
  }
  absl::MutexLock lock(&mu_);
  config_ = c;
  optimizer_ = std::make_unique<optimizer::Optimizer>(*optimizer);
  configured_ = true;
  replicas_to_aggregate_ = p->mode() == proto::MODE_SYNC ? p->replicas_to_aggregate() : 1;
  staleness_ = p->staleness();
  clocks_.assign(c.num_workers(), 0);
  live_ = live;
  stats_.set_shard_index(c.shard_index());
  stats_.set_mode(p->mode());
  return absl::OkStatus();
}

absl::Status Shard::CreateVariables(const proto::CreateVariablesRequest& request,
                                    proto::CreateVariablesResponse* response) {
  absl::WriterMutexLock values_lock(&values_mu_);
  if (!configured_) return absl::FailedPreconditionError("the shard is not configured yet");
  // Validate everything first: all or nothing.
  absl::flat_hash_set<std::string> names;
  int created = 0, existing = 0;
  for (const proto::NamedTensor& v : request.variables()) {
    if (absl::Status s = CheckName(v.name()); !s.ok()) return s;
    if (!names.insert(v.name()).second) {
      return absl::InvalidArgumentError(absl::StrCat("variable \"", v.name(), "\" given twice"));
    }
    if (absl::Status s =
            tensor::ValidateFloatTensor(v.tensor(), absl::StrCat("variable \"", v.name(), "\""));
        !s.ok()) {
      return s;
    }
    if (int64_t bad = tensor::FirstNonFinite(v.tensor().data()); bad >= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("variable \"", v.name(), "\": non-finite initial value at element ", bad));
    }
    auto it = index_.find(v.name());
    if (it == index_.end()) {
      ++created;
      continue;
    }
    const Variable& old = *variables_[it->second];
    if (!std::equal(old.shape.begin(), old.shape.end(), v.tensor().shape().begin(),
                    v.tensor().shape().end())) {
      return absl::FailedPreconditionError(absl::StrCat(
          "variable \"", v.name(), "\" exists with shape ", tensor::ShapeString(old.shape),
          "; cannot create it with shape ", tensor::ShapeString(v.tensor().shape())));
    }
    ++existing;
  }
  for (const proto::NamedTensor& v : request.variables()) {
    if (index_.contains(v.name())) continue;
    std::vector<int64_t> shape(v.tensor().shape().begin(), v.tensor().shape().end());
    const int64_t n = tensor::NumElements(shape);
    auto var = std::make_unique<Variable>(v.name(), std::move(shape), n,
                                          static_cast<int>(optimizer_->slot_names().size()));
    {
      absl::MutexLock lock(&var->mu);
      std::memcpy(var->values.data(), v.tensor().data().data(), n * sizeof(float));
    }
    index_[v.name()] = static_cast<int>(variables_.size());
    variables_.push_back(std::move(var));
  }
  response->set_created(created);
  response->set_existing(existing);
  return absl::OkStatus();
}

int64_t Shard::MaxRequestBytes() const {
  const int64_t own = config_.policy().max_request_bytes();
  return own > 0 ? own : options_.max_request_bytes;
}

absl::Status Shard::ValidatePush(const proto::PushRequest& request,
                                 std::vector<absl::string_view>* gradients) const {
  if (!configured_) return absl::FailedPreconditionError("the shard is not configured yet");
  if (variables_.empty()) return absl::FailedPreconditionError("the shard has no variables yet");
  int64_t bytes = 0;
  for (const proto::NamedTensor& g : request.gradients()) bytes += g.tensor().data().size();
  if (bytes > MaxRequestBytes()) {
    return absl::InvalidArgumentError(
        absl::StrCat("push of ", bytes, " bytes exceeds the limit of ", MaxRequestBytes()));
  }
  const proto::PushId& id = request.id();
  if (id.worker() < 0 || id.worker() >= config_.num_workers()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "push id: worker ", id.worker(), " out of range [0, ", config_.num_workers(), ")"));
  }
  if (id.unit() < 0 || id.step() < 0 || id.replica_slot() < 0) {
    return absl::InvalidArgumentError("push id: unit, step and replica_slot must not be negative");
  }
  if (request.computed_on_version() < 0) {
    return absl::InvalidArgumentError("computed_on_version must not be negative");
  }
  if (request.worker_clock() < 0)
    return absl::InvalidArgumentError("worker_clock must not be negative");
  gradients->assign(variables_.size(), absl::string_view());
  std::vector<bool> seen(variables_.size(), false);
  for (const proto::NamedTensor& g : request.gradients()) {
    auto it = index_.find(g.name());
    if (it == index_.end()) {
      return absl::NotFoundError(absl::StrCat(
          "gradient for \"", g.name(), "\": no such variable on shard ", config_.shard_index()));
    }
    if (seen[it->second]) {
      return absl::InvalidArgumentError(absl::StrCat("two gradients for \"", g.name(), "\""));
    }
    seen[it->second] = true;
    const Variable& v = *variables_[it->second];
    const std::string what = absl::StrCat("gradient for \"", g.name(), "\"");
    if (absl::Status s = tensor::ValidateFloatTensor(g.tensor(), what); !s.ok()) return s;
    if (!std::equal(v.shape.begin(), v.shape.end(), g.tensor().shape().begin(),
                    g.tensor().shape().end())) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " has shape ", tensor::ShapeString(g.tensor().shape()),
                       "; the variable has ", tensor::ShapeString(v.shape)));
    }
    (*gradients)[it->second] = g.tensor().data();
  }
  for (size_t i = 0; i < seen.size(); ++i) {
    if (!seen[i]) {
      return absl::InvalidArgumentError(
          absl::StrCat("push lacks a gradient for \"", variables_[i]->name,
                       "\": every push carries one gradient for each variable of the shard"));
    }
  }
  return absl::OkStatus();
}

absl::Status Shard::Push(const proto::PushRequest& request, proto::PushResponse* response) {
  std::vector<Waiter> ready;
  std::vector<Pending> complete;
  int64_t epoch = 0;
  absl::Status status;
  {
    absl::ReaderMutexLock values_lock(&values_mu_);
    std::vector<absl::string_view> gradients;
    status = ValidatePush(request, &gradients);
    int64_t nonfinite_at = -1;
    std::string nonfinite_name;
    if (status.ok()) {
      for (size_t i = 0; i < gradients.size() && nonfinite_at < 0; ++i) {
        nonfinite_at = tensor::FirstNonFinite(gradients[i]);
        if (nonfinite_at >= 0) nonfinite_name = variables_[i]->name;
      }
    }
    const bool skip_nonfinite = configured_ && config_.policy().skip_nonfinite();
    const proto::TrainingMode mode =
        configured_ ? config_.policy().mode() : proto::MODE_UNSPECIFIED;
    if (status.ok() && nonfinite_at >= 0 && !skip_nonfinite) {
      status = absl::InvalidArgumentError(absl::StrCat("gradient for \"", nonfinite_name,
                                                       "\" has a non-finite value at element ",
                                                       nonfinite_at));
    }
    int64_t iteration = -1;
    {
      absl::MutexLock lock(&mu_);
      if (!status.ok()) {
        stats_.set_requests_rejected(stats_.requests_rejected() + 1);
        return status;
      }
      response->set_version(version_);
      const PushKey key = KeyOf(request.id());
      if (seen_.contains(key)) {
        stats_.set_pushes_duplicate(stats_.pushes_duplicate() + 1);
        response->set_outcome(proto::PushResponse::DUPLICATE);
        return absl::OkStatus();
      }
      if (nonfinite_at >= 0) {
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
      int64_t bytes = 0;
      for (absl::string_view g : gradients) bytes += g.size();
      stats_.set_bytes_in(stats_.bytes_in() + bytes);
      stats_.set_pushes_accepted(stats_.pushes_accepted() + 1);
      seen_.insert(key);
      if (mode == proto::MODE_SYNC) {
        if (request.computed_on_version() < accum_step_) {
          stats_.set_gradients_dropped_stale(stats_.gradients_dropped_stale() + 1);
          response->set_outcome(proto::PushResponse::DROPPED_STALE);
          return absl::OkStatus();
        }
        Pending p{request.id(), {}};
        p.gradients.reserve(gradients.size());
        for (absl::string_view g : gradients) p.gradients.emplace_back(g);
        pending_.push_back(std::move(p));
        stats_.set_gradients_pending(static_cast<int64_t>(pending_.size()));
        response->set_outcome(proto::PushResponse::ACCUMULATED);
        if (static_cast<int32_t>(pending_.size()) < replicas_to_aggregate_) return absl::OkStatus();
        complete = std::move(pending_);
        pending_.clear();
        stats_.set_gradients_pending(0);
        ++accum_step_;
        epoch = restore_epoch_;
      } else {
        if (mode == proto::MODE_SSP) {
          int64_t& clock = clocks_[request.id().worker()];
          clock = std::max(clock, request.worker_clock());
        }
        RecordStaleness(version_ - request.computed_on_version(), 1);
        iteration = updates_++;
      }
    }
    if (mode != proto::MODE_SYNC) {
      const absl::Time start = absl::Now();
      ApplyGradients(gradients, iteration);
      absl::MutexLock lock(&mu_);
      ++version_;
      stats_.set_updates(stats_.updates() + 1);
      stats_.set_gradients_applied(stats_.gradients_applied() + 1);
      stats_.set_apply_seconds(stats_.apply_seconds() + absl::ToDoubleSeconds(absl::Now() - start));
      response->set_outcome(proto::PushResponse::APPLIED);
      response->set_version(version_);
      TakeReadyWaiters(&ready);
    }
  }
  if (!complete.empty()) {
    absl::WriterMutexLock values_lock(&values_mu_);
    bool current;
    {
      absl::MutexLock lock(&mu_);
      current = epoch == restore_epoch_;
      if (!current) {
        // A restore replaced the state this step was for.
        stats_.set_gradients_discarded(stats_.gradients_discarded() +
                                       static_cast<int64_t>(complete.size()));
      }
    }
    if (current) {
      ApplySyncStep(std::move(complete), &ready);
      absl::MutexLock lock(&mu_);
      response->set_outcome(proto::PushResponse::APPLIED);
      response->set_version(version_);
    }
  }
  ServeWaiters(std::move(ready));
  return absl::OkStatus();
}

void Shard::ApplyGradients(const std::vector<absl::string_view>& gradients, int64_t iteration) {
  for (size_t i = 0; i < variables_.size(); ++i) {
    Variable& v = *variables_[i];
    FloatView grad(gradients[i]);
    absl::MutexLock lock(&v.mu);
    std::vector<float*> slots;
    for (auto& s : v.slots) slots.push_back(s.data());
    optimizer_->Apply(v.values.data(), grad.data(), static_cast<size_t>(v.size), slots.data(),
                      iteration);
  }
}

void Shard::ApplySyncStep(std::vector<Pending> pending, std::vector<Waiter>* ready) {
  const absl::Time start = absl::Now();
  // A fixed order, whatever the arrival order: bit-for-bit reproducible.
  std::sort(pending.begin(), pending.end(), [](const Pending& a, const Pending& b) {
    return std::make_tuple(a.id.replica_slot(), a.id.worker(), a.id.unit(), a.id.step()) <
           std::make_tuple(b.id.replica_slot(), b.id.worker(), b.id.unit(), b.id.step());
  });
  int64_t iteration;
  {
    absl::MutexLock lock(&mu_);
    iteration = updates_;
  }
  const float count = static_cast<float>(pending.size());
  std::vector<float> mean;
  for (size_t i = 0; i < variables_.size(); ++i) {
    Variable& v = *variables_[i];
    mean.assign(v.size, 0.0f);
    for (const Pending& p : pending) {
      FloatView g(p.gradients[i]);
      const float* src = g.data();
      for (int64_t k = 0; k < v.size; ++k) mean[k] += src[k];
    }
    for (int64_t k = 0; k < v.size; ++k) mean[k] /= count;
    absl::MutexLock lock(&v.mu);
    std::vector<float*> slots;
    for (auto& s : v.slots) slots.push_back(s.data());
    optimizer_->Apply(v.values.data(), mean.data(), static_cast<size_t>(v.size), slots.data(),
                      iteration);
  }
  absl::MutexLock lock(&mu_);
  ++version_;
  ++updates_;
  stats_.set_updates(stats_.updates() + 1);
  stats_.set_gradients_applied(stats_.gradients_applied() + static_cast<int64_t>(pending.size()));
  RecordStaleness(0, static_cast<int64_t>(pending.size()));
  stats_.set_apply_seconds(stats_.apply_seconds() + absl::ToDoubleSeconds(absl::Now() - start));
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

absl::Status Shard::ValidatePull(const proto::PullRequest& request) const {
  if (!configured_) return absl::FailedPreconditionError("the shard is not configured yet");
  if (request.min_version() < 0)
    return absl::InvalidArgumentError("min_version must not be negative");
  if (request.worker_clock() < 0)
    return absl::InvalidArgumentError("worker_clock must not be negative");
  if (config_.policy().mode() == proto::MODE_SSP &&
      (request.worker() < 0 || request.worker() >= config_.num_workers())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker ", request.worker(), " out of range [0, ", config_.num_workers(), ")"));
  }
  absl::flat_hash_set<absl::string_view> names;
  for (const std::string& name : request.names()) {
    if (!index_.contains(name)) {
      return absl::NotFoundError(
          absl::StrCat("no variable \"", name, "\" on shard ", config_.shard_index()));
    }
    if (!names.insert(name).second) {
      return absl::InvalidArgumentError(absl::StrCat("variable \"", name, "\" requested twice"));
    }
  }
  return absl::OkStatus();
}

bool Shard::PullReady(const proto::PullRequest& request) const {
  if (version_ < request.min_version()) return false;
  if (stats_.mode() != proto::MODE_SSP) return true;
  int64_t slowest = -1;
  for (size_t w = 0; w < clocks_.size(); ++w) {
    if (live_[w] && (slowest < 0 || clocks_[w] < slowest)) slowest = clocks_[w];
  }
  if (slowest < 0) return true;  // no live worker to wait for
  return request.worker_clock() - slowest <= staleness_;
}

std::string Shard::NotReadyReason(const proto::PullRequest& request) const {
  if (version_ < request.min_version()) {
    return absl::StrCat("version ", request.min_version(), " not reached (the shard is at ",
                        version_, ")");
  }
  return absl::StrCat("worker ", request.worker(), " at clock ", request.worker_clock(),
                      " stayed more than ", staleness_, " steps ahead of the slowest live worker");
}

void Shard::FillPull(const proto::PullRequest& request, proto::PullResponse* response) {
  response->Clear();
  {
    absl::MutexLock lock(&mu_);
    response->set_version(version_);
  }
  int64_t bytes = 0;
  auto add = [&](Variable& v) {
    proto::NamedTensor* out = response->add_variables();
    out->set_name(v.name);
    absl::MutexLock lock(&v.mu);
    tensor::SetFloatTensor(v.shape, v.values, out->mutable_tensor());
    bytes += v.size * static_cast<int64_t>(sizeof(float));
  };
  if (request.names().empty()) {
    for (auto& v : variables_) add(*v);
  } else {
    for (const std::string& name : request.names()) add(*variables_[index_.at(name)]);
  }
  absl::MutexLock lock(&mu_);
  stats_.set_pulls(stats_.pulls() + 1);
  stats_.set_bytes_out(stats_.bytes_out() + bytes);
}

void Shard::Pull(const proto::PullRequest& request, absl::Time deadline,
                 proto::PullResponse* response, PullDone done) {
  absl::Status status;
  {
    absl::ReaderMutexLock values_lock(&values_mu_);
    status = ValidatePull(request);
    bool wait = false;
    if (status.ok()) {
      absl::MutexLock lock(&mu_);
      if (shut_down_) {
        status = absl::UnavailableError("the parameter server is shutting down");
      } else if (!PullReady(request)) {
        if (deadline <= options_.clock->Now()) {
          status = absl::DeadlineExceededError(NotReadyReason(request));
        } else {
          waiters_.push_back(Waiter{request, deadline, response, std::move(done)});
          wait = true;
        }
      }
    }
    if (wait) return;
    if (status.ok()) FillPull(request, response);
  }
  done(status);
}

void Shard::TakeReadyWaiters(std::vector<Waiter>* ready) {
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (PullReady(it->request)) {
      ready->push_back(std::move(*it));
      it = waiters_.erase(it);
    } else {
      ++it;
    }
  }
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
    std::vector<bool> live(config_.num_workers(), false);
    for (int32_t w : request.live_workers()) {
      if (w < 0 || w >= config_.num_workers()) {
        return absl::InvalidArgumentError(
            absl::StrCat("live worker ", w, " out of range [0, ", config_.num_workers(), ")"));
      }
      live[w] = true;
    }
    std::vector<Pending> complete;
    {
      absl::MutexLock lock(&mu_);
      if (request.replicas_to_aggregate() > 0)
        replicas_to_aggregate_ = request.replicas_to_aggregate();
      if (!request.live_workers().empty()) live_ = live;
      int64_t discarded = 0;
      if (request.partial() == proto::UpdateMembershipRequest::DISCARD) {
        discarded = static_cast<int64_t>(pending_.size());
        pending_.clear();
      } else if (!pending_.empty() &&
                 static_cast<int32_t>(pending_.size()) >= replicas_to_aggregate_) {
        complete = std::move(pending_);
        pending_.clear();
        ++accum_step_;
      }
      stats_.set_gradients_discarded(stats_.gradients_discarded() + discarded);
      stats_.set_gradients_pending(static_cast<int64_t>(pending_.size()));
      response->set_discarded(discarded);
      TakeReadyWaiters(&ready);
    }
    if (!complete.empty()) ApplySyncStep(std::move(complete), &ready);
    absl::MutexLock lock(&mu_);
    response->set_version(version_);
  }
  ServeWaiters(std::move(ready));
  return absl::OkStatus();
}

proto::ShardStats Shard::Stats() const {
  absl::ReaderMutexLock values_lock(&values_mu_);
  absl::MutexLock lock(&mu_);
  proto::ShardStats out = stats_;
  out.set_version(version_);
  out.set_num_variables(static_cast<int64_t>(variables_.size()));
  int64_t elements = 0;
  for (const auto& v : variables_) elements += v->size;
  out.set_num_elements(elements);
  out.set_gradients_pending(static_cast<int64_t>(pending_.size()));
  return out;
}

void Shard::ExpireWaiters() {
  std::vector<std::pair<Waiter, std::string>> expired;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = options_.clock->Now();
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      if (it->deadline <= now) {
        std::string reason = NotReadyReason(it->request);
        expired.emplace_back(std::move(*it), std::move(reason));
        it = waiters_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& [w, reason] : expired) w.done(absl::DeadlineExceededError(reason));
}

void Shard::Shutdown() {
  std::list<Waiter> waiters;
  {
    absl::MutexLock lock(&mu_);
    shut_down_ = true;
    waiters.swap(waiters_);
  }
  for (Waiter& w : waiters) w.done(absl::UnavailableError("the parameter server is shutting down"));
}

int Shard::num_waiters() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(waiters_.size());
}

}  // namespace ps_server
}  // namespace psc
