#include "ps_server/push_ledger.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace psc {
namespace ps_server {

bool PushLedger::Seen(const proto::PushId& id) const {
  auto it = entries_.find(Key{id.worker(), id.replica_slot()});
  if (it == entries_.end()) return false;
  const Entry& e = it->second;
  return id.step() <= e.watermark || e.above.contains(Above{id.step(), id.unit()});
}

void PushLedger::Record(const proto::PushId& id) {
  Entry& e = entries_[Key{id.worker(), id.replica_slot()}];
  e.above.insert(Above{id.step(), id.unit()});
  e.watermark = std::max(e.watermark, id.step() - 1);
  // Everything at or below the watermark is implied by it.
  e.above.erase(e.above.begin(),
                e.above.upper_bound(Above{e.watermark, std::numeric_limits<int64_t>::max()}));
}

int64_t PushLedger::size() const {
  int64_t n = 0;
  for (const auto& [key, e] : entries_) n += 1 + static_cast<int64_t>(e.above.size());
  return n;
}

void PushLedger::Save(proto::ShardCheckpoint* checkpoint) const {
  for (const auto& [key, e] : entries_) {
    proto::ShardCheckpoint::LedgerEntry* out = checkpoint->add_ledger();
    out->set_worker(key.first);
    out->set_replica_slot(key.second);
    out->set_watermark(e.watermark);
    for (const auto& [step, unit] : e.above) {
      proto::PushId* id = out->add_above();
      id->set_worker(key.first);
      id->set_replica_slot(key.second);
      id->set_step(step);
      id->set_unit(unit);
    }
  }
}

absl::StatusOr<PushLedger> PushLedger::Restore(const proto::ShardCheckpoint& checkpoint) {
  auto check = [](const proto::PushId& id) -> absl::Status {
    if (id.worker() < 0 || id.worker() >= kMaxReplicas || id.replica_slot() < 0 ||
        id.replica_slot() >= kMaxReplicas || id.step() < 0 || id.step() > kMaxCount ||
        id.unit() < 0 || id.unit() > kMaxCount) {
      return absl::InvalidArgumentError(absl::StrCat("push id out of range: worker ", id.worker(),
                                                     ", unit ", id.unit(), ", step ", id.step(),
                                                     ", slot ", id.replica_slot()));
    }
    return absl::OkStatus();
  };
  PushLedger ledger;
  for (const proto::ShardCheckpoint::LedgerEntry& in : checkpoint.ledger()) {
    if (in.worker() < 0 || in.worker() >= kMaxReplicas || in.replica_slot() < 0 ||
        in.replica_slot() >= kMaxReplicas || in.watermark() < -1 || in.watermark() > kMaxCount) {
      return absl::InvalidArgumentError(absl::StrCat("ledger entry of worker ", in.worker(),
                                                     ", slot ", in.replica_slot(),
                                                     " with watermark ", in.watermark()));
    }
    Entry& e = ledger.entries_[Key{in.worker(), in.replica_slot()}];
    e.watermark = std::max(e.watermark, in.watermark());
    for (const proto::PushId& id : in.above()) {
      PSC_RETURN_IF_ERROR(check(id));
      if (id.worker() != in.worker() || id.replica_slot() != in.replica_slot()) {
        return absl::InvalidArgumentError(
            absl::StrCat("ledger entry of worker ", in.worker(), ", slot ", in.replica_slot(),
                         " lists an id of worker ", id.worker(), ", slot ", id.replica_slot()));
      }
      if (id.step() > e.watermark) e.above.insert(Above{id.step(), id.unit()});
    }
  }
  // A checkpoint of an older build: every id it had seen, in any order.
  std::vector<proto::PushId> seen(checkpoint.seen_pushes().begin(), checkpoint.seen_pushes().end());
  std::sort(seen.begin(), seen.end(), [](const proto::PushId& a, const proto::PushId& b) {
    return std::make_pair(a.step(), a.unit()) < std::make_pair(b.step(), b.unit());
  });
  for (const proto::PushId& id : seen) {
    PSC_RETURN_IF_ERROR(check(id));
    if (!ledger.Seen(id)) ledger.Record(id);
  }
  return ledger;
}

}  // namespace ps_server
}  // namespace psc
