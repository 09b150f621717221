// How many records each of a job's data files holds: a counting pass over
// the files (TFRecord: each record's header checked and its data stepped
// over; CSV: the rows after the header), kept in a cache file (JSON,
// beside the spec) by path, size and modification time, so a second job on
// the same files reads none of them. Blocks on file I/O. Thread-compatible.
#ifndef PSC_COMMON_RECORDS_RECORD_COUNTS_H_
#define PSC_COMMON_RECORDS_RECORD_COUNTS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/records/record_files.h"

namespace psc::records {

struct RecordCounts {
  std::vector<int64_t> records;  // per file, in the files' order
  int counted = 0;               // files read in this pass (the others: from the cache)
  double seconds = 0;            // the pass's
  // Under skip_corrupt: the files whose count stopped at damage that lost
  // their rest (a damaged header or stream), and the damage. Not cached.
  std::vector<std::pair<std::string, std::string>> damaged;
};

// The files' records. `cache` ("" for none) is read when it is there and
// well formed (a bad one is ignored), and rewritten atomically with every
// file's count; a cache that cannot be written costs only the next pass.
// Under options.skip_corrupt, damage that loses the rest of a file ends its
// count (RecordCounts::damaged). Errors: the readers' (NOT_FOUND, DATA_LOSS
// naming the file and offset,
// RESOURCE_EXHAUSTED for a record over the limit); a file whose size
// cannot be read.
absl::StatusOr<RecordCounts> CountRecords(io::FileSystem* fs, const std::vector<std::string>& files,
                                          const ReadOptions& options, const std::string& cache);

}  // namespace psc::records

#endif  // PSC_COMMON_RECORDS_RECORD_COUNTS_H_
