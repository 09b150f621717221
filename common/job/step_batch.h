// How many examples a step reads and how they are shared out (DESIGN.md,
// "sync"; docs/guide/sync-or-async.md).
//
// Without backup workers a step reads --batch_size examples and replica slot
// r of S takes the r-th contiguous 1/S of them (data/batch_plan.h).
//
// With backup workers (sync on parameter servers, W = job.num_replicas()
// workers and R = replicas_to_aggregate < W), each of the W slots reads a
// slice of --batch_size / R examples, so a step reads W slices, disjoint,
// and the servers apply the first R to arrive: the global batch is R slices
// (= --batch_size, as TensorFlow's SyncReplicasOptimizer has it) and the
// other W - R slices are dropped as stale. An epoch is
// train_examples / (W * batch_size / R) steps, so each example is read once
// per epoch and trained if its slice was among the step's first R:
// examples read = examples trained + examples dropped. Slot w belongs to
// worker w for the whole job: a lost worker's slice is not read (dropped,
// as a backup's is) while at least R workers are live.
#ifndef PSC_COMMON_JOB_STEP_BATCH_H_
#define PSC_COMMON_JOB_STEP_BATCH_H_

#include <cstdint>

#include "absl/status/status.h"
#include "proto/job.pb.h"

namespace psc {
namespace job {

// R: the replicas whose gradients complete a sync step (0 = every worker).
int32_t ReplicasToAggregate(const proto::JobSpec& job);

// True for sync on parameter servers with fewer replicas to aggregate than
// workers (job.num_replicas()).
bool HasBackupWorkers(const proto::JobSpec& job);

// The examples one step reads over all its slots: --batch_size, or
// W * batch_size / R with backup workers.
int64_t ExamplesReadPerStep(const proto::JobSpec& job);

// INVALID_ARGUMENT, naming the flags, unless --replicas_to_aggregate is in
// [0, workers] and the batch splits evenly: over R slices with backup
// workers, else over the workers.
absl::Status ValidateStepBatch(const proto::JobSpec& job, int workers);

}  // namespace job
}  // namespace psc

#endif  // PSC_COMMON_JOB_STEP_BATCH_H_
