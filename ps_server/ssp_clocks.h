// The bounded-staleness rule (DESIGN.md, "ssp"): each worker has one clock,
// its count of finished steps, global across shards (every push goes to
// every shard). A worker at clock c may read while c is at most `staleness`
// ahead of the slowest live worker's clock; a lost worker leaves the minimum
// when the chief says so. A push never waits; s = 0 is lock step.
//
// Thread-compatible: the Shard calls it under its metadata lock.
#ifndef PSC_PS_SERVER_SSP_CLOCKS_H_
#define PSC_PS_SERVER_SSP_CLOCKS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace psc {
namespace ps_server {

class SspClocks {
 public:
  // `live[w]` for each of the job's workers; clocks start at 0.
  void Reset(int64_t staleness, std::vector<bool> live);

  // A push of `worker` counts once its clock is `clock`; clocks never go back.
  void Advance(int worker, int64_t clock);

  // The live workers changed (the chief lost one).
  void SetLive(std::vector<bool> live) { live_ = std::move(live); }

  // How many of the job's workers are live (all of them before any SetLive).
  int num_live() const {
    int n = 0;
    for (bool l : live_) n += l ? 1 : 0;
    return n;
  }

  // Whether a worker at `clock` may read now. True with no live worker.
  bool MayRead(int64_t clock) const;

  // Why a pull of `worker` at `clock` is waiting, for its DEADLINE_EXCEEDED.
  std::string WhyWaiting(int worker, int64_t clock) const;

  // For checkpoints: clock per worker.
  const std::vector<int64_t>& clocks() const { return clocks_; }
  void set_clocks(std::vector<int64_t> clocks) { clocks_ = std::move(clocks); }

 private:
  int64_t staleness_ = 0;
  std::vector<int64_t> clocks_;
  std::vector<bool> live_;
};

}  // namespace ps_server
}  // namespace psc

#endif  // PSC_PS_SERVER_SSP_CLOCKS_H_
