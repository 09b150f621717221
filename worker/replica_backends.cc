#include "worker/replica_backends.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/logging.h"
#include "common/base/status_macros.h"
#include "common/compute/cpu_backend.h"
#include "common/compute/cuda/cuda_types.h"

namespace psc {
namespace worker {
namespace {

std::string ShapeText(const compute::Shape& s) {
  return absl::StrCat("[", absl::StrJoin(s, ","), "]");
}

std::string SpecText(const compute::OpSpec& spec) {
  return absl::StrCat(spec.op, " x ", ShapeText(spec.input),
                      spec.kernel.empty() ? "" : absl::StrCat(" kernel ", ShapeText(spec.kernel)));
}

absl::StatusOr<std::unique_ptr<compute::ComputeBackend>> MakeGpuBackend(gpu::GpuApi* gpu,
                                                                        const DeviceOptions& o,
                                                                        const LogicalDevice& d) {
  if (gpu == nullptr) {
    return absl::FailedPreconditionError("the GPU plugin is not loaded");
  }
  compute::CudaBackendOptions c;
  c.device = d.gpu;
  c.logical_index = d.logical_index;
  c.logical_count = d.logical_count;
  c.allow_tf32 = o.allow_tf32;
  c.cudnn_autotune = o.cudnn_autotune;
  c.memory_growth = o.memory_growth;
  c.memory_limit_bytes = d.memory_limit_bytes;
  return gpu->CreateBackend(c);
}

// The first op of `ops` the backend does not support, or "".
std::string Unsupported(const compute::ComputeBackend& b, const std::vector<compute::OpSpec>& ops) {
  for (const compute::OpSpec& spec : ops) {
    if (!b.Supports(spec)) return SpecText(spec);
  }
  return "";
}

// The backend ops a layer runs, for the placement log.
std::string LayerOps(const compute::LayerSpec& l) {
  using compute::LayerSpec;
  const bool max = l.pooling == compute::GlobalPooling::kMax;
  switch (l.kind) {
    case LayerSpec::kConv:
      return absl::StrCat("Conv2D ", l.window.Text(), l.bias ? " (+bias" : " (no bias",
                          l.relu ? ", ReLU)" : ")");
    case LayerSpec::kPool:
      return absl::StrCat(max ? "MaxPool " : "AvgPool ", l.window.Text());
    case LayerSpec::kDense:
      return absl::StrCat("Dense", l.bias ? " (+bias" : " (no bias", l.relu ? ", ReLU)" : ")");
    case LayerSpec::kActivation:
      return "Activation";
    case LayerSpec::kGlobalPool:
      return max ? "GlobalPool (max)" : "GlobalPool (average)";
    case LayerSpec::kDropout:
      return "Multiply (Dropout)";
    case LayerSpec::kBatchNorm:
      return "BatchNorm";
    case LayerSpec::kAdd:
      return "Add";
    case LayerSpec::kMultiply:
      return "Multiply";
    case LayerSpec::kAverage:
      return "Add, Scale (Average)";
    case LayerSpec::kSubtract:
      return "Scale, Add (Subtract)";
    case LayerSpec::kConcat:
      return "CopyBlock (Concatenate)";
    case LayerSpec::kMaximum:
      return "Extremum (Maximum)";
    case LayerSpec::kMinimum:
      return "Extremum (Minimum)";
    case LayerSpec::kFlatten:
      return "CopyBlock (Flatten)";
    case LayerSpec::kInput:
      return "CopyBlock (Input)";
    case LayerSpec::kZeroPad:
      return "CopyBlock (ZeroPadding2D)";
    case LayerSpec::kCrop:
      return "CopyBlock (Cropping2D)";
    case LayerSpec::kUpSample:
      return absl::StrCat("Conv2DBackwardData ", l.window.Text(), " (UpSampling2D)");
    case LayerSpec::kConvTranspose:
      return absl::StrCat("Conv2DBackwardData ", l.window.Text(), " (Conv2DTranspose)");
    case LayerSpec::kBiasAdd:
      return absl::StrCat("Conv2D ", l.window.Text(), " (bias", l.relu ? ", ReLU)" : ")");
    case LayerSpec::kEmbedding:
      return "EmbeddingLookup";
    case LayerSpec::kDot:
      return "BatchMatMul (Dot)";
    case LayerSpec::kLayerNorm:
      return "LayerNorm";
    case LayerSpec::kPermute:
      return "Transpose (Permute)";
    case LayerSpec::kRepeat:
      return "CopyBlock (RepeatVector)";
    case LayerSpec::kScale:
      return "Scale";
    case LayerSpec::kMask:
      return l.causal ? "Add (causal mask)"
                      : "Add (attention mask)";  // Keras masks: BatchMatMul too
    case LayerSpec::kLSTM:
      return l.sources.size() == 2 ? "Dense, LstmCell and SelectRows per step (LSTM, masked)"
                                   : "LstmLayer, or Dense and LstmCell per step (LSTM)";
    case LayerSpec::kGRU:
      return l.sources.size() == 2 ? "Dense, GruCell and SelectRows per step (GRU, masked)"
                                   : "Dense, GruCell per step (GRU)";
    case LayerSpec::kSimpleRNN:
      return l.sources.size() == 2 ? "Dense, Activate and SelectRows per step (SimpleRNN, masked)"
                                   : "Dense, Activate per step (SimpleRNN)";
    case LayerSpec::kSequenceMask:
      return "SequenceMask (Keras mask)";
    case LayerSpec::kMaskRows:
      return "SelectRows (Masking)";
    case LayerSpec::kMaskedMean:
      return "MaskedMean (GlobalAveragePooling1D, masked)";
  }
  return "?";
}

void LogPlacement(const MirroredReplicas& replicas, const compute::Model& model) {
  for (int r = 0; r < replicas.size(); ++r) {
    const std::string where =
        absl::StrCat(replicas.device(r).name, " (", replicas.backend(r).name(), ")");
    for (const tensor::VariableShape& v : model.variables()) {
      base::Logf("device placement: replica %d variable %s %s -> %s", r, v.name, ShapeText(v.shape),
                 where);
    }
    const compute::LayerGraph& graph = model.graph();
    for (int i = 0; i < graph.num_layers(); ++i) {
      const compute::LayerSpec& l = model.layers()[i];
      base::Logf("device placement: replica %d op %s %s, output %s, and its gradients -> %s", r,
                 l.name, LayerOps(l),
                 compute::TensorTypeText(graph.tensor(compute::LayerGraph::OutputOf(i))), where);
    }
    base::Logf("device placement: replica %d op SoftmaxCrossEntropy -> %s", r, where);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<MirroredReplicas>> CreateReplicas(const DeviceSetup& setup,
                                                                 const compute::Model* model,
                                                                 int intra_op_threads,
                                                                 int64_t replica_batch,
                                                                 compute::ConvAlgorithm conv) {
  const DevicePlan plan = setup.plan.devices.empty() ? CpuOnlyPlan(0) : setup.plan;
  for (const std::string& w : plan.warnings) base::Logf("warning: %s", w);
  const std::vector<compute::OpSpec> ops = compute::ModelOpSpecs(*model, replica_batch);
  int cpu_replicas = 0;
  for (const LogicalDevice& d : plan.devices) cpu_replicas += d.kind == LogicalDevice::kCpu;

  std::vector<ReplicaBackend> replicas;
  for (const LogicalDevice& d : plan.devices) {
    if (d.kind == LogicalDevice::kCpu) {
      replicas.push_back({d, nullptr});
      continue;
    }
    absl::StatusOr<std::unique_ptr<compute::ComputeBackend>> b =
        MakeGpuBackend(setup.gpu, setup.options, d);
    std::string problem;
    if (!b.ok()) {
      problem = std::string(b.status().message());
      if (!setup.options.soft_device_placement) {
        return absl::Status(b.status().code(),
                            absl::StrCat(d.name, ": ", problem,
                                         absl::IsFailedPrecondition(b.status())
                                             ? " (pass --soft_device_placement to fall back to "
                                               "the CPU)"
                                             : ""));
      }
    } else if (std::string op = Unsupported(**b, ops); !op.empty()) {
      problem = absl::StrCat((*b)->name(), " does not support ", op);
      if (!setup.options.soft_device_placement) {
        return absl::UnimplementedError(absl::StrCat(
            d.name, ": ", problem, "; pass --soft_device_placement to run it on the CPU"));
      }
    }
    if (problem.empty()) {
      replicas.push_back({d, *std::move(b)});
      continue;
    }
    base::Logf("warning: %s: %s; this replica trains on the CPU (--soft_device_placement)", d.name,
               problem);
    LogicalDevice cpu = d;
    cpu.kind = LogicalDevice::kCpu;
    cpu.gpu = -1;
    cpu.memory_limit_bytes = 0;
    cpu.name = absl::StrCat(d.name.substr(0, d.name.rfind("GPU:")), "CPU:0");
    replicas.push_back({cpu, nullptr});
    ++cpu_replicas;
  }
  // CPU backends last, once their number is known: they share the cores.
  int threads = intra_op_threads;
  if (cpu_replicas > 1) {
    const int total = intra_op_threads > 0 ? intra_op_threads
                                           : static_cast<int>(std::thread::hardware_concurrency());
    threads = std::max(1, total / cpu_replicas);
  }
  const std::vector<compute::DType> dtypes = model->ComputeDtypes();
  if (cpu_replicas > 0) PSC_RETURN_IF_ERROR(compute::CheckCpuComputeDtypes(dtypes));
  bool logged = false;
  for (ReplicaBackend& r : replicas) {
    if (r.backend != nullptr) continue;
    PSC_ASSIGN_OR_RETURN(auto b,
                         compute::CreateCpuBackend(compute::CpuBackendOptions{threads, conv}));
    r.backend = std::move(b);
    if (!logged) {
      base::Logf("cpu compute: %s", compute::DescribeConvAlgorithm(conv));
      logged = true;
    }
  }
  PSC_ASSIGN_OR_RETURN(auto mirrored,
                       MirroredReplicas::Create(model, std::move(replicas), setup.gpu));
  if (setup.options.log_device_placement) LogPlacement(*mirrored, *model);
  return mirrored;
}

void LogConvAlgorithms(const MirroredReplicas& replicas) {
  if (replicas.gpu() == nullptr) return;
  for (int r = 0; r < replicas.size(); ++r) {
    auto lines = replicas.gpu()->DescribeConvAlgorithms(replicas.backend(r));
    if (!lines.ok()) continue;
    for (const std::string& line : *lines) {
      base::Logf("cudnn: replica %d %s %s", r, replicas.device(r).name, line);
    }
  }
}

void LogDeviceMemory(const MirroredReplicas& replicas) {
  if (replicas.gpu() == nullptr) return;
  for (int r = 0; r < replicas.size(); ++r) {
    auto stats = replicas.gpu()->MemoryStats(replicas.backend(r));
    if (!stats.ok()) continue;
    base::Logf("device memory: replica %d %s holds %d MiB (peak in use %d MiB, limit %s)", r,
               replicas.device(r).name, stats->held_bytes >> 20, stats->peak_in_use_bytes >> 20,
               stats->limit_bytes > 0 ? absl::StrCat(stats->limit_bytes >> 20, " MiB") : "none");
  }
}

}  // namespace worker
}  // namespace psc
