#include "ps_server/ssp_clocks.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace psc {
namespace ps_server {

void SspClocks::Reset(int64_t staleness, std::vector<bool> live) {
  staleness_ = staleness;
  clocks_.assign(live.size(), 0);
  running_.assign(live.size(), false);
  live_ = std::move(live);
}

void SspClocks::SetLive(std::vector<bool> live) {
  live_ = std::move(live);
  running_.resize(live_.size(), false);
  for (size_t w = 0; w < live_.size(); ++w) {
    if (!live_[w]) running_[w] = false;
  }
}

void SspClocks::Start(int worker, int64_t clock) {
  if (worker < 0 || worker >= static_cast<int>(clocks_.size())) return;
  clocks_[worker] = clock;
  running_[worker] = true;
}

void SspClocks::Advance(int worker, int64_t clock) {
  if (worker < 0 || worker >= static_cast<int>(clocks_.size())) return;
  clocks_[worker] = std::max(clocks_[worker], clock);
}

void SspClocks::End(int worker) {
  if (worker < 0 || worker >= static_cast<int>(clocks_.size())) return;
  running_[worker] = false;
}

bool SspClocks::MayRead(int64_t clock) const {
  int64_t slowest = -1;
  for (size_t w = 0; w < clocks_.size(); ++w) {
    if (live_[w] && running_[w] && (slowest < 0 || clocks_[w] < slowest)) slowest = clocks_[w];
  }
  if (slowest < 0) return true;  // no running live worker to wait for
  return clock - slowest <= staleness_;
}

std::string SspClocks::WhyWaiting(int worker, int64_t clock) const {
  return absl::StrCat("worker ", worker, " at clock ", clock, " stayed more than ", staleness_,
                      " steps ahead of the slowest running live worker");
}

}  // namespace ps_server
}  // namespace psc
