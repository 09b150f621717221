#include "common/records/piece_reader.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace psc::records {

PieceReader::PieceReader(io::FileSystem* fs, std::vector<std::string> files,
                         std::vector<Piece> pieces, const RowLayout* layout,
                         const ReadOptions& options)
    : fs_(fs),
      files_(std::move(files)),
      pieces_(std::move(pieces)),
      layout_(layout),
      options_(options),
      count_index_(files_.size(), -1) {}

void PieceReader::Rewind() {
  again_ = true;
  piece_ = 0;
  left_ = 0;
  open_ = false;
  cursor_.reset();
}

FileCount* PieceReader::CountOf(int file) {
  int& at = count_index_[file];
  if (at < 0) {
    at = static_cast<int>(counts_.size());
    counts_.push_back(FileCount{files_[file]});
  }
  return &counts_[at];
}

absl::Status PieceReader::OpenPiece() {
  const Piece& p = pieces_[piece_];
  if (p.file < 0 || static_cast<size_t>(p.file) >= files_.size() || p.first < 0 || p.count < 0) {
    return absl::InvalidArgumentError(absl::StrCat("PieceReader: piece ", piece_, " (file ", p.file,
                                                   ", records ", p.first, " + ", p.count,
                                                   ") is outside the ", files_.size(), " files"));
  }
  const std::string& path = files_[p.file];
  PSC_ASSIGN_OR_RETURN(std::unique_ptr<io::RandomAccessFile> file, fs_->OpenForRead(path));
  PSC_ASSIGN_OR_RETURN(cursor_, RecordCursor::Open(std::move(file), layout_, options_));
  bool end = false;
  PSC_RETURN_IF_ERROR(cursor_->Skip(p.first, &end));
  if (end && p.count > 0) {
    return absl::DataLossError(absl::StrCat(path, " holds fewer than ", p.first + 1,
                                            " records: it changed since its records were "
                                            "counted (remove the counts file beside the spec)"));
  }
  left_ = p.count;
  open_ = true;
  return absl::OkStatus();
}

absl::StatusOr<int64_t> PieceReader::Read(int64_t max_rows, RowBuffer* rows) {
  rows->Reserve(max_rows);
  int64_t got = 0;
  while (got < max_rows && piece_ < pieces_.size()) {
    if (!open_) PSC_RETURN_IF_ERROR(OpenPiece());
    if (left_ == 0) {
      ++piece_;
      open_ = false;
      cursor_.reset();
      continue;
    }
    // Read again, a record is not counted twice.
    FileCount* count = again_ ? &scratch_ : CountOf(pieces_[piece_].file);
    const int64_t before_rows = count->records, before_skipped = count->skipped;
    const Piece& p = pieces_[piece_];
    const int64_t index = p.first + (p.count - left_);
    bool end = false;
    PSC_RETURN_IF_ERROR(cursor_->Next(rows, count, &end));
    if (count->skipped > before_skipped && !again_) count->skipped_at.push_back(index);
    if (end) {
      if (!cursor_->lost()) {
        return absl::DataLossError(absl::StrCat(
            files_[pieces_[piece_].file], " ended ", left_,
            " records before the count it had when counted: it changed since (remove the "
            "counts file beside the spec)"));
      }
      left_ = 0;  // damage lost the rest of the file, already counted
      continue;
    }
    --left_;
    got += count->records - before_rows;
    if (!again_) skipped_ += count->skipped - before_skipped;
  }
  return got;
}

}  // namespace psc::records
