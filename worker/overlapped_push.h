// parameter_server with --overlap (DESIGN.md, "Pushes in parts"): a worker's
// step pushed in parts while its backward pass runs. The variables are
// grouped, in the order the backward pass makes their gradients, into
// buckets of about bucket_bytes (as multi_worker_mirrored's all-reduce
// buckets); each bucket's pieces on a shard are one part of that shard's
// push (PushId.part of num_parts). As soon as the pass has made a bucket's
// last gradient, its parts go to their shards (PartPusher) and the pass goes
// on. A shard's last part carries the pull of the next step's parameters.
//
// The servers assemble the parts into the one push they always took, so a
// sync run trains bit for bit as without --overlap.
//
// Thread-compatible: one step at a time, Ready from the backward pass's hook.
#ifndef PSC_WORKER_OVERLAPPED_PUSH_H_
#define PSC_WORKER_OVERLAPPED_PUSH_H_

#include <memory>
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
  // copy of it with its part fields and its gradients, and only the shard's
  // last part keeps the pull. The gradients are read from `grads` (one
  // vector per model variable, not owned) as `wire`.
  void Begin(const std::vector<proto::PushRequest>& headers, proto::DataType wire,
             const std::vector<std::vector<float>>* grads);

  // Variable v's gradient is in (*grads)[v]: a bucket whose every variable
  // is ready goes out. INVALID_ARGUMENT for v out of range or ready twice;
  // a wire dtype's error (float16 out of range) as ShardedParameters::Split.
  absl::Status Ready(int v);

  // Waits for the step's parts (every bucket must have gone out; INTERNAL
  // otherwise, after waiting for those that did). `replies[s]`: the answer
  // to shard s's last part, with the pulled parameters. `comm`: first part
  // sent to last answer; `exposed`: the wait in here.
  absl::Status Finish(std::vector<proto::PushResponse>* replies, absl::Duration* comm,
                      absl::Duration* exposed);

  int num_buckets() const { return static_cast<int>(buckets_.size()); }
  int num_parts(int shard) const { return num_parts_[shard]; }

 private:
  OverlappedPush() = default;
  absl::Status SendBucket(int b);

  const ps_client::ShardedParameters* sharded_ = nullptr;
  base::RealClock real_clock_;
  base::Clock* clock_ = &real_clock_;
  std::vector<std::vector<int>> buckets_;  // variables, in ready order
  std::vector<int> bucket_of_;             // variable -> bucket
  std::vector<std::vector<int>> part_of_;  // bucket -> shard -> part, or -1
  std::vector<int> num_parts_;             // per shard

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
};

}  // namespace worker
}  // namespace psc

#endif  // PSC_WORKER_OVERLAPPED_PUSH_H_
