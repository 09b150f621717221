// bench/keras_step_breakdown: where a training step of a Keras model goes on
// the CPU backend, op by op. Takes the worker's flags for the model and the
// data (--model=FILE.keras --data=FILE.npz --batch_size --intra_op_threads
// --conv_algorithm ...), runs --warmup steps, then --steps steps through a
// timing wrapper (bench/timed_backend.h), and prints one JSON object: the
// model, the threads, the batch, ms per step, and breakdown_ms: each op by
// its name and shapes, largest first (what bench/sequence_vs_keras_fit.sh
// reports beside its ratios). A step is the worker's: gather, forward,
// loss, backward, gradients copied to the host.
#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/time/clock.h"
#include "bench/timed_backend.h"
#include "common/compute/cpu_backend.h"
#include "common/compute/model.h"
#include "common/data/batch_plan.h"
#include "common/data/dataset.h"
#include "common/data/prefetcher.h"
#include "common/job/job_data.h"
#include "common/job/job_flags.h"
#include "common/job/job_model.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(int, warmup, 3, "Steps run before the timed ones.");
ABSL_FLAG(int, timed_steps, 5, "Steps timed op by op.");

namespace {

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "keras_step_breakdown: %s\n", std::string(s.message()).c_str());
  return s.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
}

double Round(double v) { return static_cast<double>(static_cast<int64_t>(v * 100 + 0.5)) / 100; }

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int warmup = absl::GetFlag(FLAGS_warmup), steps = absl::GetFlag(FLAGS_timed_steps);
  if (warmup < 0 || steps < 1) {
    std::fprintf(stderr, "keras_step_breakdown: --warmup >= 0 and --timed_steps >= 1\n");
    return 2;
  }
  auto job = psc::job::JobSpecFromFlags();
  if (!job.ok()) return Fail(job.status());
  auto model = psc::job::ModelForJob(*job);
  if (!model.ok()) return Fail(model.status());
  auto data = psc::job::LoadJobData(*job, *model);
  if (!data.ok()) return Fail(data.status());
  psc::data::BatchPlanOptions plan_options;
  plan_options.num_examples = data->splits.train.count;
  plan_options.batch_size = job->batch_size();
  plan_options.seed = job->seed();
  auto plan = psc::data::BatchPlan::Create(plan_options);
  if (!plan.ok()) return Fail(plan.status());
  const int threads = std::max(1, job->intra_op_threads());
  auto backend = psc::compute::CreateCpuBackend(psc::job::CpuOptionsForJob(*job, threads));
  if (!backend.ok()) return Fail(backend.status());
  psc::bench::TimedBackend timed(backend->get());
  auto exec = psc::compute::Executor::Create(&*model, &timed);
  if (!exec.ok()) return Fail(exec.status());
  auto params = psc::job::InitialParameters(*job, *model);
  if (!params.ok()) return Fail(params.status());
  if (absl::Status s = (*exec)->SetParameters(*params); !s.ok()) return Fail(s);
  const float scale = 1.0f / static_cast<float>(job->batch_size());
  std::vector<std::vector<float>> grads;
  int64_t step = 0;
  auto run = [&](int count) -> absl::Status {
    for (int i = 0; i < count; ++i, ++step) {
      auto indices = plan->Indices(step, 0, 1);
      if (!indices.ok()) return indices.status();
      auto b = psc::data::GatherBatch(data->splits.train, *indices, step);
      if (!b.ok()) return b.status();
      psc::compute::StepResult result;
      absl::Status s = (*exec)->ComputeGradients(b->images, b->labels, scale, &result);
      if (s.ok()) s = (*exec)->CopyGradients(&grads);
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  };
  if (absl::Status s = run(warmup); !s.ok()) return Fail(s);
  timed.Reset();
  const absl::Time start = absl::Now();
  if (absl::Status s = run(steps); !s.ok()) return Fail(s);
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  std::vector<std::pair<double, std::string>> ops;
  double in_ops = 0;
  for (const auto& [key, s] : timed.seconds()) {
    ops.push_back({s, key});
    in_ops += s;
  }
  std::sort(ops.rbegin(), ops.rend());
  nlohmann::ordered_json ms = nlohmann::ordered_json::object();
  for (const auto& [s, key] : ops) ms[key] = Round(1000 * s / steps);
  ms["(outside ops: gather, bookkeeping)"] = Round(1000 * (seconds - in_ops) / steps);
  nlohmann::ordered_json out = {{"bench", "keras_step_breakdown"},
                                {"model", job->model()},
                                {"threads", threads},
                                {"batch", job->batch_size()},
                                {"timed_steps", steps},
                                {"ms_per_step", Round(1000 * seconds / steps)},
                                {"breakdown_ms", ms}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
