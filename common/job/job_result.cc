#include "common/job/job_result.h"

#include <openssl/evp.h>
#include <sys/resource.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/build_info.h"
#include "common/base/status_context.h"
#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"

namespace psc {
namespace job {

void SetJob(const proto::JobSpec& job, absl::Time start, JobResult* result) {
  proto::JobSpec shown = job;
  // The placement follows from the model and the servers; a model file's
  // Keras config is the file's content (the "model" field names the file).
  shown.clear_placement();
  shown.clear_model_config();
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string json;
  if (!google::protobuf::util::MessageToJsonString(shown, &json, options).ok()) json.clear();
  result->job_json = json;
  result->seed = job.seed();
  result->start_time = absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", start, absl::UTCTimeZone());
}

namespace {

// {name: value} of the compiled metrics on the test split; null untested.
nlohmann::json TestMetrics(const JobResult& r, bool tested) {
  if (!tested) return nullptr;
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [name, value] : r.test_metrics) out[name] = value;
  return out;
}

}  // namespace

std::string JobResultJson(const JobResult& r) {
  nlohmann::json epochs = nlohmann::json::array();
  for (const EpochRecord& e : r.epochs) {
    nlohmann::json record = {{"epoch", e.epoch}, {"loss", e.loss}};
    // Keras's History keys: a regression has no accuracy (NaN here).
    if (!std::isnan(e.accuracy)) record["accuracy"] = e.accuracy;
    record["val_loss"] = e.val_loss;
    if (!std::isnan(e.accuracy)) record["val_accuracy"] = e.val_accuracy;
    record["wall_s"] = e.wall_s;
    if (e.learning_rate > 0) record["learning_rate"] = e.learning_rate;
    // Keras's History keys: the metric's name, and val_ before it.
    for (const auto& [name, value] : e.metrics) record[name] = value;
    for (const auto& [name, value] : e.val_metrics) record["val_" + name] = value;
    record["examples"] = {{"expected", e.examples_expected},
                          {"trained", e.examples_trained},
                          {"dropped", e.examples_dropped},
                          {"skipped", e.examples_skipped},
                          {"lost", e.examples_lost}};
    epochs.push_back(record);
  }
  nlohmann::json evaluations = nlohmann::json::array();
  for (const EvaluationRecord& e : r.evaluations) {
    evaluations.push_back({{"step", e.step},
                           {"train_s", e.train_s},
                           {"examples_seen", e.examples_seen},
                           {"val_loss", e.val_loss},
                           {"val_accuracy", e.val_accuracy}});
  }
  nlohmann::json workers = nlohmann::json::array();
  for (const WorkerRecord& w : r.workers) {
    const double steps = static_cast<double>(std::max<int64_t>(1, w.steps));
    workers.push_back({{"worker", w.worker},
                       {"straggler_factor", w.straggler_factor},
                       {"steps", w.steps},
                       {"step_s", (w.compute_s + w.comm_s) / steps},
                       {"compute_s_per_step", w.compute_s / steps},
                       {"idle_s", w.idle_s},
                       {"data_wait_s", w.data_wait_s},
                       {"examples", w.examples},
                       {"examples_dropped", w.examples_dropped},
                       {"examples_skipped", w.examples_skipped}});
  }
  nlohmann::json units = nlohmann::json::array();
  for (const UnitRecord& u : r.units) {
    nlohmann::json unit = {{"first_step", u.first_step},
                           {"end", u.end},
                           {"slot", u.slot},
                           {"num_slots", u.num_slots},
                           {"worker", u.worker}};
    if (u.push_as >= 0) unit["push_as"] = u.push_as;
    units.push_back(std::move(unit));
  }
  nlohmann::json membership = nlohmann::json::array();
  for (const MembershipRecord& m : r.membership) {
    membership.push_back(
        {{"step", m.step}, {"worker", m.worker}, {"change", m.change}, {"why", m.why}});
  }
  nlohmann::json preprocessing = {{"kind", r.data.preprocessing}};
  if (r.data.preprocessing == "standardize" && !r.data.feature_mean.empty()) {
    preprocessing["axis"] = "last";  // one pair per feature
    preprocessing["mean"] = r.data.feature_mean;
    preprocessing["std"] = r.data.feature_std;
  } else if (r.data.preprocessing == "standardize") {
    preprocessing["axis"] = "none";
    preprocessing["mean"] = r.data.mean;
    preprocessing["std"] = r.data.std;
  } else if (r.data.preprocessing == "rescale") {
    preprocessing["scale"] = r.data.scale;
    if (r.data.offset != 0) preprocessing["offset"] = r.data.offset;
  }
  if (!r.data.preprocessing_layer.empty()) {
    preprocessing["layer"] = r.data.preprocessing_layer;  // the model's own
  }
  nlohmann::json data = {{"source", r.data.source},
                         {"preprocessing", preprocessing},
                         {"train_examples", r.data.train_examples},
                         {"validation_examples", r.data.validation_examples},
                         {"test_examples", r.data.test_examples}};
  if (!r.data.sample_weight.empty()) data["sample_weight"] = r.data.sample_weight;
  if (r.data.read_seconds >= 0) {
    nlohmann::json skipped = nlohmann::json::object();
    int64_t total = 0;
    for (const auto& [file, n] : r.data.records_skipped) {
      skipped[file] = n;
      total += n;
    }
    data["records_skipped"] = total;
    data["records_skipped_per_file"] = skipped;
    data["read_seconds"] = r.data.read_seconds;
    data["read"] = r.data.streamed ? "stream" : "whole";
    if (r.data.streamed) {
      data["count_seconds"] = r.data.count_seconds;
      data["files_counted"] = r.data.files_counted;
    }
  }
  const bool tested = r.data.test_examples > 0 || r.data.source.empty();
  // When and why training stopped: every epoch, or early.
  nlohmann::json stopped = {{"early", r.stop.stopped_epoch > 0},
                            {"epochs_trained", static_cast<int64_t>(r.epochs.size())}};
  if (r.stop.stopped_epoch > 0) {
    stopped["epoch"] = r.stop.stopped_epoch;
    stopped["reason"] = r.stop.reason;
  }
  if (r.stop.best_epoch > 0) {
    stopped["best_epoch"] = r.stop.best_epoch;
    stopped["restored_best_weights"] = r.stop.restored_best_weights;
  }
  nlohmann::json job = nlohmann::json::parse(r.job_json, nullptr, /*allow_exceptions=*/false);
  nlohmann::json j = {
      {"pscluster_version", base::Version()},
      {"git_commit", base::GitCommit()},
      {"start_time", r.start_time},
      {"seed", r.seed},
      {"job", job.is_discarded() ? nlohmann::json() : job},
      {"mode", r.mode},
      {"strategy", r.strategy},
      {"model", r.model},
      {"compute_dtypes", r.compute_dtypes},
      {"loss_scale",
       r.loss_scale.has_value()
           ? nlohmann::json{{"initial", r.loss_scale->initial},
                            {"growth_steps", r.loss_scale->growth_steps},
                            {"final", r.loss_scale->final_scale},
                            {"steps_skipped", r.loss_scale->steps_skipped},
                            {"gradients_skipped", r.loss_scale->gradients_skipped},
                            {"shard_scales", r.loss_scale->shard_scales},
                            {"shard_steps_skipped", r.loss_scale->shard_steps_skipped}}
           : nlohmann::json()},
      {"optimizer", r.optimizer},
      {"training_stopped", stopped},
      {"cluster", {{"ps", r.num_ps}, {"workers", r.num_workers}}},
      {"batch_size", r.batch_size},
      {"steps", r.steps},
      {"steps_redone", r.steps_redone},
      {"epochs", epochs},
      {"test_loss", tested ? nlohmann::json(r.test_loss) : nlohmann::json()},
      {"test_accuracy", tested ? nlohmann::json(r.test_accuracy) : nlohmann::json()},
      {"test_metrics", TestMetrics(r, tested)},
      {"data", data},
      {"wall_s", r.wall_s},
      {"examples_per_sec", r.examples_per_sec},
      {"gradients_accepted", r.gradients_accepted},
      {"gradients_applied", r.gradients_applied},
      {"gradients_dropped_stale", r.gradients_dropped_stale},
      {"gradients_discarded", r.gradients_discarded},
      {"staleness",
       {{"mean", r.staleness_mean},
        {"p99", r.staleness_p99},
        {"max", r.staleness_max},
        {"histogram", r.staleness_histogram}}},
      {"staleness_bound", r.staleness_bound},
      {"replicas_to_aggregate", r.replicas_to_aggregate},
      {"eval_every_steps", r.eval_every_steps},
      {"train_s", r.train_s},
      {"examples_seen", r.examples_seen},
      {"evaluations", evaluations},
      {"workers", workers},
      {"checkpoints_written", r.checkpoints_written},
      {"workers_lost", r.workers_lost},
      {"recoveries", r.recoveries},
      {"workers_joined", r.workers_joined},
      {"workers_rejoined", r.workers_rejoined},
      {"workers_drained", r.workers_drained},
      {"membership", membership},
      {"units", units},
      {"regroups", r.regroups},
      {"comm_s", r.comm_s},
      {"comm_hidden_fraction", r.comm_hidden_fraction},
      {"worker_compute_s", r.worker_compute_s},
      {"worker_comm_s", r.worker_comm_s},
      {"final_variables_sha256", r.final_variables_sha256},
      {"threads", r.threads},
  };
  if (r.peak_rss_mb > 0) j["peak_rss_mb"] = r.peak_rss_mb;
  return j.dump(1);
}

double PeakRssMb() {
  struct rusage usage;
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // KiB on Linux
}

std::string FinalLine(const JobResult& r) {
  const std::string test =
      r.data.test_examples > 0 || r.data.source.empty()
          ? absl::StrCat(absl::StrFormat("test_loss: %.4f", r.test_loss),
                         std::isnan(r.test_accuracy)  // a regression's
                             ? ""
                             : absl::StrFormat(" - test_accuracy: %.4f", r.test_accuracy))
          : std::string("no test split");
  return absl::StrFormat("%s - %.1fs - %.0f training examples/s (evaluation excluded)", test,
                         r.wall_s, r.examples_per_sec);
}

absl::Status WriteJobResult(const std::string& path, const JobResult& result, io::FileSystem* fs) {
  if (fs == nullptr) fs = io::LocalFileSystem();
  absl::Status s = fs->WriteFileAtomically(path, JobResultJson(result) + "\n");
  if (s.ok()) return s;
  return base::Prefix(s, absl::StrCat("cannot write the result file ", path));
}

std::string VariablesSha256(
    std::vector<std::pair<std::string, absl::Span<const float>>> variables) {
  std::sort(variables.begin(), variables.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  VariablesDigest digest;
  for (const auto& [name, values] : variables) digest.Add(values);
  return digest.Finish();
}

VariablesDigest::VariablesDigest() : ctx_(EVP_MD_CTX_new()) {
  EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), EVP_sha256(), nullptr);
}

VariablesDigest::~VariablesDigest() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }

void VariablesDigest::Add(absl::Span<const float> values) {
  EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), values.data(), values.size() * sizeof(float));
}

std::string VariablesDigest::Finish() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), digest, &len);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(digest), len));
}

}  // namespace job
}  // namespace psc
