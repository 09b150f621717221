// The bounded-staleness rule (DESIGN.md, "ssp"): each worker has one clock,
// its count of finished steps, global across shards (every push goes to
// every shard). A worker at clock c may read while c is at most `staleness`
// ahead of the slowest running live worker's clock; a lost worker leaves the
// minimum when the chief says so. A push never waits; s = 0 is lock step.
//
// Running: the chief hands units out from a queue (chief/work_queue.h), so a
// worker's next unit may start anywhere, and a worker may wait for work. A
// worker runs from the pull that starts its unit (Start: its clock is set
// to the unit's first step, back or forth) to the push that ends it (End);
// an idle worker holds no one back, and a new unit does not wait on the
// worker's own clock of its last one.
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

  // `worker` starts a unit at `clock`: it runs, at that clock.
  void Start(int worker, int64_t clock);
  // A push of `worker` counts once its clock is `clock`; within a unit
  // clocks never go back.
  void Advance(int worker, int64_t clock);
  // `worker` pushed the last step of its unit: it no longer runs.
  void End(int worker);

  // The live workers changed (the chief lost one, or took one back). A
  // worker that is not live runs nothing: it is live again idle, until the
  // pull that starts its next unit.
  void SetLive(std::vector<bool> live);

  // How many of the job's workers are live (all of them before any SetLive).
  int num_live() const {
    int n = 0;
    for (bool l : live_) n += l ? 1 : 0;
    return n;
  }

  // Whether a worker at `clock` may read now. True with no running live
  // worker.
  bool MayRead(int64_t clock) const;

  // Why a pull of `worker` at `clock` is waiting, for its DEADLINE_EXCEEDED.
  std::string WhyWaiting(int worker, int64_t clock) const;

  // For checkpoints: clock per worker. Checkpoints are taken between units,
  // so restored workers are idle.
  const std::vector<int64_t>& clocks() const { return clocks_; }
  void set_clocks(std::vector<int64_t> clocks) {
    clocks_ = std::move(clocks);
    running_.assign(clocks_.size(), false);
  }

 private:
  int64_t staleness_ = 0;
  std::vector<int64_t> clocks_;
  std::vector<bool> live_;
  std::vector<bool> running_;
};

}  // namespace ps_server
}  // namespace psc

#endif  // PSC_PS_SERVER_SSP_CLOCKS_H_
