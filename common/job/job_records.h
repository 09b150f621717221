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
#include "common/records/feature_spec.h"
#include "common/records/record_files.h"
#include "common/records/row_layout.h"
#include "proto/job.pb.h"

namespace psc {
namespace job {

// The most bytes of a feature spec file.
inline constexpr uint64_t kMaxSpecBytes = 1 << 20;
// --max_skipped_fraction's default.
inline constexpr double kDefaultMaxSkippedFraction = 0.01;

// read=auto streams the training files when they hold more bytes.
inline constexpr uint64_t kStreamAboveBytes = uint64_t{1} << 30;
// A streamed slot's shuffle buffer (records), by default and at most.
inline constexpr int64_t kDefaultShuffleBuffer = 10000;
inline constexpr int64_t kMaxShuffleBuffer = int64_t{1} << 24;

// Whether --data names data files ("tfrecord:..." or "csv:...").
bool IsRecordDataFlag(absl::string_view value);

// --data=FORMAT:train=GLOB[,validation=GLOB][,test=GLOB],spec=FILE
// [,compression=auto|none|gzip|zlib][,validation_split=F]
// [,read=auto|whole|stream][,shuffle_buffer=N] into *out (read=auto
// resolved: stream above kStreamAboveBytes of training files): the
// globs expanded (io::ExpandGlob: sorted; a URL's scheme refused; made
// absolute, as every task reads them whatever its directory), the spec
// read (at most kMaxSpecBytes) and parsed. INVALID_ARGUMENT naming the flag
// for: an unknown or repeated key, no train or spec, a glob matching no
// file, a spec that is not one (records/feature_spec.h), a compression
// not listed, a validation_split outside [0, 1) or beside validation files,
// a read not listed, a shuffle_buffer outside [1, kMaxShuffleBuffer] or
// without read=stream.
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

// How the job's files are read: the spec, resolved against the model, and
// the readers' options. Errors: the spec's (records/feature_spec.h) and
// ResolveLayout's.
struct RecordReading {
  records::FeatureSpec spec;
  records::RowLayout layout;
  records::ReadOptions options;
};
absl::StatusOr<RecordReading> ReadingFor(const proto::JobSpec& job, const compute::Model& model);

// FAILED_PRECONDITION naming `what` and the first skip's reason when
// `skipped` of `all` records is over the job's max_skipped_fraction.
absl::Status CheckSkipped(const proto::RecordData& d, const char* what, int64_t skipped,
                          int64_t all, const std::vector<records::FileCount>& files);

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
