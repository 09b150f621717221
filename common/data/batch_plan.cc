#include "common/data/batch_plan.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/base/splitmix64.h"

namespace psc::data {
namespace {

using base::Mix64;
using base::SplitMix64;

// The generator state of epoch `epoch` under `seed`.
uint64_t EpochState(uint64_t seed, int64_t epoch) {
  return Mix64(Mix64(seed ^ 0x5053432D44415441ULL) + static_cast<uint64_t>(epoch));
}

}  // namespace

absl::StatusOr<BatchPlan> BatchPlan::Create(const BatchPlanOptions& options) {
  if (options.num_examples < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("BatchPlan: num_examples ", options.num_examples, " must be >= 1"));
  }
  if (options.batch_size < 1 || options.batch_size > options.num_examples) {
    return absl::InvalidArgumentError(
        absl::StrCat("BatchPlan: batch_size ", options.batch_size,
                     " must be in [1, num_examples = ", options.num_examples, "]"));
  }
  if (options.shuffle_buffer < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("BatchPlan: shuffle_buffer ", options.shuffle_buffer, " must be >= 1"));
  }
  const int64_t full_steps = options.num_examples / options.batch_size;
  if (options.steps_per_epoch < 0 || options.steps_per_epoch > full_steps) {
    return absl::InvalidArgumentError(
        absl::StrCat("BatchPlan: steps_per_epoch ", options.steps_per_epoch, " must be in [0, ",
                     full_steps, "] (0 = num_examples / batch_size = ", options.num_examples, " / ",
                     options.batch_size, ")"));
  }
  return BatchPlan(options, options.steps_per_epoch > 0 ? options.steps_per_epoch : full_steps);
}

BatchPlan::BatchPlan(const BatchPlanOptions& options, int64_t steps_per_epoch)
    : options_(options), steps_per_epoch_(steps_per_epoch), cache_(std::make_unique<Cache>()) {}

std::vector<int64_t> BatchPlan::EpochOrder(int64_t epoch) const {
  SplitMix64 rng(EpochState(options_.seed, epoch));
  const int64_t n = options_.num_examples;
  const int64_t take = steps_per_epoch_ * options_.batch_size;  // <= n.
  std::vector<int64_t> buffer(static_cast<size_t>(std::min(options_.shuffle_buffer, n)));
  std::iota(buffer.begin(), buffer.end(), int64_t{0});
  int64_t next = static_cast<int64_t>(buffer.size());
  std::vector<int64_t> order;
  order.reserve(static_cast<size_t>(take));
  // take <= n, so the buffer is never empty here.
  while (static_cast<int64_t>(order.size()) < take) {
    const size_t p = static_cast<size_t>(rng.Uniform(buffer.size()));
    order.push_back(buffer[p]);
    if (next < n) {
      buffer[p] = next++;
    } else {
      buffer[p] = buffer.back();
      buffer.pop_back();
    }
  }
  return order;
}

std::shared_ptr<const std::vector<int64_t>> BatchPlan::OrderOf(int64_t epoch) const {
  {
    absl::MutexLock lock(&cache_->mu);
    if (cache_->epoch == epoch) return cache_->order;
  }
  // Computed without the lock, so readers of the cached epoch are not held up; two threads that
  // miss together compute the same order, and either result may be cached.
  auto order = std::make_shared<const std::vector<int64_t>>(EpochOrder(epoch));
  absl::MutexLock lock(&cache_->mu);
  cache_->epoch = epoch;
  cache_->order = order;
  return order;
}

absl::StatusOr<std::vector<int64_t>> BatchPlan::Indices(int64_t step, int r, int R) const {
  if (step < 0) {
    return absl::InvalidArgumentError(absl::StrCat("BatchPlan: step ", step, " must be >= 0"));
  }
  if (R < 1 || options_.batch_size % R != 0) {
    return absl::InvalidArgumentError(absl::StrCat("BatchPlan: ", R,
                                                   " replica slots must be >= 1 and divide "
                                                   "batch_size ",
                                                   options_.batch_size));
  }
  if (r < 0 || r >= R) {
    return absl::InvalidArgumentError(
        absl::StrCat("BatchPlan: replica slot ", r, " out of range [0, ", R, ")"));
  }
  const int64_t per_slot = options_.batch_size / R;
  const int64_t begin = (step % steps_per_epoch_) * options_.batch_size + r * per_slot;
  std::shared_ptr<const std::vector<int64_t>> order = OrderOf(step / steps_per_epoch_);
  return std::vector<int64_t>(order->begin() + begin, order->begin() + begin + per_slot);
}

}  // namespace psc::data
