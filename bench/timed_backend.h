// A ComputeBackend decorator for benchmarks: forwards every op to the backend
// it wraps and adds the op's wall time to a table keyed by op and shapes, so
// a bench can print where a training step's time goes, layer by layer and
// direction by direction. Thread-compatible, as backends are.
#ifndef PSC_BENCH_TIMED_BACKEND_H_
#define PSC_BENCH_TIMED_BACKEND_H_

#include <map>
#include <memory>
#include <string>

#include "common/compute/backend.h"

namespace psc {
namespace bench {

class TimedBackend : public compute::ComputeBackend {
 public:
  // `inner` is not owned and must outlive this.
  explicit TimedBackend(compute::ComputeBackend* inner) : inner_(inner) {}

  // "Conv2DBackwardData [128,14,14,64] k[3,3,32,64]" -> total seconds.
  const std::map<std::string, double>& seconds() const { return seconds_; }
  void Reset() { seconds_.clear(); }

  std::string name() const override { return inner_->name(); }
  bool Supports(const compute::OpSpec& spec) const override { return inner_->Supports(spec); }
  absl::StatusOr<std::unique_ptr<compute::DeviceTensor>> Allocate(
      const compute::Shape& shape) override {
    return inner_->Allocate(shape);
  }
  absl::Status CopyFromHost(absl::Span<const float> src, compute::DeviceTensor* dst) override;
  absl::Status CopyToHost(const compute::DeviceTensor& src, absl::Span<float> dst) override;
  absl::Status Conv2D(const compute::DeviceTensor& x, const compute::DeviceTensor& w,
                      const compute::DeviceTensor& b, bool relu, compute::DeviceTensor* y) override;
  absl::Status Conv2DBackwardData(const compute::DeviceTensor& dy, const compute::DeviceTensor& w,
                                  compute::DeviceTensor* dx) override;
  absl::Status Conv2DBackwardWeights(const compute::DeviceTensor& x,
                                     const compute::DeviceTensor& dy, compute::DeviceTensor* dw,
                                     compute::DeviceTensor* db) override;
  absl::Status ReluBackward(const compute::DeviceTensor& y, const compute::DeviceTensor& dy,
                            compute::DeviceTensor* dx) override;
  absl::Status MaxPool2x2(const compute::DeviceTensor& x, compute::DeviceTensor* y) override;
  absl::Status MaxPool2x2Backward(const compute::DeviceTensor& x, const compute::DeviceTensor& dy,
                                  compute::DeviceTensor* dx) override;
  absl::Status Dense(const compute::DeviceTensor& x, const compute::DeviceTensor& w,
                     const compute::DeviceTensor& b, bool relu, compute::DeviceTensor* y) override;
  absl::Status DenseBackwardData(const compute::DeviceTensor& dy, const compute::DeviceTensor& w,
                                 compute::DeviceTensor* dx) override;
  absl::Status DenseBackwardWeights(const compute::DeviceTensor& x, const compute::DeviceTensor& dy,
                                    compute::DeviceTensor* dw, compute::DeviceTensor* db) override;
  absl::Status Activate(compute::Activation f, float alpha, const compute::DeviceTensor& x,
                        compute::DeviceTensor* y) override;
  absl::Status ActivateBackward(compute::Activation f, float alpha, const compute::DeviceTensor& y,
                                const compute::DeviceTensor& dy,
                                compute::DeviceTensor* dx) override;
  absl::Status GlobalPool(compute::GlobalPooling kind, const compute::DeviceTensor& x,
                          compute::DeviceTensor* y) override;
  absl::Status GlobalPoolBackward(compute::GlobalPooling kind, const compute::DeviceTensor& x,
                                  const compute::DeviceTensor& dy,
                                  compute::DeviceTensor* dx) override;
  absl::Status Multiply(const compute::DeviceTensor& a, const compute::DeviceTensor& b,
                        compute::DeviceTensor* y) override;
  absl::Status AvgPool2x2(const compute::DeviceTensor& x, compute::DeviceTensor* y) override;
  absl::Status AvgPool2x2Backward(const compute::DeviceTensor& x, const compute::DeviceTensor& dy,
                                  compute::DeviceTensor* dx) override;
  absl::Status SoftmaxCrossEntropy(const compute::DeviceTensor& logits,
                                   absl::Span<const int32_t> labels, float grad_scale,
                                   compute::DeviceTensor* dlogits, double* loss_sum,
                                   int64_t* correct) override;

 private:
  // Runs `op`, adding its time under "<name> <main> k<kernel>".
  template <typename F>
  absl::Status Time(const char* name, const compute::Shape& main, const compute::Shape& kernel,
                    F&& op);

  compute::ComputeBackend* const inner_;
  std::map<std::string, double> seconds_;
};

}  // namespace bench
}  // namespace psc

#endif  // PSC_BENCH_TIMED_BACKEND_H_
