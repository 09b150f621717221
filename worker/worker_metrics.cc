#include "worker/worker_metrics.h"

#include <string>

#include "common/metrics/families.h"

namespace psc {
namespace worker {

std::vector<prometheus::MetricFamily> WorkerMetricFamilies(
    int task_index, const WorkerCore::Counters& c,
    const ps_client::ParameterServerClient::CallCounts& calls) {
  using metrics::Counter;
  using metrics::Gauge;
  const metrics::Labels task = {{"task", "worker:" + std::to_string(task_index)}};
  const StepSample& last = c.last_step;
  std::vector<prometheus::MetricFamily> out = {
      Counter("pscluster_worker_steps_total", "Steps computed and pushed.", c.steps, task),
      Counter("pscluster_worker_examples_total", "Examples trained on.", c.examples, task),
      Counter("pscluster_worker_compute_seconds_total",
              "Time computing gradients (the straggler's idle time included).", c.compute_seconds,
              task),
      Counter("pscluster_worker_comm_seconds_total",
              "Time pushing gradients and pulling parameters (or all-reducing).", c.comm_seconds,
              task),
      Counter("pscluster_worker_idle_seconds_total",
              "Time idled for --straggler_factor (an experiment knob).", c.idle_seconds, task),
      Gauge("pscluster_worker_step_seconds", "Wall time of the last step.", last.seconds, task),
      Gauge("pscluster_worker_examples_per_second", "Examples per second of the last step.",
            last.seconds > 0 ? static_cast<double>(last.examples) / last.seconds : 0.0, task),
      Gauge("pscluster_worker_last_step", "The global step of the last step pushed.", last.step,
            task),
      Counter("pscluster_worker_pushes_total", "Gradient pushes (one per step, to every shard).",
              calls.pushes, task),
      Counter("pscluster_worker_pulls_total", "Parameter pulls besides the pushes' own.",
              calls.pulls, task),
      Counter("pscluster_worker_retries_total",
              "Calls to the servers retried after UNAVAILABLE (a restarting shard).", calls.retries,
              task),
      Gauge("pscluster_worker_unit_running", "1 while a unit of steps runs.", c.running ? 1 : 0,
            task),
  };
  prometheus::MetricFamily units =
      Counter("pscluster_worker_units_total", "Units of steps ended, by outcome.", c.units_done,
              {task[0], {"outcome", "done"}});
  units.metric.push_back(
      Counter("", "", c.units_failed, {task[0], {"outcome", "failed"}}).metric[0]);
  out.push_back(std::move(units));
  return out;
}

}  // namespace worker
}  // namespace psc
