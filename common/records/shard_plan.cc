#include "common/records/shard_plan.h"

#include <deque>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/splitmix64.h"

namespace psc::records {

absl::StatusOr<ShardPlan> ShardPlan::Create(const ShardPlanOptions& o) {
  if (o.records.empty()) return absl::InvalidArgumentError("a shard plan of no file");
  int64_t total = 0;
  for (size_t i = 0; i < o.records.size(); ++i) {
    if (o.records[i] < 0 || o.records[i] > (int64_t{1} << 62) - total) {
      return absl::InvalidArgumentError(absl::StrCat(
          "file ", i, ": ", o.records[i], " records (want >= 0, all files' at most 2^62)"));
    }
    total += o.records[i];
  }
  if (o.batch_size < 1 || o.replicas < 1 || o.batch_size % o.replicas != 0) {
    return absl::InvalidArgumentError(absl::StrCat("batch_size ", o.batch_size, " and R ",
                                                   o.replicas, ": want R >= 1 dividing it"));
  }
  const int64_t most = total / o.batch_size;
  if (most < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("the files hold ", total, " records, fewer than a batch of ", o.batch_size));
  }
  if (o.steps_per_epoch < 0 || o.steps_per_epoch > most) {
    return absl::InvalidArgumentError(absl::StrCat("steps_per_epoch ", o.steps_per_epoch,
                                                   ": the files' ", total, " records hold at most ",
                                                   most, " batches of ", o.batch_size));
  }
  return ShardPlan(o, total, o.steps_per_epoch > 0 ? o.steps_per_epoch : most);
}

std::vector<int> ShardPlan::FileOrder(int64_t epoch) const {
  const size_t n = options_.records.size();
  std::vector<int> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = static_cast<int>(i);
  if (!options_.shuffle_files) return order;
  // A Fisher-Yates shuffle from (seed, epoch), apart from the batch plan's
  // draws (its own constant).
  base::SplitMix64 rng(base::Mix64(base::Mix64(options_.seed ^ 0x5053432D46494C45ULL) +
                                   static_cast<uint64_t>(epoch)));
  for (size_t i = n; i > 1; --i) {
    const size_t j = static_cast<size_t>(rng.Uniform(i));
    std::swap(order[i - 1], order[j]);
  }
  return order;
}

std::vector<std::vector<Piece>> ShardPlan::Epoch(int64_t epoch) const {
  const int R = options_.replicas;
  const int64_t quota = steps_per_epoch_ * (options_.batch_size / R);
  std::deque<Piece> queue;
  for (int f : FileOrder(epoch)) {
    if (options_.records[f] > 0) queue.push_back({f, 0, options_.records[f]});
  }
  std::vector<std::vector<Piece>> slots(R);
  std::vector<int64_t> read(R, 0);
  // Each turn the slot that has read the fewest records takes from the
  // head; a slot leaves when its quota is read. The quotas sum to at most
  // the records, so the queue never runs dry before they are met.
  while (true) {
    int next = -1;
    for (int r = 0; r < R; ++r) {
      if (read[r] < quota && (next < 0 || read[r] < read[next])) next = r;
    }
    if (next < 0 || queue.empty()) break;
    Piece head = queue.front();
    queue.pop_front();
    const int64_t take = std::min(head.count, quota - read[next]);
    slots[next].push_back({head.file, head.first, take});
    read[next] += take;
    if (take < head.count) queue.push_front({head.file, head.first + take, head.count - take});
  }
  return slots;
}

std::vector<Piece> ShardPlan::SlotEpoch(int64_t epoch, int r) const { return Epoch(epoch)[r]; }

}  // namespace psc::records
