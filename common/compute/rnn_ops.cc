#include "common/compute/rnn_ops.h"

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace psc {
namespace compute {
namespace rnn {

absl::Status CheckLstm(const char* op, const DeviceTensor& z,
                       std::initializer_list<std::pair<const char*, const DeviceTensor*>> state,
                       int64_t* rows, int64_t* units) {
  PSC_RETURN_IF_ERROR(WantRank(op, "z", z, 2));
  *rows = z.shape()[0];
  *units = z.shape()[1] / 4;
  if (*rows < 1 || *units < 1 || z.shape()[1] % 4 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": z has shape ", ShapeText(z.shape()),
                                                   ", want [n, 4U] (the gates i, f, c, o)"));
  }
  for (const auto& [what, t] : state) {
    if (t != nullptr) PSC_RETURN_IF_ERROR(WantShape(op, what, *t, {*rows, *units}));
  }
  return absl::OkStatus();
}

absl::Status CheckLstmLayer(const char* op, const DeviceTensor& x, const DeviceTensor& w,
                            const DeviceTensor& r, const DeviceTensor* b,
                            std::initializer_list<const DeviceTensor*> seqs, int64_t* n,
                            int64_t* steps, int64_t* c, int64_t* units) {
  PSC_RETURN_IF_ERROR(WantRank(op, "w", w, 2));
  PSC_RETURN_IF_ERROR(WantRank(op, "r", r, 2));
  PSC_RETURN_IF_ERROR(WantFloat(op, "x", x));
  *c = w.shape()[0];
  *units = r.shape()[0];
  if (*units < 1 || *c < 1 || w.shape()[1] != 4 * *units || r.shape()[1] != 4 * *units) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": w ", ShapeText(w.shape()), " and r ",
                                                   ShapeText(r.shape()),
                                                   ", want [C, 4U] and [U, 4U]"));
  }
  if (b != nullptr) PSC_RETURN_IF_ERROR(WantShape(op, "b", *b, {4 * *units}));
  *n = x.shape().empty() ? 0 : x.shape()[0];
  const int64_t per = *n > 0 ? x.size() / *n : 0;
  if (*n < 1 || per < *c || per % *c != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": x ", ShapeText(x.shape()), " is not n sequences of ", *c, " features"));
  }
  *steps = per / *c;
  for (const DeviceTensor* s : seqs) {
    if (s == nullptr) continue;
    PSC_RETURN_IF_ERROR(WantFloat(op, "y", *s));
    if (s->shape().empty() || s->shape()[0] != *n || s->size() != *n * *steps * *units) {
      return absl::InvalidArgumentError(absl::StrCat(op, ": a sequence of ", ShapeText(s->shape()),
                                                     ", want ", *n, " x ", *steps, " x ", *units,
                                                     " values"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckGru(const char* op, const DeviceTensor& xz,
                      std::initializer_list<std::pair<const char*, const DeviceTensor*>> gates,
                      std::initializer_list<std::pair<const char*, const DeviceTensor*>> state,
                      int64_t* rows, int64_t* units) {
  PSC_RETURN_IF_ERROR(WantRank(op, "xz", xz, 2));
  *rows = xz.shape()[0];
  *units = xz.shape()[1] / 3;
  if (*rows < 1 || *units < 1 || xz.shape()[1] % 3 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": xz has shape ", ShapeText(xz.shape()),
                                                   ", want [n, 3U] (the gates z, r, h)"));
  }
  for (const auto& [what, t] : gates) {
    if (t != nullptr) PSC_RETURN_IF_ERROR(WantShape(op, what, *t, xz.shape()));
  }
  for (const auto& [what, t] : state) {
    if (t != nullptr) PSC_RETURN_IF_ERROR(WantShape(op, what, *t, {*rows, *units}));
  }
  return absl::OkStatus();
}

}  // namespace rnn
}  // namespace compute
}  // namespace psc
