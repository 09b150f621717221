#include "common/io/string_file.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace psc {
namespace io {
namespace {

class StringFile final : public RandomAccessFile {
 public:
  StringFile(std::string path, std::string bytes)
      : path_(std::move(path)), bytes_(std::move(bytes)) {}
  absl::Status Read(uint64_t offset, size_t n, char* out) const override {
    if (offset > bytes_.size() || n > bytes_.size() - offset) {
      return absl::OutOfRangeError(absl::StrCat("read ", path_, ": bytes [", offset, ", ",
                                                offset + n, ") of ", bytes_.size()));
    }
    if (n > 0) std::memcpy(out, bytes_.data() + offset, n);
    return absl::OkStatus();
  }
  uint64_t size() const override { return bytes_.size(); }
  const std::string& path() const override { return path_; }

 private:
  const std::string path_;
  const std::string bytes_;
};

}  // namespace

std::unique_ptr<RandomAccessFile> NewStringFile(std::string path, std::string bytes) {
  return std::make_unique<StringFile>(std::move(path), std::move(bytes));
}

}  // namespace io
}  // namespace psc
