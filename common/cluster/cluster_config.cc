#include "common/cluster/cluster_config.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status_macros.h"
#include "nlohmann/json.hpp"

namespace psc {
namespace cluster {
namespace {

using json = nlohmann::json;

constexpr TaskType kAllTypes[] = {TaskType::kChief, TaskType::kWorker, TaskType::kPs,
                                  TaskType::kEvaluator};

absl::Status ConfigError(absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("TF_CONFIG: ", message));
}

// The JSON type of `v`, for messages: "string", "number", "object", ...
std::string JsonTypeName(const json& v) {
  if (v.is_number()) return "number";
  return v.type_name();
}

// nlohmann's parse_error::what() starts with "[json.exception.parse_error.101] ".
std::string TrimJsonException(const char* what) {
  std::string s(what);
  size_t close = s.find("] ");
  if (!s.empty() && s.front() == '[' && close != std::string::npos) s = s.substr(close + 2);
  return s;
}

}  // namespace

absl::string_view TaskTypeName(TaskType type) {
  switch (type) {
    case TaskType::kChief:
      return "chief";
    case TaskType::kWorker:
      return "worker";
    case TaskType::kPs:
      return "ps";
    case TaskType::kEvaluator:
      return "evaluator";
  }
  return "unknown";
}

absl::StatusOr<TaskType> ParseTaskType(absl::string_view name) {
  for (TaskType t : kAllTypes) {
    if (name == TaskTypeName(t)) return t;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown task type \"", name, "\"; expected chief, worker, ps or evaluator",
                   name == "master" ? " (TF1's \"master\" is \"chief\" here)" : ""));
}

std::string TaskAddress::Name() const { return absl::StrCat(TaskTypeName(type), ":", index); }

const TaskAddress& ClusterConfig::self() const {
  return self_listed_ ? tasks(task_type_)[task_index_] : unlisted_self_;
}

absl::StatusOr<ClusterConfig> ClusterConfig::Parse(absl::string_view text) {
  if (absl::StripAsciiWhitespace(text).empty()) return ConfigError("empty");
  json root;
  try {
    root = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    return ConfigError(absl::StrCat("not valid JSON: ", TrimJsonException(e.what())));
  }
  if (!root.is_object()) {
    return ConfigError(absl::StrCat("must be a JSON object, not ", JsonTypeName(root)));
  }

  ClusterConfig config;
  // "cluster"
  auto cluster_it = root.find("cluster");
  if (cluster_it == root.end() && root.contains("sparseCluster")) {
    // Kubeflow's enableDynamicWorker: each worker lists only itself.
    return ConfigError(
        "\"sparseCluster\" (Kubeflow's enableDynamicWorker: true) is not supported: a worker "
        "that joins a running job is not built yet; leave enableDynamicWorker unset so that every "
        "task gets the whole \"cluster\"");
  }
  if (cluster_it == root.end()) return ConfigError("missing \"cluster\"");
  const json& cluster = *cluster_it;
  if (!cluster.is_object()) {
    return ConfigError(absl::StrCat("cluster must be an object, not ", JsonTypeName(cluster)));
  }
  if (cluster.empty()) return ConfigError("cluster is empty: it lists no tasks");
  absl::flat_hash_map<std::string, std::string> seen_addresses;  // normalized -> task name
  for (auto it = cluster.begin(); it != cluster.end(); ++it) {
    auto type = ParseTaskType(it.key());
    if (!type.ok()) {
      return ConfigError(absl::StrCat("cluster.\"", it.key(), "\": ", type.status().message()));
    }
    const json& list = it.value();
    if (!list.is_array()) {
      return ConfigError(absl::StrCat(
          "cluster.\"", it.key(), "\" must be a list of \"host:port\", not ", JsonTypeName(list)));
    }
    if (list.empty()) {
      return ConfigError(
          absl::StrCat("cluster.\"", it.key(), "\" is empty; leave the key out instead"));
    }
    if ((*type == TaskType::kChief || *type == TaskType::kEvaluator) && list.size() > 1) {
      return ConfigError(absl::StrCat("cluster.\"", it.key(), "\" has ", list.size(),
                                      " tasks; at most one is allowed"));
    }
    auto& tasks = config.tasks_[static_cast<int>(*type)];
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string field = absl::StrCat("cluster.\"", it.key(), "\"[", i, "]");
      if (!list[i].is_string()) {
        return ConfigError(
            absl::StrCat(field, " must be a \"host:port\" string, not ", JsonTypeName(list[i])));
      }
      const std::string address = list[i].get<std::string>();
      auto hp = ParseHostPort(address);
      if (!hp.ok()) {
        return ConfigError(absl::StrCat(field, " \"", address, "\": ", hp.status().message()));
      }
      TaskAddress task{*type, static_cast<int>(i), *std::move(hp)};
      std::string key = absl::AsciiStrToLower(task.address.ToString());
      auto [prev, inserted] = seen_addresses.emplace(key, task.Name());
      if (!inserted) {
        return ConfigError(absl::StrCat(field, " \"", address, "\" is also the address of ",
                                        prev->second, "; every task needs its own address"));
      }
      tasks.push_back(std::move(task));
    }
  }

  // "task"
  auto task_it = root.find("task");
  if (task_it == root.end()) return ConfigError("missing \"task\"");
  const json& task = *task_it;
  if (!task.is_object()) {
    return ConfigError(absl::StrCat("task must be an object, not ", JsonTypeName(task)));
  }
  auto type_it = task.find("type");
  if (type_it == task.end()) return ConfigError("missing task.type");
  if (!type_it->is_string()) {
    return ConfigError(absl::StrCat("task.type must be a string, not ", JsonTypeName(*type_it)));
  }
  const std::string type_name = type_it->get<std::string>();
  auto type = ParseTaskType(type_name);
  if (!type.ok()) return ConfigError(absl::StrCat("task.type: ", type.status().message()));
  config.task_type_ = *type;
  // TensorFlow reads a missing index as 0.
  int64_t index = 0;
  auto index_it = task.find("index");
  if (index_it != task.end()) {
    if (!index_it->is_number_integer()) {
      return ConfigError(
          absl::StrCat("task.index must be an integer, not ",
                       index_it->is_number() ? index_it->dump() : JsonTypeName(*index_it)));
    }
    index = index_it->get<int64_t>();
    if (index < 0) return ConfigError(absl::StrCat("task.index ", index, " is negative"));
  }
  const int n = config.num_tasks(*type);
  if (n == 0 && *type == TaskType::kEvaluator && index == 0) {
    config.self_listed_ = false;  // TensorFlow's evaluator is outside the cluster
    config.task_index_ = 0;
    return config;
  }
  if (n == 0) {
    return ConfigError(absl::StrCat("task.type \"", type_name, "\" is not in the cluster"));
  }
  if (index >= n) {
    return ConfigError(absl::StrCat("task.index ", index, " out of range: cluster has ", n, " \"",
                                    type_name, "\" task", n == 1 ? "" : "s"));
  }
  config.task_index_ = static_cast<int>(index);
  return config;
}

absl::StatusOr<ClusterConfig> ClusterConfig::ForJoinedWorker(absl::string_view cluster_json,
                                                             int index, const HostPort& self) {
  PSC_ASSIGN_OR_RETURN(
      ClusterConfig config,
      Parse(absl::StrCat(R"({"cluster": )", cluster_json, R"(, "task": {"type": "chief"}})")));
  config.task_type_ = TaskType::kWorker;
  config.task_index_ = index;
  const int n = config.num_tasks(TaskType::kWorker);
  if (index < 0) return ConfigError(absl::StrCat("joined worker index ", index, " is negative"));
  if (index < n) {
    const std::string listed = config.tasks(TaskType::kWorker)[index].address.ToString();
    if (listed != self.ToString()) {
      return ConfigError(absl::StrCat("worker:", index, " is ", listed, ", not ", self.ToString()));
    }
    return config;
  }
  config.self_listed_ = false;
  config.unlisted_self_ = TaskAddress{TaskType::kWorker, index, self};
  return config;
}

absl::Status ClusterConfig::ValidateForTraining(Layout layout) const {
  if (layout == Layout::kParameterServer && num_tasks(TaskType::kPs) == 0) {
    return ConfigError(
        "cluster has no \"ps\" task; training needs at least one (or "
        "--strategy=multi_worker_mirrored, which trains without)");
  }
  if (layout == Layout::kCollective && num_tasks(TaskType::kPs) > 0) {
    return ConfigError(absl::StrCat(
        "cluster has ", num_tasks(TaskType::kPs),
        " \"ps\" task(s); --strategy=multi_worker_mirrored takes none (every worker holds a "
        "full replica of the variables)"));
  }
  if (num_tasks(TaskType::kWorker) == 0) {
    return ConfigError("cluster has no \"worker\" task; training needs at least one");
  }
  return absl::OkStatus();
}

std::string ClusterConfig::ClusterJson() const {
  json cluster = json::object();
  for (TaskType t : kAllTypes) {
    if (tasks(t).empty()) continue;
    json list = json::array();
    for (const TaskAddress& task : tasks(t)) list.push_back(task.address.ToString());
    cluster[std::string(TaskTypeName(t))] = std::move(list);
  }
  return cluster.dump();
}

std::string ClusterConfig::DryRunJson() const {
  json out = json::object();
  out["task_type"] = std::string(TaskTypeName(task_type_));
  out["task_index"] = task_index_;
  if (self_listed_ || !self().address.host.empty()) {
    out["address"] = self().address.ToString();
  } else {
    out["address"] = nullptr;  // an evaluator outside the cluster listens nowhere
  }
  out["cluster"] = json::parse(ClusterJson());
  return out.dump();
}

absl::StatusOr<WorkerBeyondCluster> FindWorkerBeyondCluster(absl::string_view text) {
  const absl::Status not_beyond = absl::NotFoundError("not a worker beyond its cluster's list");
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return not_beyond;
  const auto cluster = doc.find("cluster");
  const auto task = doc.find("task");
  if (cluster == doc.end() || task == doc.end() || !cluster->is_object() || !task->is_object()) {
    return not_beyond;
  }
  const auto type = task->find("type");
  const auto index = task->find("index");
  if (type == task->end() || *type != "worker" || index == task->end() ||
      !index->is_number_integer()) {
    return not_beyond;
  }
  const auto workers = cluster->find("worker");
  const auto chiefs = cluster->find("chief");
  if (workers == cluster->end() || !workers->is_array() || chiefs == cluster->end() ||
      !chiefs->is_array() || chiefs->size() != 1 || !(*chiefs)[0].is_string()) {
    return not_beyond;
  }
  const int64_t i = index->get<int64_t>();
  if (i < static_cast<int64_t>(workers->size()) || i > (int64_t{1} << 20)) return not_beyond;
  return WorkerBeyondCluster{(*chiefs)[0].get<std::string>(), static_cast<int>(i)};
}

absl::StatusOr<std::string> ReadTfConfigText(absl::string_view flag_value, const char* env_value) {
  if (!flag_value.empty()) {
    if (flag_value.front() != '@') return std::string(flag_value);
    std::string path(flag_value.substr(1));
    if (path.empty()) return absl::InvalidArgumentError("--tf_config=@: missing file name");
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      return absl::InvalidArgumentError(
          absl::StrCat("--tf_config=@", path, ": cannot read file: ", std::strerror(errno)));
    }
    std::stringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
  }
  if (env_value != nullptr && *env_value != '\0') return std::string(env_value);
  return absl::InvalidArgumentError(
      "TF_CONFIG is not set: set the TF_CONFIG environment variable or pass "
      "--tf_config=<json> or --tf_config=@file");
}

}  // namespace cluster
}  // namespace psc
