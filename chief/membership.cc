#include "chief/membership.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/base/logging.h"
#include "common/base/status_macros.h"
#include "common/job/record_stream.h"

namespace psc {
namespace chief {

Membership::Membership(const MembershipOptions& options, ps_client::ParameterClient* servers,
                       WorkerClient* workers, const TaskRegistry* registry, base::Clock* clock)
    : options_(options),
      servers_(servers),
      workers_(workers),
      registry_(registry),
      clock_(clock),
      live_(options.num_workers, true),
      lost_at_(options.num_workers, absl::InfinitePast()) {
  absl::MutexLock lock(&mu_);
  vacant_.assign(options.num_workers, false);
  const int initial = options.initial_workers > 0 ? options.initial_workers : options.num_workers;
  for (int w = initial; w < options.num_workers; ++w) {
    live_[w] = false;
    vacant_[w] = true;
  }
}

std::vector<int> Membership::live() const {
  absl::MutexLock lock(&mu_);
  std::vector<int> out;
  for (int w = 0; w < static_cast<int>(live_.size()); ++w) {
    if (live_[w]) out.push_back(w);
  }
  return out;
}

bool Membership::lost(int worker) const {
  absl::MutexLock lock(&mu_);
  return worker >= 0 && worker < static_cast<int>(live_.size()) && !live_[worker];
}

bool Membership::vacant(int worker) const {
  absl::MutexLock lock(&mu_);
  return worker >= 0 && worker < static_cast<int>(vacant_.size()) && vacant_[worker];
}

int64_t Membership::workers_lost() const {
  absl::MutexLock lock(&mu_);
  return lost_;
}

absl::Status Membership::JudgeFailedUnit(int worker, const absl::Status& error) {
  const std::string name = absl::StrCat("worker:", worker);
  if (lost(worker)) return absl::UnavailableError(absl::StrCat(name, " is lost"));
  // The probe takes up to a few seconds: no lock is held meanwhile.
  const bool answers = workers_->Alive(worker);
  absl::MutexLock lock(&mu_);
  if (!live_[worker]) return absl::UnavailableError(absl::StrCat(name, " is lost"));
  if (answers) {
    // A training file this worker cannot open: another worker reads it,
    // once (see the header).
    // async and ssp only: their queue hands the units on. In sync a lost
    // worker's slot is re-dealt by a new R (which --batch_size may not
    // split) or, with backups, left unread: the job ends naming the file.
    const bool queue = options_.mode == proto::MODE_ASYNC || options_.mode == proto::MODE_SSP;
    const size_t at = error.message().find(job::kStreamError);
    if (!queue || !absl::IsNotFound(error) || at == absl::string_view::npos) {
      return absl::OkStatus();
    }
    const std::string file(error.message().substr(at + std::strlen(job::kStreamError)));
    if (std::count(live_.begin(), live_.end(), true) < 2 || !missing_files_.insert(file).second) {
      return absl::OkStatus();
    }
    uint64_t incarnation = 0;
    if (registry_ != nullptr) {
      if (std::optional<TaskRecord> r = registry_->Get(cluster::TaskType::kWorker, worker)) {
        incarnation = r->incarnation;
      }
    }
    barred_[worker] = incarnation;
    const std::string why = absl::StrCat("it cannot open a training file (", file,
                                         "); another worker reads it, and this one takes part "
                                         "again only once restarted");
    if (absl::Status s = DeclareLost(worker, why); !s.ok()) {
      base::Logf("chief: telling the servers: %s", std::string(s.message()));
    }
    return absl::UnavailableError(absl::StrCat(name, " is lost: ", why));
  }
  const std::string why =
      absl::StrCat("its unit failed (", error.message(), ") and it no longer answers");
  if (absl::Status s = DeclareLost(worker, why); !s.ok()) {
    base::Logf("chief: telling the servers: %s", std::string(s.message()));
  }
  return absl::UnavailableError(absl::StrCat(name, " is lost: ", why));
}

std::vector<int> Membership::CheckHeartbeats() {
  std::vector<int> declared;
  if (registry_ == nullptr || options_.heartbeat_timeout <= absl::ZeroDuration()) return declared;
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  for (int w = 0; w < static_cast<int>(live_.size()); ++w) {
    if (!live_[w]) continue;
    const std::optional<TaskRecord> r = registry_->Get(cluster::TaskType::kWorker, w);
    if (!r.has_value()) continue;  // never registered: only its units tell
    const absl::Duration silent = now - r->last_seen;
    if (silent < options_.heartbeat_timeout) continue;
    const std::string why = absl::StrCat(
        "no heartbeat for ", absl::FormatDuration(absl::Trunc(silent, absl::Milliseconds(1))),
        " (last unit ", r->last_unit, ", ", r->steps_done, " steps done)");
    if (absl::Status s = DeclareLost(w, why); !s.ok()) {
      base::Logf("chief: telling the servers: %s", std::string(s.message()));
    }
    declared.push_back(w);
  }
  return declared;
}

absl::Status Membership::TellServers() {
  absl::MutexLock lock(&mu_);
  return TellServersLocked();
}

absl::Status Membership::Rejoin(int worker) {
  absl::MutexLock lock(&mu_);
  if (worker < 0 || worker >= static_cast<int>(live_.size()) || live_[worker]) {
    return absl::FailedPreconditionError(absl::StrCat("worker:", worker, " is not lost"));
  }
  live_[worker] = true;
  if (absl::Status s = TellServersLocked(); !s.ok()) {
    // Not taken back: every shard is told the set without it again.
    live_[worker] = false;
    (void)TellServersLocked();
    return s;
  }
  ++joined_;
  if (vacant_[worker]) {
    vacant_[worker] = false;
    std::string where;
    if (registry_ != nullptr) {
      if (auto r = registry_->Get(cluster::TaskType::kWorker, worker); r.has_value()) {
        where = absl::StrCat(" at ", r->task.address.ToString());
      }
    }
    changes_.push_back({step_, worker, "joined", absl::StrCat("a worker", where)});
    base::Logf("chief: worker:%d%s joins the job at step %d", worker, where, step_);
    return absl::OkStatus();
  }
  ++rejoined_;
  changes_.push_back({step_, worker, "rejoined", "it answers again"});
  base::Logf("chief: worker:%d joins again at step %d", worker, step_);
  return absl::OkStatus();
}

bool Membership::Leaving(int worker) const {
  return registry_ != nullptr && registry_->Leaving(worker);
}

absl::Status Membership::Retire(int worker,
                                const std::function<absl::Status(int left)>& may_leave) {
  absl::MutexLock lock(&mu_);
  if (worker < 0 || worker >= static_cast<int>(live_.size()) || !live_[worker]) {
    return absl::FailedPreconditionError(absl::StrCat("worker:", worker, " is not in the job"));
  }
  int left = -1;  // without it
  for (bool l : live_) left += l ? 1 : 0;
  if (may_leave) PSC_RETURN_IF_ERROR(may_leave(left));
  live_[worker] = false;
  vacant_[worker] = true;
  lost_at_[worker] = clock_->Now();
  ++drained_;
  changes_.push_back({step_, worker, "drained", "it asked to leave"});
  base::Logf("chief: worker:%d leaves the job, drained; %d worker(s) go on from step %d", worker,
             left, step_);
  if (left == 0) return absl::OkStatus();
  return TellServersLocked();
}

int64_t Membership::workers_drained() const {
  absl::MutexLock lock(&mu_);
  return drained_;
}

int64_t Membership::workers_joined() const {
  absl::MutexLock lock(&mu_);
  return joined_;
}

int64_t Membership::workers_rejoined() const {
  absl::MutexLock lock(&mu_);
  return rejoined_;
}

bool Membership::MayBeBack(int worker) const {
  absl::Time lost_at;
  bool vacant = false;
  std::optional<uint64_t> barred;  // the incarnation that stays out
  {
    absl::MutexLock lock(&mu_);
    if (worker < 0 || worker >= static_cast<int>(live_.size())) return false;
    lost_at = lost_at_[worker];
    vacant = vacant_[worker];
    if (auto it = barred_.find(worker); it != barred_.end()) barred = it->second;
  }
  if (registry_ == nullptr) return !vacant && !barred.has_value();
  const std::optional<TaskRecord> r = registry_->Get(cluster::TaskType::kWorker, worker);
  if (barred.has_value() && (!r.has_value() || r->incarnation == *barred)) return false;
  // A seat is taken by a join; a worker that never registered, only a
  // probe tells.
  if (!r.has_value()) return !vacant;
  // This process left (drained): only a new one comes back.
  if (r->left.has_value() && r->left->ok()) return false;
  return r->last_seen > lost_at;
}

void Membership::set_step(int64_t step) {
  absl::MutexLock lock(&mu_);
  step_ = step;
}

std::vector<Membership::Change> Membership::changes() const {
  absl::MutexLock lock(&mu_);
  return changes_;
}

absl::Status Membership::DeclareLost(int worker, const std::string& why) {
  live_[worker] = false;
  ++lost_;
  lost_at_[worker] = clock_->Now();
  changes_.push_back({step_, worker, "lost", why});
  int left = 0;
  for (bool l : live_) left += l ? 1 : 0;
  base::Logf("chief: worker:%d is lost (%s); %d worker(s) go on from step %d", worker, why, left,
             step_);
  if (left == 0) return absl::OkStatus();
  return TellServersLocked();
}

absl::Status Membership::TellServersLocked() {
  proto::UpdateMembershipRequest m;
  int live = 0;
  for (int w = 0; w < static_cast<int>(live_.size()); ++w) {
    if (!live_[w]) continue;
    m.add_live_workers(w);
    ++live;
  }
  if (options_.mode == proto::MODE_SYNC) {
    const int32_t r = options_.replicas_to_aggregate;
    m.set_replicas_to_aggregate(r > 0 ? std::min(r, live) : live);
  }
  m.set_partial(proto::UpdateMembershipRequest::COMPLETE);
  for (int s = 0; s < servers_->num_shards(); ++s) {
    proto::UpdateMembershipResponse r;
    PSC_RETURN_IF_ERROR(servers_->UpdateMembership(s, m, &r));
  }
  return absl::OkStatus();
}

}  // namespace chief
}  // namespace psc
