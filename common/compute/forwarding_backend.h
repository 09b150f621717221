// A ComputeBackend that hands every call to another one: the base of the
// wrappers that watch or time a backend (tests' recording backends,
// bench/timed_backend.h), which override only what they watch (Run for the
// registered ops, by name).
#ifndef PSC_COMMON_COMPUTE_FORWARDING_BACKEND_H_
#define PSC_COMMON_COMPUTE_FORWARDING_BACKEND_H_

#include <string>

#include "common/compute/backend.h"

namespace psc {
namespace compute {

// Thread-compatible, as the backend it wraps.
class ForwardingBackend : public ComputeBackend {
 public:
  // `inner` is not owned and must outlive this backend.
  explicit ForwardingBackend(ComputeBackend* inner) : inner_(inner) {}

  std::string name() const override { return inner_->name(); }
  bool Supports(const OpSpec& spec) const override { return inner_->Supports(spec); }
  absl::StatusOr<std::unique_ptr<DeviceTensor>> AllocateTensor(const Shape& shape,
                                                               DType dtype) override {
    return inner_->AllocateTensor(shape, dtype);
  }
  absl::Status CopyBytesFromHost(const void* src, size_t bytes, DeviceTensor* dst) override {
    return inner_->CopyBytesFromHost(src, bytes, dst);
  }
  absl::Status CopyBytesToHost(const DeviceTensor& src, void* dst, size_t bytes) override {
    return inner_->CopyBytesToHost(src, dst, bytes);
  }
  absl::Status CopyManyToHost(absl::Span<const DeviceTensor* const> src,
                              absl::Span<const absl::Span<float>> dst) override {
    return inner_->CopyManyToHost(src, dst);
  }
  absl::Status Prepare(absl::Span<const OpSpec> specs) override { return inner_->Prepare(specs); }
  const KernelRegistry& kernels() const override { return inner_->kernels(); }
  absl::Status Run(absl::string_view op, absl::Span<const DeviceTensor* const> in,
                   const OpAttrs& attrs, absl::Span<DeviceTensor* const> out) override {
    return inner_->Run(op, in, attrs, out);
  }

 protected:
  ComputeBackend* inner() const { return inner_; }

 private:
  ComputeBackend* const inner_;
};

}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_FORWARDING_BACKEND_H_
