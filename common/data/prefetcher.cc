#include "common/data/prefetcher.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace psc::data {

absl::StatusOr<Batch> GatherBatch(const Split& split, const std::vector<int64_t>& indices,
                                  int64_t step) {
  const int64_t pixels = split.pixels_per_example();
  if (!split.Consistent()) {
    return absl::InvalidArgumentError(
        absl::StrCat("GatherBatch: split of ", split.count, " examples of ", split.height, "x",
                     split.width, " has ", split.pixels.size(), " pixels, ", split.labels.size(),
                     " labels and ", split.weights.size(), " weights"));
  }
  Batch batch;
  batch.step = step;
  batch.images.resize(indices.size() * pixels);
  batch.labels.resize(indices.size());
  if (!split.weights.empty()) batch.weights.resize(indices.size());
  const int64_t width = split.target_width;
  if (!split.targets.empty()) batch.targets.resize(indices.size() * width);
  for (size_t i = 0; i < indices.size(); ++i) {
    const int64_t index = indices[i];
    if (index < 0 || index >= split.count) {
      return absl::InvalidArgumentError(absl::StrCat("GatherBatch: step ", step, ": example index ",
                                                     index, " out of range [0, ", split.count,
                                                     ")"));
    }
    split.Standardize(index, 1, batch.images.data() + i * pixels);
    batch.labels[i] = split.labels[index];
    if (!split.weights.empty()) batch.weights[i] = split.weights[index];
    if (!split.targets.empty()) {
      std::copy_n(split.targets.begin() + index * width, width, batch.targets.begin() + i * width);
    }
  }
  return batch;
}

absl::Status Prefetcher::CheckRange(int64_t first_step, int64_t num_steps, int capacity) {
  if (first_step < 0 || num_steps < 0 || capacity < 1 ||
      num_steps > std::numeric_limits<int64_t>::max() - first_step) {
    return absl::InvalidArgumentError(
        absl::StrCat("Prefetcher: first_step ", first_step, " and num_steps ", num_steps,
                     " must be >= 0 and capacity ", capacity, " >= 1"));
  }
  return absl::OkStatus();
}

Prefetcher::Prefetcher(const Split* split, const BatchPlan* plan, int64_t first_step,
                       int64_t num_steps, int r, int R, int capacity)
    : produce_(
          [split, plan, r, R](int64_t step, const std::atomic<bool>&) -> absl::StatusOr<Batch> {
            absl::StatusOr<std::vector<int64_t>> indices = plan->Indices(step, r, R);
            if (!indices.ok()) return indices.status();
            return GatherBatch(*split, *indices, step);
          }),
      first_step_(first_step),
      num_steps_(num_steps),
      capacity_(static_cast<size_t>(std::max(capacity, 1))) {
  absl::Status invalid;
  if (split == nullptr || plan == nullptr) {
    invalid = absl::InvalidArgumentError("Prefetcher: split and plan must not be null");
  } else {
    invalid = CheckRange(first_step, num_steps, capacity);
    // Checks r and R (and fills the plan's cache for the first epoch).
    if (invalid.ok()) invalid = plan->Indices(first_step, r, R).status();
  }
  Start(invalid);
}

Prefetcher::Prefetcher(Produce produce, int64_t first_step, int64_t num_steps, int capacity)
    : produce_(std::move(produce)),
      first_step_(first_step),
      num_steps_(num_steps),
      capacity_(static_cast<size_t>(std::max(capacity, 1))) {
  absl::Status invalid = CheckRange(first_step, num_steps, capacity);
  if (invalid.ok() && !produce_) {
    invalid = absl::InvalidArgumentError("Prefetcher: no producer");
  }
  Start(invalid);
}

void Prefetcher::Start(const absl::Status& invalid) {
  if (!invalid.ok()) {
    absl::MutexLock lock(&mu_);
    producer_status_ = invalid;
    producer_done_ = true;
    return;
  }
  thread_ = std::thread([this] { Run(); });
}

Prefetcher::~Prefetcher() {
  stopping_ = true;
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void Prefetcher::Run() {
  absl::Status status;
  for (int64_t step = first_step_; step < first_step_ + num_steps_; ++step) {
    {
      absl::MutexLock lock(&mu_);
      if (stop_) break;
    }
    absl::StatusOr<Batch> batch = produce_(step, stopping_);
    if (!batch.ok()) {
      status = batch.status();
      break;
    }
    absl::MutexLock lock(&mu_);
    auto room_or_stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stop_ || queue_.size() < capacity_;
    };
    mu_.Await(absl::Condition(&room_or_stop));
    if (stop_) break;
    queue_.push_back(*std::move(batch));
  }
  absl::MutexLock lock(&mu_);
  producer_status_ = status;
  producer_done_ = true;
}

absl::StatusOr<Batch> Prefetcher::Next() {
  absl::MutexLock lock(&mu_);
  auto ready = [this]()
                   ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !queue_.empty() || producer_done_; };
  mu_.Await(absl::Condition(&ready));
  if (!queue_.empty()) {
    Batch batch = std::move(queue_.front());
    queue_.pop_front();
    return batch;
  }
  if (!producer_status_.ok()) return producer_status_;
  return absl::OutOfRangeError(absl::StrCat(
      "Prefetcher: all ", num_steps_, " steps starting at step ", first_step_, " were delivered"));
}

}  // namespace psc::data
