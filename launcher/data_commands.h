// pscluster data: what data files hold, without a job.
#ifndef PSC_LAUNCHER_DATA_COMMANDS_H_
#define PSC_LAUNCHER_DATA_COMMANDS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/tfrecord/compression.h"

namespace psc {
namespace launcher {

// `pscluster data inspect GLOB`: the files GLOB matches (how many, their
// bytes), the first file's compression (no `compression`: seen from its
// first bytes), and the features of its first `records` tf.train.Examples,
// one line each (tfrecord::DescribeExample). The glob's errors
// (io::ExpandGlob), the reader's (tfrecord::RecordReader) and a record that
// is no Example (DATA_LOSS naming the file and offset).
absl::StatusOr<std::string> InspectRecords(const std::string& glob, int records,
                                           std::optional<tfrecord::Compression> compression,
                                           uint64_t max_record_bytes);

}  // namespace launcher
}  // namespace psc

#endif  // PSC_LAUNCHER_DATA_COMMANDS_H_
