#include "common/compute/kernel_registry.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace psc {
namespace compute {

absl::Status KernelRegistry::Register(std::string op, int inputs, int outputs, Kernel kernel,
                                      OptionalTensors optional, Accepts accepts,
                                      KernelDtypes dtypes, TakesLowPrecision takes,
                                      uint32_t extra_rounding) {
  const auto beyond = [](uint32_t mask, int count) { return count < 32 && (mask >> count) != 0; };
  if (op.empty() || inputs < 0 || outputs < 1 || inputs > 32 || outputs > 32 || !kernel ||
      beyond(optional.inputs, inputs) || beyond(optional.outputs, outputs)) {
    return absl::InvalidArgumentError(
        absl::StrCat("KernelRegistry: op \"", op, "\" with ", inputs, " inputs and ", outputs,
                     " outputs needs a name, a kernel, 0 to 32 inputs, "
                     "1 to 32 outputs and optional tensors among them"));
  }
  if (kernels_.count(op) != 0) {
    return absl::AlreadyExistsError(absl::StrCat("KernelRegistry: op ", op, " has a kernel"));
  }
  kernels_.emplace(std::move(op), RegisteredKernel{inputs, outputs, optional, std::move(kernel),
                                                   accepts, dtypes, takes, extra_rounding});
  return absl::OkStatus();
}

const RegisteredKernel* KernelRegistry::Find(absl::string_view op) const {
  const auto it = kernels_.find(op);
  return it == kernels_.end() ? nullptr : &it->second;
}

std::vector<std::string> KernelRegistry::Names() const {
  std::vector<std::string> names;
  names.reserve(kernels_.size());
  for (const auto& [name, kernel] : kernels_) names.push_back(name);
  return names;
}

}  // namespace compute
}  // namespace psc
