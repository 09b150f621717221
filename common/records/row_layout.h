// What the examples of a job's data files become: one array per model
// input, one of labels and one of weights (the names an .npz would give
// them, so the NumPy loader splits, checks and preprocesses them alike:
// data/numpy_dataset.h), filled a record at a time. The layout is the
// feature spec resolved against the model's inputs; a record's values are
// checked (finite floats, ids in range, class ids in range) and converted
// to the array's type as they are appended, and a record that fails leaves
// the arrays as they were. Thread-compatible.
#ifndef PSC_COMMON_RECORDS_ROW_LAYOUT_H_
#define PSC_COMMON_RECORDS_ROW_LAYOUT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/data/npy.h"
#include "common/data/numpy_file.h"
#include "common/records/feature_spec.h"

namespace psc::records {

// A model input as the data must fill it.
struct InputSlot {
  std::string name;
  std::vector<int64_t> shape;  // the example's
  int64_t id_limit = 0;        // > 0: an input of ids below it
  bool integers = false;       // int64 values kept as int64 (no table: `data dump`)
};

// What the label is for the loss.
struct LabelSlot {
  int64_t classes = 0;       // > 0: class ids (or one-hot rows) of that many classes
  int64_t target_width = 0;  // > 0: a regression's float targets
};

struct Column {
  FeatureColumn spec;
  std::string array;           // the array's name after the split's prefix: "", "/image", ...
  std::vector<int64_t> shape;  // one example's
  int64_t values = 1;          // ShapeValues(shape)
  data::NpyType type = data::NpyType::kFloat32;  // the array's elements
  int64_t id_limit = 0;
  int64_t classes = 0;  // the label's class ids are checked below it
};

struct RowLayout {
  std::vector<Column> columns;  // the inputs, then the label, then the weight if any
  bool one_input = false;       // the model's only input is the array "x_<split>" itself
  int label = -1;               // the label's column
  int weight = -1;              // the weight's column, or -1
};

// The spec resolved for the model: `inputs` empty means one input of values
// of `one_shape` (the spec's only input entry feeds it, whatever its key).
// INVALID_ARGUMENT naming `where` (the spec) for: an input the model lacks
// (listing the model's), a model input the spec lacks, a shape other than
// the model input's (both printed), an input of ids read from a float
// feature or raw floats, a label of a shape the loss cannot take.
absl::StatusOr<RowLayout> ResolveLayout(const FeatureSpec& spec,
                                        const std::vector<InputSlot>& inputs,
                                        const std::vector<int64_t>& one_shape,
                                        const LabelSlot& label, absl::string_view where);

// Where a record is, for messages, made into text only when one is needed
// (reading a record costs no string): "a.tfrecord: record 7 at offset
// 2048", "a.csv: line 12", or a text given whole.
struct Where {
  Where(absl::string_view text) : text(text) {}  // NOLINT: a message's prefix as it is
  Where(const char* text) : text(text) {}        // NOLINT
  Where(absl::string_view path, int64_t record, uint64_t offset)
      : path(path), record(record), offset(offset) {}
  static Where Line(absl::string_view path, int64_t line) {
    Where w(path, -1, 0);
    w.line = line;
    return w;
  }
  std::string Text() const;

  absl::string_view text;
  absl::string_view path;
  int64_t record = -1;
  uint64_t offset = 0;
  int64_t line = -1;
};

// The arrays of one split being filled.
class RowBuffer {
 public:
  explicit RowBuffer(const RowLayout* layout);  // not owned

  // One record's values for column `c`, appended as the column's type:
  // float values (a float list, a CSV cell), int64 values, or raw bytes of
  // the column's dtype. `where` names the record ("a.tfrecord: record 7 at
  // offset 2048"). A varlen column takes up to its values and pads the
  // rest. INVALID_ARGUMENT naming `where` and the feature for: a count other
  // than the column's; a NaN or infinity; an id outside [0, limit); a class
  // id outside [0, classes); raw bytes of a length that is not the count
  // times the dtype's size (PNG or JPEG magic bytes then named). A float
  // beyond float32's range for a float32 array. RESOURCE_EXHAUSTED when an
  // array would pass kMaxNumpyArrayBytes.
  absl::Status AppendFloats(int c, absl::Span<const float> v, const Where& where);
  absl::Status AppendDoubles(int c, absl::Span<const double> v, const Where& where);
  absl::Status AppendInt64s(int c, absl::Span<const int64_t> v, const Where& where);
  absl::Status AppendRaw(int c, absl::string_view bytes, const Where& where);
  // The column's default for a record that lacks its feature (or a CSV
  // cell left empty: `what` says which); INVALID_ARGUMENT naming `where`
  // and `what` when the spec gives none.
  absl::Status AppendDefault(int c, const Where& where, absl::string_view what);

  // Opens and closes a record: Begin notes the arrays' sizes, Commit counts
  // the record, Abandon puts the arrays back as they were at Begin.
  void Begin();
  void Commit() { ++rows_; }
  void Abandon();

  int64_t rows() const { return rows_; }
  uint64_t bytes() const;  // what the arrays hold

  // Room for `rows` more rows in every array at once (a chunk's), so that
  // filling them copies and faults in no memory twice; a hint, ignored past
  // 64 MiB an array.
  void Reserve(int64_t rows);

  // The arrays, named prefix + column.array ("x_train/image", "y_train",
  // "w_train"), of rows() examples each; the buffer is left empty.
  absl::StatusOr<std::map<std::string, data::NumpyArray>> Take(absl::string_view x_prefix,
                                                               absl::string_view y_name,
                                                               absl::string_view w_name);

 private:
  template <typename T>
  absl::Status Append(int c, absl::Span<const T> v, const Where& where);
  // RESOURCE_EXHAUSTED when column c's array would pass kMaxNumpyArrayBytes.
  absl::Status Room(int c, uint64_t bytes, const Where& where) const;

  const RowLayout* const layout_;
  std::vector<std::string> data_;  // per column
  std::vector<size_t> mark_;
  int64_t rows_ = 0;
};

}  // namespace psc::records

#endif  // PSC_COMMON_RECORDS_ROW_LAYOUT_H_
