// tf.train.Example records (proto/tf_example.proto): parsed from a
// TFRecord, and described for people (`pscluster data inspect`). A record is
// at most --max_record_bytes, and what protobuf makes of it at most eight
// times that (an int64 list of one-byte varints). Pure functions;
// thread-safe.
#ifndef PSC_COMMON_TFRECORD_EXAMPLE_H_
#define PSC_COMMON_TFRECORD_EXAMPLE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "proto/tf_example.pb.h"

namespace psc {
namespace tfrecord {

// `record` parsed as an Example into *example. DATA_LOSS naming `where`
// (the file and the record's offset) when it is not one.
absl::Status ParseExample(absl::string_view record, absl::string_view where,
                          tfexample::Example* example);

// The kind of a feature: "bytes", "float", "int64", or "empty" (no list).
const char* FeatureKind(const tfexample::Feature& f);
// How many values the feature holds.
int64_t FeatureLength(const tfexample::Feature& f);

// One line per feature, in name order: its name, kind and length, and its
// first `max_values` values (bytes: their length, and "PNG"/"JPEG" when the
// value starts with that format's magic bytes), e.g.
//   "  image_raw  bytes[1]  784 bytes"
//   "  label      int64[1]  7"
std::string DescribeExample(const tfexample::Example& example, int max_values);

}  // namespace tfrecord
}  // namespace psc

#endif  // PSC_COMMON_TFRECORD_EXAMPLE_H_
