// parameter_server with --push_overlap (DESIGN.md, "Pushes in parts" and
// "Pulls in parts"): a worker's step pushed in parts while its backward pass
// runs, and the next step's parameters pulled in parts while its forward
// pass runs. The variables are grouped, in the order the backward pass makes
// their gradients, into buckets of about bucket_bytes (as
// multi_worker_mirrored's all-reduce buckets); each bucket's pieces on a
// shard are one part of that shard's push (PushId.part of num_parts). As
// soon as the pass has made a bucket's last gradient, its parts go to their
// shards (PartPusher) and the pass goes on. After a shard's last part, the
// pull of the next step's parameters goes to it in the same parts in the
// opposite order (the first layers' first), one PullRequest each; the next
// forward pass takes each bucket as its first layer needs it (TakeVariable).
//
// The servers assemble the parts into the one push they always took and
// answer each pull part from one version, so a sync run trains bit for bit
// as without --push_overlap.
//
// Thread-compatible: one step at a time, Ready from the backward pass's
// hook and TakeVariable from the forward pass's.
#ifndef PSC_WORKER_OVERLAPPED_PUSH_H_
#define PSC_WORKER_OVERLAPPED_PUSH_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/base/clock.h"
#include "common/ps_client/parameter_client.h"
#include "common/ps_client/part_pusher.h"
#include "common/ps_client/sharded_parameters.h"
#include "worker/topk_compressor.h"

namespace psc {
namespace worker {

class OverlappedPush {
 public:
  // `ready_order`: every model variable once, in the order the backward
  // pass makes its gradient. INVALID_ARGUMENT for a bad order or a bucket
  // size below 1; FAILED_PRECONDITION when a shard would get no part (it
  // holds no variable). `sharded` and `client` are not owned.
  static absl::StatusOr<std::unique_ptr<OverlappedPush>> Create(
      const ps_client::ShardedParameters* sharded, const std::vector<int>& ready_order,
      int64_t bucket_bytes, ps_client::ParameterClient* client, absl::Duration timeout,
      base::Clock* clock = nullptr);

  // --topk_ratio: each part's gradients go through `compressor` (not
  // owned; null: none) instead of straight to `wire`. Set before Begin.
  void set_compressor(TopKCompressor* compressor) { compressor_ = compressor; }

  // Starts a step: `headers[s]` is shard s's push without gradients (id,
  // computed_on_version, worker_clock, the pull after it); every part is a
  // copy of it with its part fields and its gradients, and none pulls: a
  // header's pull (pull_after, pull_min_version, pull_wire_dtype) goes in
  // parts after the shard's last part. The gradients are read from `grads`
  // (one vector per model variable, not owned) as `wire`. The last step's
  // pulls may still be pending (the forward pass takes them); Ready's first
  // bucket is FAILED_PRECONDITION while they are.
  void Begin(const std::vector<proto::PushRequest>& headers, proto::DataType wire,
             const std::vector<std::vector<float>>* grads);

  // Variable v's gradient is in (*grads)[v]: a bucket whose every variable
  // is ready goes out. INVALID_ARGUMENT for v out of range or ready twice;
  // a wire dtype's error (float16 out of range) as ShardedParameters::Split.
  absl::Status Ready(int v);

  // Waits for the step's parts (every bucket must have gone out; INTERNAL
  // otherwise, after waiting for those that did) and, where the headers
  // pull, for each shard's first pull part. `replies[s]`: the answer to
  // shard s's last part (without variables).
  absl::Status Finish(std::vector<proto::PushResponse>* replies);

  // After a Finish whose headers pulled: the parameters still to be taken,
  // and the version of shard s's (its first pull part's; a later part of an
  // async shard may be newer).
  bool pulls_pending() const { return pending_; }
  int64_t pulled_version(int shard) const { return pulled_version_[shard]; }

  // Waits for the pull parts of the bucket that holds variable v (if not
  // taken yet this step) and writes that bucket's variables into `params`
  // (sized as ShardedParameters::Assemble leaves it). OK at once when no
  // pull is pending. A pull's error, or INVALID_ARGUMENT for what does not
  // assemble (ShardedParameters::AssembleVariables).
  absl::Status TakeVariable(int v, std::vector<std::vector<float>>* params);
  // Every bucket not taken yet (a unit's last step; a pass without the
  // forward hook).
  absl::Status TakeAll(std::vector<std::vector<float>>* params);
  // Ends the step's calls, answered or not (a failed or cancelled unit):
  // afterwards nothing is pending, and the times not taken are dropped.
  void Abandon();

  // The time since the last call: `comm`, of each step whose pulls were all
  // taken, its first part sent to its last answer; `exposed`, the waits in
  // Finish and for pulls.
  void TakeTimes(absl::Duration* comm, absl::Duration* exposed);

  int num_buckets() const { return static_cast<int>(buckets_.size()); }
  int num_parts(int shard) const { return num_parts_[shard]; }

 private:
  OverlappedPush() = default;
  absl::Status SendBucket(int b);
  // Ends the pusher's round, adding its time to comm_.
  absl::Status EndRound();

  const ps_client::ShardedParameters* sharded_ = nullptr;
  base::RealClock real_clock_;
  base::Clock* clock_ = &real_clock_;
  std::vector<std::vector<int>> buckets_;  // variables, in ready order
  std::vector<int> bucket_of_;             // variable -> bucket
  std::vector<std::vector<int>> part_of_;  // bucket -> shard -> part, or -1
  std::vector<int> num_parts_;             // per shard
  // The pull parts: shard s's pull of bucket b is its pull number
  // num_parts_[s] - 1 - part_of_[b][s] (the forward pass's order), asking
  // for names_[b][s].
  std::vector<std::vector<std::vector<std::string>>> names_;  // bucket -> shard -> names

  // The step.
  std::vector<proto::PushRequest> headers_;
  proto::DataType wire_ = proto::DT_FLOAT32;
  TopKCompressor* compressor_ = nullptr;
  const std::vector<std::vector<float>>* grads_ = nullptr;
  std::vector<int> missing_;  // per bucket, variables not yet ready
  std::vector<bool> ready_;   // per variable
  std::vector<int> sent_;     // per shard, parts sent
  int buckets_sent_ = 0;
  std::unique_ptr<ps_client::PartPusher> pusher_;

  // The pulls after the step.
  bool pending_ = false;
  std::vector<int64_t> pulled_version_;                   // per shard
  std::vector<std::vector<proto::PullResponse>> pulled_;  // shard -> pull number
  std::vector<std::vector<bool>> arrived_;                // shard -> pull number
  std::vector<bool> taken_;                               // per bucket
  int buckets_taken_ = 0;
  absl::Duration comm_, exposed_;
};

}  // namespace worker
}  // namespace psc

#endif  // PSC_WORKER_OVERLAPPED_PUSH_H_
