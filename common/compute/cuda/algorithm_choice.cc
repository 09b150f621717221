#include "common/compute/cuda/algorithm_choice.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace psc {
namespace compute {
namespace cuda {

std::string AlgorithmCandidate::Text() const {
  return absl::StrFormat("%s algo %d (%s, %d bytes workspace)",
                         layout == ConvLayout::kNhwc ? "NHWC" : "NCHW", algo,
                         fma_math ? "FMA" : "tensor-op math", static_cast<long long>(workspace));
}

std::vector<AlgorithmCandidate> Acceptable(const std::vector<AlgorithmCandidate>& ranked,
                                           bool allow_tf32, size_t workspace_limit) {
  std::vector<AlgorithmCandidate> kept;
  for (const AlgorithmCandidate& c : ranked) {
    if (!c.supported || !c.deterministic) continue;
    if (!allow_tf32 && !c.fma_math) continue;
    if (c.workspace > workspace_limit) continue;
    kept.push_back(c);
  }
  return kept;
}

absl::StatusOr<int> FirstThatRuns(int count, const std::function<absl::Status(int)>& attempt,
                                  const std::function<std::string(int)>& describe,
                                  const std::string& what) {
  std::string tried;
  bool all_memory = count > 0;
  for (int i = 0; i < count; ++i) {
    const absl::Status s = attempt(i);
    if (s.ok()) return i;
    if (!absl::IsResourceExhausted(s) && !absl::IsUnimplemented(s)) return s;
    all_memory = all_memory && absl::IsResourceExhausted(s);
    absl::StrAppend(&tried, "; ", describe(i), ": ", s.message());
  }
  const std::string message =
      count == 0 ? absl::StrCat(what, ": no acceptable algorithm")
                 : absl::StrCat(what, ": none of ", count, " acceptable algorithms ran", tried);
  return all_memory ? absl::ResourceExhaustedError(message) : absl::UnimplementedError(message);
}

}  // namespace cuda
}  // namespace compute
}  // namespace psc
