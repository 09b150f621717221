#include "ps_server/row_gradient.h"

namespace psc {
namespace ps_server {

absl::string_view PackRows(const tensor::RowSparse& rows, std::vector<float>* storage) {
  const int64_t n = static_cast<int64_t>(rows.ids.size());
  const size_t bytes = sizeof(int64_t) * (1 + rows.ids.size()) + sizeof(float) * rows.values.size();
  storage->assign((bytes + sizeof(float) - 1) / sizeof(float), 0.0f);
  char* out = reinterpret_cast<char*>(storage->data());
  std::memcpy(out, &n, sizeof(n));
  if (n > 0) std::memcpy(out + sizeof(n), rows.ids.data(), n * sizeof(int64_t));
  if (!rows.values.empty()) {
    std::memcpy(out + sizeof(n) * (1 + n), rows.values.data(), rows.values.size() * sizeof(float));
  }
  return absl::string_view(out, bytes);
}

RowsView::RowsView(absl::string_view packed) {
  std::memcpy(&n_, packed.data(), sizeof(n_));
  ids_ = packed.data() + sizeof(n_);
  values_ = ids_ + n_ * sizeof(int64_t);
}

}  // namespace ps_server
}  // namespace psc
