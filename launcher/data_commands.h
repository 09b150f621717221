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

// `pscluster data convert NPZ OUT_DIR`: the archive's splits (x_train and
// y_train, x_val/y_val and x_test/y_test when there; a model of several
// inputs' "x_train/NAME" arrays) as `shards` files per split in OUT_DIR,
// each a contiguous run of the examples in order ("train-00000-of-00004
// .tfrecord[.gz|.zz]" or ".csv"), and the feature spec that reads them
// (OUT_DIR/spec.json): TFRecord Examples with a uint8 array as raw bytes,
// an integer array as an int64 list, a float array as a float list, under
// the input's name ("x" for one input) and "y"; CSV rows with a header, a
// column per value ("x_0", ...). A summary line per split. Errors: the
// archive's; INVALID_ARGUMENT for shards < 1 (a shard may hold no example), a
// CSV with compression, a missing x_train or y_train, x without its y;
// OUT_DIR's (ALREADY_EXISTS for a file there).
absl::StatusOr<std::string> ConvertNpz(const std::string& npz, const std::string& out_dir,
                                       int shards, tfrecord::Compression compression, bool csv);

// `pscluster data dump GLOB --spec=FILE --out=DIR`: every record of the
// files GLOB matches, read through the spec as a job reads them, written as
// NumPy arrays: DIR/<input>.npy for each input, DIR/label.npy and (with a
// weight) DIR/weight.npy, of (records, <shape>): float features float32,
// int64 features and raw integers int64, raw uint8 uint8, raw floats
// float32. Without a model every input needs a "shape". A summary line.
// Errors: the spec's and the readers' (records/record_files.h), naming
// the file, the record and the feature; an input named label or weight.
absl::StatusOr<std::string> DumpRecords(const std::string& glob, const std::string& spec_path,
                                        const std::string& out_dir, bool csv,
                                        std::optional<tfrecord::Compression> compression,
                                        bool skip_corrupt, uint64_t max_record_bytes);

}  // namespace launcher
}  // namespace psc

#endif  // PSC_LAUNCHER_DATA_COMMANDS_H_
