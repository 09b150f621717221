// The job flags (DESIGN.md "Job flags"): what the chief sends to the cluster
// and what `worker --standalone` takes itself. Defined once, in
// job_flags.cc; JobSpecFromFlags validates them into a proto::JobSpec.
#ifndef PSC_COMMON_JOB_JOB_FLAGS_H_
#define PSC_COMMON_JOB_JOB_FLAGS_H_

#include <optional>
#include <string>

#include "absl/flags/declare.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/job/job_export.h"
#include "proto/job.pb.h"

ABSL_DECLARE_FLAG(std::string, mode);
ABSL_DECLARE_FLAG(bool, skip_corrupt_records);
ABSL_DECLARE_FLAG(double, max_skipped_fraction);
ABSL_DECLARE_FLAG(uint64_t, max_record_bytes);
ABSL_DECLARE_FLAG(std::string, strategy);
ABSL_DECLARE_FLAG(std::string, dtype_policy);
ABSL_DECLARE_FLAG(std::string, loss_scale);
ABSL_DECLARE_FLAG(int64_t, bucket_bytes);
ABSL_DECLARE_FLAG(absl::Duration, collective_timeout);
ABSL_DECLARE_FLAG(bool, overlap);
ABSL_DECLARE_FLAG(bool, push_overlap);
ABSL_DECLARE_FLAG(std::string, wire_dtype);
ABSL_DECLARE_FLAG(double, topk_ratio);
ABSL_DECLARE_FLAG(int64_t, staleness);
ABSL_DECLARE_FLAG(int32_t, replicas_to_aggregate);
ABSL_DECLARE_FLAG(std::string, model);
ABSL_DECLARE_FLAG(std::optional<std::string>, optimizer);
ABSL_DECLARE_FLAG(std::optional<double>, learning_rate);
ABSL_DECLARE_FLAG(int64_t, batch_size);
ABSL_DECLARE_FLAG(int64_t, epochs);
ABSL_DECLARE_FLAG(int64_t, steps_per_epoch);
ABSL_DECLARE_FLAG(int64_t, max_train_examples);
ABSL_DECLARE_FLAG(std::string, data_dir);
ABSL_DECLARE_FLAG(std::string, data);
ABSL_DECLARE_FLAG(std::string, x_train);
ABSL_DECLARE_FLAG(std::string, y_train);
ABSL_DECLARE_FLAG(std::string, x_val);
ABSL_DECLARE_FLAG(std::string, y_val);
ABSL_DECLARE_FLAG(std::string, x_test);
ABSL_DECLARE_FLAG(std::string, y_test);
ABSL_DECLARE_FLAG(double, validation_split);
ABSL_DECLARE_FLAG(std::string, sample_weight);
ABSL_DECLARE_FLAG(std::string, class_weight);
ABSL_DECLARE_FLAG(bool, shuffle);
ABSL_DECLARE_FLAG(bool, standardize);
ABSL_DECLARE_FLAG(std::string, standardize_axis);
ABSL_DECLARE_FLAG(std::string, rescale);
ABSL_DECLARE_FLAG(std::string, export);
ABSL_DECLARE_FLAG(std::string, export_weights);
ABSL_DECLARE_FLAG(std::string, early_stopping_monitor);
ABSL_DECLARE_FLAG(std::string, export_best);
ABSL_DECLARE_FLAG(std::string, reduce_lr_monitor);
ABSL_DECLARE_FLAG(double, reduce_lr_factor);
ABSL_DECLARE_FLAG(uint64_t, seed);
ABSL_DECLARE_FLAG(std::string, metrics_out);
ABSL_DECLARE_FLAG(int32_t, intra_op_threads);

namespace psc {
namespace job {

// The job the flags describe, validated. INVALID_ARGUMENT naming the flag
// ("--batch_size=0: must be at least 1"), including an unreadable
// --data_dir, so that a bad job is refused before anything trains.
absl::StatusOr<proto::JobSpec> JobSpecFromFlags();

// --export and --export_weights, checked (CheckExportOptions).
absl::StatusOr<ExportOptions> ExportOptionsFromFlags();

// A --rescale factor: "1/255", "0.5". INVALID_ARGUMENT for anything that is
// not a finite number > 0.
absl::StatusOr<double> ParseScale(const std::string& text);

// "parameter_server", "multi_worker_mirrored", "mirrored", "central_storage"
// (tf.distribute's names), and back (INVALID_ARGUMENT naming --strategy).
std::string StrategyName(proto::Strategy strategy);
absl::StatusOr<proto::Strategy> ParseStrategy(const std::string& name);

// "sync", "async", "ssp".
std::string ModeName(proto::TrainingMode mode);

}  // namespace job
}  // namespace psc

#endif  // PSC_COMMON_JOB_JOB_FLAGS_H_
