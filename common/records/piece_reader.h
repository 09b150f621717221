// Pieces of a job's data files (records/shard_plan.h: a file, its first
// record, a count) read in order into a RowBuffer, a few rows at a time:
// the streamed reader under a replica slot's shuffle buffer, and the
// reader of the first records (standardization's fit) and of a
// validation_split's tail. One file is open at a time. Blocks on file I/O.
// Thread-compatible.
#ifndef PSC_COMMON_RECORDS_PIECE_READER_H_
#define PSC_COMMON_RECORDS_PIECE_READER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/io/file_system.h"
#include "common/records/record_files.h"
#include "common/records/row_layout.h"
#include "common/records/shard_plan.h"

namespace psc::records {

class PieceReader {
 public:
  // `fs` and `layout` are not owned; `pieces` index `files`.
  PieceReader(io::FileSystem* fs, std::vector<std::string> files, std::vector<Piece> pieces,
              const RowLayout* layout, const ReadOptions& options);

  // Appends up to `max_rows` rows to *rows and returns how many; 0 once
  // every piece is read. A record skipped (skip_corrupt) is counted in
  // files() and not returned. Errors: RecordCursor's; NOT_FOUND naming a
  // file that cannot be opened; DATA_LOSS naming a file that ends before a
  // piece does (changed since its records were counted), unless damage
  // skipped under skip_corrupt lost its rest.
  absl::StatusOr<int64_t> Read(int64_t max_rows, RowBuffer* rows);

  // Reads the pieces again from the first.
  void Rewind();

  // The pieces' records read into rows and skipped, per file (the files
  // read from, in the order first read), in the first pass (before any
  // Rewind).
  const std::vector<FileCount>& files() const { return counts_; }
  int64_t skipped() const { return skipped_; }

 private:
  // Opens pieces_[piece_]'s file and steps to its first record.
  absl::Status OpenPiece();
  FileCount* CountOf(int file);

  io::FileSystem* const fs_;
  const std::vector<std::string> files_;
  const std::vector<Piece> pieces_;
  const RowLayout* const layout_;
  const ReadOptions options_;

  size_t piece_ = 0;   // the piece being read
  int64_t left_ = 0;   // of its records
  bool open_ = false;  // cursor_ is the piece's
  std::unique_ptr<RecordCursor> cursor_;
  std::vector<FileCount> counts_;
  std::vector<int> count_index_;  // per file: its counts_ entry, or -1
  int64_t skipped_ = 0;
  bool again_ = false;  // rewound: counts go to scratch_
  FileCount scratch_;
};

}  // namespace psc::records

#endif  // PSC_COMMON_RECORDS_PIECE_READER_H_
