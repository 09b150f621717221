#include "common/collective/bucketed_reducer.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"

namespace psc {
namespace collective {

absl::StatusOr<std::unique_ptr<BucketedReducer>> BucketedReducer::Create(
    const std::vector<int64_t>& sizes, const std::vector<int>& ready_order, int64_t bucket_bytes,
    base::Clock* clock) {
  const int n = static_cast<int>(sizes.size());
  if (static_cast<int>(ready_order.size()) != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("a ready order of ", ready_order.size(), " variables for ", n, " variables"));
  }
  if (bucket_bytes < 1) return absl::InvalidArgumentError("bucket size must be positive");
  std::unique_ptr<BucketedReducer> r(new BucketedReducer());
  if (clock != nullptr) r->clock_ = clock;
  r->sizes_ = sizes;
  r->offsets_.assign(n, 0);
  r->bucket_of_.assign(n, -1);
  r->ready_position_.assign(n, -1);
  const int64_t bucket_elements = std::max<int64_t>(1, bucket_bytes / int64_t{sizeof(float)});
  int64_t total = 0;
  for (int i = 0; i < n; ++i) {
    const int v = ready_order[i];
    if (v < 0 || v >= n || r->ready_position_[v] >= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("the ready order is not a permutation of the ", n, " variables"));
    }
    if (sizes[v] < 0 || sizes[v] > std::numeric_limits<int64_t>::max() / 8 - total) {
      return absl::InvalidArgumentError(
          absl::StrCat("variable ", v, " has ", sizes[v], " elements; too many in all"));
    }
    r->ready_position_[v] = i;
    if (r->buckets_.empty() || r->buckets_.back().elements >= bucket_elements) {
      r->buckets_.push_back(Bucket{{}, total, 0});
    }
    Bucket& b = r->buckets_.back();
    b.variables.push_back(v);
    b.elements += sizes[v];
    r->offsets_[v] = total;
    r->bucket_of_[v] = static_cast<int>(r->buckets_.size()) - 1;
    total += sizes[v];
  }
  if (static_cast<uint64_t>(total) > r->buffer_.max_size()) {
    return absl::ResourceExhaustedError(absl::StrCat(total, " gradient elements"));
  }
  r->buffer_.assign(static_cast<size_t>(total), 0.0f);
  r->thread_ = std::thread([p = r.get()] { p->ReduceLoop(); });
  return r;
}

BucketedReducer::~BucketedReducer() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

absl::Status BucketedReducer::Begin(Collective* collective) {
  absl::MutexLock lock(&mu_);
  if (open_) return absl::FailedPreconditionError("a reduction step is already open");
  open_ = true;
  collective_ = collective;
  next_ready_ = 0;
  pending_.clear();
  for (const Bucket& b : buckets_) pending_.push_back(static_cast<int>(b.variables.size()));
  queue_.clear();
  reduced_ = 0;
  status_ = absl::OkStatus();
  comm_ = absl::ZeroDuration();
  return absl::OkStatus();
}

absl::Span<float> BucketedReducer::Slot(int v) {
  return absl::MakeSpan(buffer_).subspan(static_cast<size_t>(offsets_[v]),
                                         static_cast<size_t>(sizes_[v]));
}

absl::Status BucketedReducer::MarkReady(int v) {
  absl::MutexLock lock(&mu_);
  if (!open_) return absl::FailedPreconditionError("no reduction step is open");
  if (v < 0 || v >= static_cast<int>(sizes_.size()) || ready_position_[v] != next_ready_) {
    return absl::FailedPreconditionError(
        absl::StrCat("variable ", v, " marked ready out of the backward pass's order"));
  }
  ++next_ready_;
  const int b = bucket_of_[v];
  if (--pending_[b] == 0) queue_.push_back(b);
  return absl::OkStatus();
}

void BucketedReducer::ReduceLoop() {
  for (;;) {
    int b;
    Collective* collective;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](BucketedReducer* r)
               ABSL_EXCLUSIVE_LOCKS_REQUIRED(r->mu_) { return r->stopping_ || !r->queue_.empty(); },
          this));
      if (queue_.empty()) return;  // stopping
      b = queue_.front();
      queue_.pop_front();
      collective = collective_;
      if (!status_.ok()) {  // an earlier bucket failed: the group is unusable
        ++reduced_;
        continue;
      }
    }
    const Bucket& bucket = buckets_[b];
    const absl::Time t0 = clock_->Now();
    // A bucket of empty variables (frozen ones) has nothing to sum: every
    // rank skips it alike, the buckets being the same on every rank.
    const absl::Status s =
        bucket.elements == 0
            ? absl::OkStatus()
            : collective->AllReduceSum(absl::MakeSpan(buffer_).subspan(
                  static_cast<size_t>(bucket.offset), static_cast<size_t>(bucket.elements)));
    const absl::Duration took = clock_->Now() - t0;
    absl::MutexLock lock(&mu_);
    comm_ += took;
    if (!s.ok() && status_.ok()) status_ = s;
    ++reduced_;
  }
}

absl::Status BucketedReducer::Finish(std::vector<std::vector<float>>* grads, ReduceTiming* timing) {
  const absl::Time t0 = clock_->Now();
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    if (!open_) return absl::FailedPreconditionError("no reduction step is open");
    const int queued =
        num_buckets() - static_cast<int>(std::count_if(pending_.begin(), pending_.end(),
                                                       [](int p) { return p > 0; }));
    struct Args {
      BucketedReducer* r;
      int queued;
    } args{this, queued};
    mu_.Await(absl::Condition(
        +[](Args* a)
             ABSL_EXCLUSIVE_LOCKS_REQUIRED(a->r->mu_) { return a->r->reduced_ >= a->queued; },
        &args));
    open_ = false;
    collective_ = nullptr;
    status = status_;
    if (status.ok() && queued < num_buckets()) {
      status = absl::FailedPreconditionError(
          absl::StrCat("only ", next_ready_, " of ", sizes_.size(),
                       " gradients were ready when the step's reduction was finished"));
    }
    if (timing != nullptr) timing->comm = comm_;
  }
  if (timing != nullptr) timing->exposed = clock_->Now() - t0;
  if (!status.ok()) return status;
  grads->resize(sizes_.size());
  for (size_t v = 0; v < sizes_.size(); ++v) {
    const absl::Span<float> s = Slot(static_cast<int>(v));
    (*grads)[v].assign(s.begin(), s.end());
  }
  return absl::OkStatus();
}

}  // namespace collective
}  // namespace psc
