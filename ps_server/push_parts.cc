#include "ps_server/push_parts.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace psc {
namespace ps_server {
namespace {

// Whether `a` and `b` are parts of the same push.
bool SamePush(const proto::PushId& a, int64_t a_version, const proto::PushRequest& b) {
  return a.unit() == b.id().unit() && a.step() == b.id().step() &&
         a.num_parts() == b.id().num_parts() && a_version == b.computed_on_version();
}

}  // namespace

absl::Status CheckPushParts(const proto::PushId& id) {
  if (id.num_parts() < 0 || id.num_parts() > kMaxPushParts) {
    return absl::InvalidArgumentError(absl::StrCat("push id: num_parts ", id.num_parts(),
                                                   " out of range [0, ", kMaxPushParts, "]"));
  }
  const int32_t parts = id.num_parts() > 1 ? id.num_parts() : 1;
  if (id.part() < 0 || id.part() >= parts) {
    return absl::InvalidArgumentError(
        absl::StrCat("push id: part ", id.part(), " out of range [0, ", parts, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<PushAssembler::Verdict> PushAssembler::Add(const proto::PushRequest& part,
                                                          proto::PushRequest* whole) {
  const proto::PushId& id = part.id();
  const Key key{id.worker(), id.replica_slot()};
  auto it = pending_.find(key);
  const bool same =
      it != pending_.end() && SamePush(it->second.id, it->second.computed_on_version, part);
  if (it != pending_.end() && !same) {
    if (id.step() < it->second.id.step()) return Verdict::kStale;
    // A later push of this worker and slot: the older one cannot complete.
    abandoned_ += static_cast<int64_t>(it->second.parts.size());
    pending_.erase(it);
    it = pending_.end();
  }
  if (same) {
    if (it->second.parts.contains(id.part())) return Verdict::kDuplicate;
    for (const proto::NamedTensor& g : part.gradients()) {
      if (it->second.names.contains(g.name())) {
        return absl::InvalidArgumentError(
            absl::StrCat("push part ", id.part(), " of ", id.num_parts(), ": \"", g.name(),
                         "\" came in an earlier part of the same push"));
      }
    }
  }
  if (it == pending_.end()) {
    Pending p;
    p.id = id;
    p.computed_on_version = part.computed_on_version();
    it = pending_.emplace(key, std::move(p)).first;
  }
  Pending& p = it->second;
  for (const proto::NamedTensor& g : part.gradients()) p.names.insert(g.name());
  p.parts.emplace(id.part(), part);
  if (static_cast<int32_t>(p.parts.size()) < id.num_parts()) return Verdict::kHeld;

  whole->Clear();
  *whole->mutable_id() = id;
  whole->mutable_id()->clear_part();
  whole->mutable_id()->clear_num_parts();
  whole->set_computed_on_version(p.computed_on_version);
  whole->set_worker_clock(part.worker_clock());
  if (part.has_clock_worker()) whole->set_clock_worker(part.clock_worker());
  whole->set_ends_unit(part.ends_unit());
  whole->set_pull_after(part.pull_after());
  whole->set_pull_min_version(part.pull_min_version());
  whole->set_pull_wire_dtype(part.pull_wire_dtype());
  whole->set_pull_skip_frozen(part.pull_skip_frozen());
  whole->set_pull_skip_row_sparse(part.pull_skip_row_sparse());
  for (auto& [index, held] : p.parts) {
    if (held.gradients_overflow()) whole->set_gradients_overflow(true);
    whole->set_loss_scale(held.loss_scale());
    for (proto::NamedTensor& g : *held.mutable_gradients()) *whole->add_gradients() = std::move(g);
  }
  pending_.erase(it);
  return Verdict::kComplete;
}

int64_t PushAssembler::Clear() {
  const int64_t n = parts();
  pending_.clear();
  return n;
}

int64_t PushAssembler::parts() const {
  int64_t n = 0;
  for (const auto& [key, p] : pending_) n += static_cast<int64_t>(p.parts.size());
  return n;
}

}  // namespace ps_server
}  // namespace psc
