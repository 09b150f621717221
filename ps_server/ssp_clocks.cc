#include "ps_server/ssp_clocks.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace psc {
namespace ps_server {

void SspClocks::Reset(int64_t staleness, std::vector<bool> live) {
  staleness_ = staleness;
  clocks_.assign(live.size(), 0);
  live_ = std::move(live);
}

void SspClocks::Advance(int worker, int64_t clock) {
  if (worker < 0 || worker >= static_cast<int>(clocks_.size())) return;
  clocks_[worker] = std::max(clocks_[worker], clock);
}

bool SspClocks::MayRead(int64_t clock) const {
  int64_t slowest = -1;
  for (size_t w = 0; w < clocks_.size(); ++w) {
    if (live_[w] && (slowest < 0 || clocks_[w] < slowest)) slowest = clocks_[w];
  }
  if (slowest < 0) return true;  // no live worker to wait for
  return clock - slowest <= staleness_;
}

std::string SspClocks::WhyWaiting(int worker, int64_t clock) const {
  return absl::StrCat("worker ", worker, " at clock ", clock, " stayed more than ", staleness_,
                      " steps ahead of the slowest live worker");
}

}  // namespace ps_server
}  // namespace psc
