// A ComputeBackend decorator for benchmarks: forwards every op to the backend
// it wraps and adds the op's wall time to a table keyed by op and shapes, so
// a bench can print where a training step's time goes, layer by layer and
// direction by direction. Thread-compatible, as backends are.
#ifndef PSC_BENCH_TIMED_BACKEND_H_
#define PSC_BENCH_TIMED_BACKEND_H_

#include <map>
#include <memory>
#include <string>

#include "common/compute/forwarding_backend.h"
#include "common/compute/kernel_registry.h"

namespace psc {
namespace bench {

class TimedBackend : public compute::ForwardingBackend {
 public:
  using DeviceTensor = compute::DeviceTensor;
  using LossOptions = compute::LossOptions;
  using Window = compute::Window;

  // `inner` is not owned and must outlive this.
  explicit TimedBackend(compute::ComputeBackend* inner) : ForwardingBackend(inner) {}

  // "Conv2DBackwardData [128,14,14,64] k[3,3,32,64]" -> total seconds.
  const std::map<std::string, double>& seconds() const { return seconds_; }
  void Reset() { seconds_.clear(); }

  absl::Status CopyBytesFromHost(const void* src, size_t bytes, DeviceTensor* dst) override;
  absl::Status CopyBytesToHost(const DeviceTensor& src, void* dst, size_t bytes) override;
  // The registered ops (elementwise_ops.h), under their names.
  absl::Status Run(absl::string_view op, absl::Span<const DeviceTensor* const> in,
                   const compute::OpAttrs& attrs, absl::Span<DeviceTensor* const> out) override;

 private:
  // Runs `op`, adding its time under "<name> <main> k<kernel>".
  template <typename F>
  absl::Status Time(const std::string& name, const compute::Shape& main,
                    const compute::Shape& kernel, F&& op);

  std::map<std::string, double> seconds_;
};

}  // namespace bench
}  // namespace psc

#endif  // PSC_BENCH_TIMED_BACKEND_H_
