#include "ps_server/shard_metrics.h"

#include <string>

#include "common/metrics/families.h"

namespace psc {
namespace ps_server {

std::vector<prometheus::MetricFamily> ShardMetricFamilies(const proto::ShardStats& s) {
  using metrics::Counter;
  using metrics::Gauge;
  const metrics::Labels shard = {{"shard", std::to_string(s.shard_index())}};
  std::vector<prometheus::MetricFamily> out = {
      Gauge("pscluster_ps_version", "The shard's version (global step).", s.version(), shard),
      Gauge("pscluster_ps_variables", "Variables on the shard.", s.num_variables(), shard),
      Gauge("pscluster_ps_elements", "float32 elements on the shard.", s.num_elements(), shard),
      Counter("pscluster_ps_pushes_accepted_total", "Pushes accepted.", s.pushes_accepted(), shard),
      Counter("pscluster_ps_gradients_applied_total", "Gradients folded into an update.",
              s.gradients_applied(), shard),
      Counter("pscluster_ps_gradients_dropped_stale_total", "Sync gradients for a past step.",
              s.gradients_dropped_stale(), shard),
      Counter("pscluster_ps_gradients_discarded_total",
              "Gradients left in an accumulator the chief closed.", s.gradients_discarded(), shard),
      Gauge("pscluster_ps_gradients_pending", "Gradients waiting in the sync accumulator.",
            s.gradients_pending(), shard),
      Counter("pscluster_ps_pushes_duplicate_total", "Retried pushes acknowledged, not applied.",
              s.pushes_duplicate(), shard),
      Counter("pscluster_ps_requests_rejected_total", "Invalid pushes refused.",
              s.requests_rejected(), shard),
      Counter("pscluster_ps_gradients_nonfinite_skipped_total",
              "Non-finite gradients skipped under skip_nonfinite.", s.gradients_nonfinite_skipped(),
              shard),
      Counter("pscluster_ps_updates_total", "Optimizer update operations.", s.updates(), shard),
      Counter("pscluster_ps_pulls_total", "Pulls served.", s.pulls(), shard),
      Counter("pscluster_ps_bytes_in_total", "Gradient bytes received.", s.bytes_in(), shard),
      Counter("pscluster_ps_bytes_out_total", "Variable bytes sent.", s.bytes_out(), shard),
      Counter("pscluster_ps_apply_seconds_total", "Time spent applying updates.", s.apply_seconds(),
              shard),
      Gauge("pscluster_ps_staleness_max", "Largest staleness of an applied gradient.",
            s.staleness_max(), shard),
      Gauge("pscluster_ps_pulls_waiting", "Pulls waiting for a version the shard has not reached.",
            s.pulls_waiting(), shard),
      Gauge("pscluster_ps_ledger_entries",
            "Entries of the exactly-once ledger (watermarks and the ids above them).",
            s.ledger_entries(), shard),
      Counter("pscluster_ps_push_parts_received_total",
              "Parts of pushes in parts (worker --overlap) taken.", s.push_parts_received(), shard),
      Counter("pscluster_ps_push_parts_abandoned_total",
              "Parts dropped before their push was whole (replaced by a newer step, discarded, "
              "restored over).",
              s.push_parts_abandoned(), shard),
  };
  if (s.loss_scale() > 0) {  // only under loss scaling
    out.push_back(Gauge("pscluster_ps_loss_scale",
                        "The dynamic loss scale the next step computes with.", s.loss_scale(),
                        shard));
    out.push_back(Counter("pscluster_ps_steps_skipped_overflow_total",
                          "Updates skipped because a gradient overflowed (loss scaling).",
                          s.steps_skipped_overflow(), shard));
    out.push_back(Counter("pscluster_ps_gradients_skipped_overflow_total",
                          "Accepted gradients not applied because their step overflowed.",
                          s.gradients_skipped_overflow(), shard));
  }
  // Staleness in exponential buckets: the shard keeps one count per value.
  const std::vector<int64_t> linear(s.staleness_histogram().begin(), s.staleness_histogram().end());
  const std::vector<double> bounds = metrics::ExponentialBounds(kStalenessBounds);
  out.push_back(
      metrics::Histogram("pscluster_ps_staleness",
                         "Staleness (version at apply - version computed on) of applied gradients.",
                         bounds, metrics::Rebucket(linear, bounds), s.staleness_sum(), shard));
  return out;
}

}  // namespace ps_server
}  // namespace psc
