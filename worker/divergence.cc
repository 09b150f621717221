#include "worker/divergence.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace psc {
namespace worker {
namespace {

const char* Kind(double v) { return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf"); }

}  // namespace

std::string NonFiniteReport(double loss_sum, const std::vector<std::vector<float>>& grads,
                            const std::vector<tensor::VariableShape>& variables) {
  std::string out;
  if (!std::isfinite(loss_sum)) out = absl::StrCat("the loss is ", Kind(loss_sum));
  int more = 0;
  bool named = false;
  for (size_t v = 0; v < grads.size(); ++v) {
    const std::vector<float>& g = grads[v];
    for (size_t i = 0; i < g.size(); ++i) {
      if (std::isfinite(g[i])) continue;
      if (named) {
        ++more;
      } else {
        absl::StrAppend(&out, out.empty() ? "" : "; ", "the gradient of '",
                        v < variables.size() ? variables[v].name : absl::StrCat("#", v), "' is ",
                        Kind(g[i]), " at element ", i);
        named = true;
      }
      break;
    }
  }
  if (more > 0) absl::StrAppend(&out, " (and ", more, " more variables)");
  return out;
}

std::string OverflowAtTheSmallestScale() {
  return "the gradients are not finite even at the smallest loss scale (2^-126; every halving "
         "before it overflowed too)";
}

absl::Status DivergedError(int worker, int64_t step, const std::string& report,
                           double learning_rate, const absl::Status& detail) {
  return absl::InvalidArgumentError(absl::StrCat(
      "worker:", worker, ", step ", step, ": ", report,
      ". Training diverged (lower the learning rate, now ", learning_rate,
      ") or a non-finite value reached the model (the inputs are checked at load); pscluster "
      "stops at the first non-finite step, as Keras's TerminateOnNaN callback would",
      detail.ok() ? "" : absl::StrCat(". The servers: ", detail.message())));
}

}  // namespace worker
}  // namespace psc
