// TF_CONFIG: the cluster description that TensorFlow and Kubeflow's TFJob
// give each process, parsed and validated.
//
//   {"cluster": {"chief": ["h:p"], "worker": ["h:p", ...], "ps": [...],
//                "evaluator": ["h:p"]},
//    "task": {"type": "worker", "index": 1},
//    "environment": "cloud", "rpc_layer": "grpc"}      <- ignored extras
//
// Every rejection is INVALID_ARGUMENT with a one-line message that starts with
// "TF_CONFIG: " and names the field and the reason, e.g.
//   TF_CONFIG: task.index 3 out of range: cluster has 2 "worker" tasks
#ifndef PSC_COMMON_CLUSTER_CLUSTER_CONFIG_H_
#define PSC_COMMON_CLUSTER_CLUSTER_CONFIG_H_

#include <array>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/cluster/host_port.h"

namespace psc {
namespace cluster {

enum class TaskType { kChief = 0, kWorker = 1, kPs = 2, kEvaluator = 3 };
inline constexpr int kNumTaskTypes = 4;

// "chief", "worker", "ps", "evaluator".
absl::string_view TaskTypeName(TaskType type);
// INVALID_ARGUMENT for anything else.
absl::StatusOr<TaskType> ParseTaskType(absl::string_view name);

struct TaskAddress {
  TaskType type;
  int index;
  HostPort address;
  // "worker:1", as logs and messages name a task.
  std::string Name() const;
};

// A validated TF_CONFIG. Immutable after Parse; thread-safe to share.
class ClusterConfig {
 public:
  // Parses and validates `json`: a JSON object with "cluster" and "task".
  // Checks task types, at most one chief and one evaluator, non-empty task
  // lists, host:port addresses, no address used twice, and that the task is
  // in the cluster with its index in range. Exception, as TensorFlow
  // allows (and as tf-operator v1.0-v1.1 wrote it; the operator's
  // genClusterSpec lists the evaluator since 2020): an "evaluator" task
  // (index 0) may be absent from the cluster; it needs no gRPC address.
  static absl::StatusOr<ClusterConfig> Parse(absl::string_view json);

  // The cluster of a worker that joined a running job
  // (docs/guide/membership.md): the chief's `cluster_json` (TF_CONFIG's
  // "cluster" object, as ClusterJson writes it), with this task
  // worker:`index` at `self`. A worker beyond the cluster's is not listed
  // (self_listed() false); one of them must be at `self`.
  // INVALID_ARGUMENT as Parse, or for an index that is another address's.
  static absl::StatusOr<ClusterConfig> ForJoinedWorker(absl::string_view cluster_json, int index,
                                                       const HostPort& self);

  TaskType task_type() const { return task_type_; }
  int task_index() const { return task_index_; }
  // This task's entry (an unlisted evaluator's has an empty address).
  const TaskAddress& self() const;
  // False for an evaluator that the cluster does not list, and a worker
  // that joined beyond it (ForJoinedWorker).
  bool self_listed() const { return self_listed_; }

  // The addresses of every task of `type`, in index order (may be empty).
  const std::vector<TaskAddress>& tasks(TaskType type) const {
    return tasks_[static_cast<int>(type)];
  }
  int num_tasks(TaskType type) const { return static_cast<int>(tasks(type).size()); }

  // How the cluster trains: with ps tasks (the parameter_server strategy),
  // without (multi_worker_mirrored: every worker a full replica), or either
  // (a worker, which learns it from TF_CONFIG: no ps is a collective
  // cluster).
  enum class Layout { kParameterServer, kCollective, kAny };
  // What a training job of `layout` needs: at least one "worker" task, and
  // at least one "ps" task (kParameterServer) or none (kCollective).
  absl::Status ValidateForTraining(Layout layout = Layout::kParameterServer) const;

  // The cluster as TF_CONFIG's "cluster" object, keys in a fixed order.
  std::string ClusterJson() const;
  // The --dry_run object: task_type, task_index, address, cluster.
  std::string DryRunJson() const;

 private:
  ClusterConfig() = default;

  std::array<std::vector<TaskAddress>, kNumTaskTypes> tasks_;
  TaskType task_type_ = TaskType::kWorker;
  int task_index_ = 0;
  bool self_listed_ = true;
  TaskAddress unlisted_self_{TaskType::kEvaluator, 0, {}};
};

// A worker's TF_CONFIG whose task index is beyond its cluster's "worker"
// list, with a chief: a StatefulSet scaled up while its cluster is fixed in
// the pod template. Such a worker joins the chief's job
// (docs/guide/membership.md). NOT_FOUND for any other TF_CONFIG (Parse then
// says what is wrong with it, if anything).
struct WorkerBeyondCluster {
  std::string chief;  // the chief's address
  int index = 0;      // the task index: the seat it asks for
};
absl::StatusOr<WorkerBeyondCluster> FindWorkerBeyondCluster(absl::string_view json);

// Returns the TF_CONFIG text a daemon should parse: the --tf_config flag if
// set (inline JSON, or "@path" to read a file), else the TF_CONFIG
// environment value `env_value` (may be null). INVALID_ARGUMENT when neither
// is set or the file cannot be read, naming the flag or file.
absl::StatusOr<std::string> ReadTfConfigText(absl::string_view flag_value, const char* env_value);

}  // namespace cluster
}  // namespace psc

#endif  // PSC_COMMON_CLUSTER_CLUSTER_CONFIG_H_
