// A job's data files (--data=tfrecord:... or --data=csv:...): the flag read
// on the chief (globs expanded, the feature spec read and checked), and
// every split read through the spec into the arrays the NumPy loader takes
// (common/records), so the files are split, checked and preprocessed as an
// .npz is. Every process that loads the job's data reads them whole.
#ifndef PSC_COMMON_JOB_JOB_RECORDS_H_
#define PSC_COMMON_JOB_JOB_RECORDS_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/compute/model.h"
#include "common/data/numpy_file.h"
#include "common/keras/input_dims.h"
#include "proto/job.pb.h"

namespace psc {
namespace job {

// The most bytes of a feature spec file.
inline constexpr uint64_t kMaxSpecBytes = 1 << 20;
// --max_skipped_fraction's default.
inline constexpr double kDefaultMaxSkippedFraction = 0.01;

// Whether --data names data files ("tfrecord:..." or "csv:...").
bool IsRecordDataFlag(absl::string_view value);

// --data=FORMAT:train=GLOB[,validation=GLOB][,test=GLOB],spec=FILE
// [,compression=auto|none|gzip|zlib][,validation_split=F] into *out: the
// globs expanded (io::ExpandGlob: sorted; a URL's scheme refused; made
// absolute, as every task reads them whatever its directory), the spec
// read (at most kMaxSpecBytes) and parsed. INVALID_ARGUMENT naming the flag
// for: an unknown or repeated key, no train or spec, a glob matching no
// file, a spec that is not one (records/feature_spec.h), a compression
// not listed, a validation_split outside [0, 1) or beside validation files.
absl::Status RecordDataFromFlag(absl::string_view value, proto::RecordData* out);

// "tfrecord" or "csv".
const char* RecordFormatName(const proto::RecordData& data);
// "tfrecord:train=GLOB (N files), validation=..., spec=FILE": the result
// file's data source.
std::string RecordSource(const proto::RecordData& data);

// The shapes the spec gives the model's inputs (a Keras model's None
// dimensions); INVALID_ARGUMENT naming the input when the spec gives it no
// "shape".
keras::InputDataShape RecordInputShapes(const proto::RecordData& data);

struct RecordArrays {
  std::map<std::string, data::NumpyArray> arrays;  // x_train, y_train, (w_train), x_val, ...
  bool has_weight = false;
  std::string weight_feature;
  std::vector<std::pair<std::string, int64_t>> skipped;  // files that had any
  double seconds = 0;                                    // reading them
};

// Every split's files read through the spec for `model`. Errors: the spec
// resolved against the model (records/row_layout.h), the readers'
// (records/record_files.h); FAILED_PRECONDITION naming the split when the
// records skipped are over max_skipped_fraction of its records.
// `training_only`: the validation and test files are not read (a cluster
// worker only trains).
absl::StatusOr<RecordArrays> ReadRecordArrays(const proto::JobSpec& job,
                                              const compute::Model& model,
                                              bool training_only = false);

}  // namespace job
}  // namespace psc

#endif  // PSC_COMMON_JOB_JOB_RECORDS_H_
