#include "launcher/launch_plan.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "nlohmann/json.hpp"

namespace psc {
namespace launcher {

std::string PlannedTask::Name() const {
  return absl::StrCat(cluster::TaskTypeName(type), ":", index);
}

absl::StatusOr<std::vector<PlannedTask>> PlanLocalCluster(
    const LaunchOptions& options,
    const std::function<absl::StatusOr<std::vector<int>>(int)>& pick_ports) {
  constexpr int kMaxTasks = 64;
  if (options.collective && options.num_ps != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--ps=", options.num_ps,
                     ": --strategy=multi_worker_mirrored runs no ps task (every worker holds a "
                     "full replica)"));
  }
  if (!options.collective && (options.num_ps < 1 || options.num_ps > kMaxTasks)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--ps=", options.num_ps, ": need 1 to ", kMaxTasks, " servers"));
  }
  if (options.num_workers < 1 || options.num_workers > kMaxTasks) {
    return absl::InvalidArgumentError(
        absl::StrCat("--workers=", options.num_workers, ": need 1 to ", kMaxTasks, " workers"));
  }
  const int n = options.num_ps + options.num_workers + (options.evaluator ? 1 : 0) + 1;
  PSC_ASSIGN_OR_RETURN(auto ports, pick_ports(n));
  if (static_cast<int>(ports.size()) != n) {
    return absl::InternalError(
        absl::StrCat("port picker returned ", ports.size(), " ports, want ", n));
  }
  std::vector<PlannedTask> tasks;
  auto add = [&](cluster::TaskType type, int index, const char* binary) {
    const int port = ports[tasks.size()];
    tasks.push_back({type, index, absl::StrCat("127.0.0.1:", port), binary, ""});
  };
  for (int i = 0; i < options.num_ps; ++i) add(cluster::TaskType::kPs, i, "ps_server");
  for (int i = 0; i < options.num_workers; ++i) add(cluster::TaskType::kWorker, i, "worker");
  if (options.evaluator) add(cluster::TaskType::kEvaluator, 0, "evaluator");
  add(cluster::TaskType::kChief, 0, "chief");

  std::set<std::string> seen;
  nlohmann::json cluster = nlohmann::json::object();
  for (const PlannedTask& t : tasks) {
    if (!seen.insert(t.address).second) {
      return absl::InternalError(absl::StrCat("port picker returned ", t.address, " twice"));
    }
    cluster[std::string(cluster::TaskTypeName(t.type))].push_back(t.address);
  }
  for (PlannedTask& t : tasks) {
    nlohmann::json j = {
        {"cluster", cluster},
        {"task", {{"type", std::string(cluster::TaskTypeName(t.type))}, {"index", t.index}}}};
    t.tf_config = j.dump();
  }
  return tasks;
}

int SharedIntraOpThreads(int cores, int workers) {
  return std::max(1, std::max(1, cores) / std::max(1, workers));
}

}  // namespace launcher
}  // namespace psc
