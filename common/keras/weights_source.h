// Where a .weights.h5 takes its values from (weights_h5.h's
// WriteWeightsH5): a range of rows of a variable or of one of its optimizer
// slots at a time, so that the writer never holds a whole embedding table.
// The chief's source reads the parameter servers (chief/server_weights.h);
// WholeWeights serves values held in memory.
#ifndef PSC_COMMON_KERAS_WEIGHTS_SOURCE_H_
#define PSC_COMMON_KERAS_WEIGHTS_SOURCE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "common/compute/model.h"

namespace psc {
namespace keras {

// A variable's rows: its first axis (one row for a scalar), each of the
// product of the other axes' elements.
int64_t RowsOf(const compute::Shape& shape);
int64_t RowElements(const compute::Shape& shape);

class WeightsSource {
 public:
  virtual ~WeightsSource() = default;
  // Rows [first, first + count) of variable `v` (model.variables() order)
  // into `out`, count × RowElements floats; the writer asks only rows the
  // variable has.
  virtual absl::Status Variable(int v, int64_t first, int64_t count, float* out) = 0;
  // The same of variable `v`'s optimizer slot `slot`.
  virtual absl::Status Slot(int v, int slot, int64_t first, int64_t count, float* out) = 0;
};

// Keras 3's optimizer state in a model.weights.h5 ("optimizer/vars/N"):
// the iteration count (int32), the learning rate (float32), then each
// trainable variable's slots in Keras's order (Adam: momentum then velocity
// per variable; SGD with momentum: the momentum; RMSprop slot by slot), so
// that load_model(...).fit(...) continues where the job stopped. The
// slots' values come from the WeightsSource.
struct OptimizerState {
  int64_t iterations = 0;
  float learning_rate = 0;
  // False under a learning-rate schedule: Keras then keeps no
  // learning_rate variable, and the slots follow the iteration count.
  bool learning_rate_variable = true;
  struct SlotOf {
    int variable = 0;  // model.variables() order; the dataset takes its shape
    int slot = 0;
  };
  std::vector<SlotOf> slots;  // in Keras's order
};

// Values held whole, in model.variables() order: `params`, and `slots`
// [variable][slot] (none when null). Not owned; each must outlive this.
// The sizes are the writer's to check (WriteWeightsH5 does).
class WholeWeights : public WeightsSource {
 public:
  WholeWeights(const compute::Model* model, const std::vector<std::vector<float>>* params,
               const std::vector<std::vector<std::vector<float>>>* slots = nullptr)
      : model_(model), params_(params), slots_(slots) {}
  absl::Status Variable(int v, int64_t first, int64_t count, float* out) override;
  absl::Status Slot(int v, int slot, int64_t first, int64_t count, float* out) override;

 private:
  absl::Status Copy(const std::vector<float>& from, int v, int64_t first, int64_t count,
                    float* out) const;
  const compute::Model* model_;
  const std::vector<std::vector<float>>* params_;
  const std::vector<std::vector<std::vector<float>>>* slots_;
};

}  // namespace keras
}  // namespace psc

#endif  // PSC_COMMON_KERAS_WEIGHTS_SOURCE_H_
