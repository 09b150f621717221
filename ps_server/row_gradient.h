// A row-sparse gradient (GRADIENT_ROW_SPARSE) as the shard holds it from
// VariableStore::Match to the update, in the one byte string per variable
// that every gradient is there (the sync accumulator keeps them as such):
// [n: int64][n row ids: int64][n x width values: float32], native order.
// The rows were checked when the push was decoded (strictly increasing,
// in range). Thread-compatible.
#ifndef PSC_PS_SERVER_ROW_GRADIENT_H_
#define PSC_PS_SERVER_ROW_GRADIENT_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "common/tensor/row_sparse.h"

namespace psc {
namespace ps_server {

// `rows` packed into `storage` (replaced; floats only for their
// alignment); the view of its bytes.
absl::string_view PackRows(const tensor::RowSparse& rows, std::vector<float>* storage);

// A packed gradient's rows.
class RowsView {
 public:
  explicit RowsView(absl::string_view packed);
  int64_t size() const { return n_; }
  int64_t id(int64_t j) const {
    int64_t v;
    std::memcpy(&v, ids_ + j * sizeof(int64_t), sizeof(v));
    return v;
  }
  // Row j's `width` values (float-aligned: see PackRows).
  const float* row(int64_t j, int64_t width) const {
    return reinterpret_cast<const float*>(values_) + j * width;
  }

 private:
  int64_t n_ = 0;
  const char* ids_ = nullptr;
  const char* values_ = nullptr;
};

}  // namespace ps_server
}  // namespace psc

#endif  // PSC_PS_SERVER_ROW_GRADIENT_H_
