// A RandomAccessFile over bytes in memory: what a reader of files reads in
// its fuzz target and tests, without the file system. Thread-safe.
#ifndef PSC_COMMON_IO_STRING_FILE_H_
#define PSC_COMMON_IO_STRING_FILE_H_

#include <memory>
#include <string>

#include "common/io/file_system.h"

namespace psc {
namespace io {

// `bytes` as the file `path` (only named in messages).
std::unique_ptr<RandomAccessFile> NewStringFile(std::string path, std::string bytes);

}  // namespace io
}  // namespace psc

#endif  // PSC_COMMON_IO_STRING_FILE_H_
