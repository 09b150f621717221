#include "ps_server/metrics_exporter.h"

#include <exception>
#include <limits>

#include "absl/strings/str_cat.h"

namespace psc {
namespace ps_server {
namespace {

prometheus::MetricFamily Family(const std::string& name, const std::string& help,
                                prometheus::MetricType type, double value,
                                const std::string& shard) {
  prometheus::MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = type;
  prometheus::ClientMetric m;
  m.label.push_back({"shard", shard});
  if (type == prometheus::MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  f.metric.push_back(std::move(m));
  return f;
}

}  // namespace

std::vector<prometheus::MetricFamily> ShardMetricFamilies(const proto::ShardStats& s) {
  using prometheus::MetricType;
  const std::string shard = std::to_string(s.shard_index());
  std::vector<prometheus::MetricFamily> out = {
      Family("pscluster_ps_version", "The shard's version (global step).", MetricType::Gauge,
             s.version(), shard),
      Family("pscluster_ps_variables", "Variables on the shard.", MetricType::Gauge,
             s.num_variables(), shard),
      Family("pscluster_ps_elements", "float32 elements on the shard.", MetricType::Gauge,
             s.num_elements(), shard),
      Family("pscluster_ps_pushes_accepted_total", "Pushes accepted.", MetricType::Counter,
             s.pushes_accepted(), shard),
      Family("pscluster_ps_gradients_applied_total", "Gradients folded into an update.",
             MetricType::Counter, s.gradients_applied(), shard),
      Family("pscluster_ps_gradients_dropped_stale_total", "Sync gradients for a past step.",
             MetricType::Counter, s.gradients_dropped_stale(), shard),
      Family("pscluster_ps_gradients_discarded_total",
             "Gradients left in an accumulator the chief closed.", MetricType::Counter,
             s.gradients_discarded(), shard),
      Family("pscluster_ps_gradients_pending", "Gradients waiting in the sync accumulator.",
             MetricType::Gauge, s.gradients_pending(), shard),
      Family("pscluster_ps_pushes_duplicate_total", "Retried pushes acknowledged, not applied.",
             MetricType::Counter, s.pushes_duplicate(), shard),
      Family("pscluster_ps_requests_rejected_total", "Invalid pushes refused.", MetricType::Counter,
             s.requests_rejected(), shard),
      Family("pscluster_ps_gradients_nonfinite_skipped_total",
             "Non-finite gradients skipped under skip_nonfinite.", MetricType::Counter,
             s.gradients_nonfinite_skipped(), shard),
      Family("pscluster_ps_updates_total", "Optimizer update operations.", MetricType::Counter,
             s.updates(), shard),
      Family("pscluster_ps_pulls_total", "Pulls served.", MetricType::Counter, s.pulls(), shard),
      Family("pscluster_ps_bytes_in_total", "Gradient bytes received.", MetricType::Counter,
             s.bytes_in(), shard),
      Family("pscluster_ps_bytes_out_total", "Variable bytes sent.", MetricType::Counter,
             s.bytes_out(), shard),
      Family("pscluster_ps_apply_seconds_total", "Time spent applying updates.",
             MetricType::Counter, s.apply_seconds(), shard),
      Family("pscluster_ps_staleness_max", "Largest staleness of an applied gradient.",
             MetricType::Gauge, s.staleness_max(), shard),
      Family("pscluster_ps_ledger_entries",
             "Entries of the exactly-once ledger (watermarks and the ids above them).",
             MetricType::Gauge, s.ledger_entries(), shard),
  };
  // The staleness histogram: bucket i counts staleness i; the last bucket
  // counts everything larger.
  prometheus::MetricFamily h;
  h.name = "pscluster_ps_staleness";
  h.help = "Staleness (version at apply - version computed on) of applied gradients.";
  h.type = MetricType::Histogram;
  prometheus::ClientMetric m;
  m.label.push_back({"shard", shard});
  uint64_t cumulative = 0;
  for (int i = 0; i < s.staleness_histogram_size(); ++i) {
    cumulative += static_cast<uint64_t>(s.staleness_histogram(i));
    prometheus::ClientMetric::Bucket b;
    b.cumulative_count = cumulative;
    b.upper_bound = i + 1 == s.staleness_histogram_size() ? std::numeric_limits<double>::infinity()
                                                          : static_cast<double>(i);
    m.histogram.bucket.push_back(b);
  }
  m.histogram.sample_count = cumulative;
  m.histogram.sample_sum = s.staleness_sum();
  h.metric.push_back(std::move(m));
  out.push_back(std::move(h));
  return out;
}

class MetricsExporter::Collector : public prometheus::Collectable {
 public:
  explicit Collector(StatsSource stats) : stats_(std::move(stats)) {}
  std::vector<prometheus::MetricFamily> Collect() const override {
    return ShardMetricFamilies(stats_());
  }

 private:
  const StatsSource stats_;
};

absl::StatusOr<std::unique_ptr<MetricsExporter>> MetricsExporter::Start(const std::string& address,
                                                                        StatsSource stats) {
  std::unique_ptr<MetricsExporter> out(new MetricsExporter());
  out->collector_ = std::make_shared<Collector>(std::move(stats));
  try {  // civetweb, under prometheus-cpp, throws when it cannot listen
    out->exposer_ = std::make_unique<prometheus::Exposer>(address);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", address, ": ", e.what()));
  }
  out->exposer_->RegisterCollectable(out->collector_);
  return out;
}

int MetricsExporter::port() const {
  std::vector<int> ports = exposer_->GetListeningPorts();
  return ports.empty() ? 0 : ports[0];
}

}  // namespace ps_server
}  // namespace psc
