// The features of a serialized tf.train.Example that a reader wants, found
// in the wire bytes without building protobuf messages: a record costs no
// allocation. Protobuf's semantics are kept: of two map entries with one
// key the later wins, and a list that comes in several pieces (a Feature's
// same member twice) is their concatenation, in order; another member
// replaces the one before. Anything unusual (a group, a malformed varint
// or length, an Example that is not one) is left to protobuf: ScanExample
// then returns false and the caller parses the record with
// tfrecord::ParseExample. Pure; thread-compatible (the scanner's buffers).
#ifndef PSC_COMMON_TFRECORD_EXAMPLE_SCAN_H_
#define PSC_COMMON_TFRECORD_EXAMPLE_SCAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace psc {
namespace tfrecord {

class ExampleScanner {
 public:
  enum class Kind { kEmpty, kBytes, kFloat, kInt64 };

  // The features to look for, by name.
  explicit ExampleScanner(std::vector<std::string> names) : names_(std::move(names)) {}

  // Scans `record` (which must outlive the views). False when it is not a
  // plainly shaped Example (see above).
  bool Scan(absl::string_view record);

  // After a successful Scan: whether feature i was there, its kind, and its
  // values (each false only for a malformed list, after which the caller
  // parses with protobuf).
  bool found(int i) const { return features_[i].found; }
  Kind kind(int i) const { return features_[i].kind; }
  bool Floats(int i, std::vector<float>* out) const;
  bool Int64s(int i, std::vector<int64_t>* out) const;
  // The bytes values, in order.
  bool Bytes(int i, std::vector<absl::string_view>* out) const;

 private:
  struct Feature {
    bool found = false;
    Kind kind = Kind::kEmpty;
    std::vector<absl::string_view> pieces;  // the member's message bytes, in order
  };
  bool ScanFeatures(absl::string_view features);
  bool ScanEntry(absl::string_view entry);
  bool ScanFeature(absl::string_view feature, Feature* out);

  const std::vector<std::string> names_;
  std::vector<Feature> features_;
};

}  // namespace tfrecord
}  // namespace psc

#endif  // PSC_COMMON_TFRECORD_EXAMPLE_SCAN_H_
