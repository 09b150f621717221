#include "launcher/restart_policy.h"

#include "absl/strings/str_cat.h"

namespace psc {
namespace launcher {

ExitAction DecideOnExit(cluster::TaskType type, const ExitInfo& exit, const RestartPolicy& policy,
                        int restarts_done) {
  const bool failed = !exit.exited || exit.exit_code != 0;
  if (!policy.restart_failed || type == cluster::TaskType::kChief || !failed)
    return ExitAction::kLeaveDown;
  return restarts_done < policy.max_restarts ? ExitAction::kRestart : ExitAction::kGiveUp;
}

std::string DescribeExit(const std::string& task_name, const ExitInfo& exit, ExitAction action,
                         const RestartPolicy& policy, int restarts_done) {
  std::string line = absl::StrCat(task_name, " exited: ", exit.ToString());
  switch (action) {
    case ExitAction::kLeaveDown:
      break;
    case ExitAction::kRestart:
      absl::StrAppend(&line, "; restarting (", restarts_done + 1, "/", policy.max_restarts, ")");
      break;
    case ExitAction::kGiveUp:
      absl::StrAppend(&line, "; giving up after ", restarts_done, " restart(s)");
      break;
  }
  return line;
}

}  // namespace launcher
}  // namespace psc
