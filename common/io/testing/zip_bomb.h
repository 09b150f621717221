// Tests and fuzz seeds only: zip members that inflate to far more than they
// occupy, made in moments. A member is `head` followed by `fill_count`
// copies of the byte `fill`, deflated once per 16 MiB block and the block's
// deflated bytes repeated (each block starts after a full flush, so the
// copies are independent), with its CRC combined the same way: a 3 GiB
// member costs about 3 MB and well under a second to write.
#ifndef PSC_COMMON_IO_TESTING_ZIP_BOMB_H_
#define PSC_COMMON_IO_TESTING_ZIP_BOMB_H_

#include <zip.h>

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"

namespace psc {
namespace io {
namespace testing {

// Adds the member `name` to `zf` (zip64). Its zip entry announces its true
// size, or `announced` when given (a lying entry).
absl::Status AddInflatingMember(zipFile zf, const std::string& name, const std::string& head,
                                char fill, uint64_t fill_count,
                                std::optional<uint64_t> announced = std::nullopt);

// Adds `bytes` as a plain deflated member.
absl::Status AddMember(zipFile zf, const std::string& name, const std::string& bytes);

}  // namespace testing
}  // namespace io
}  // namespace psc

#endif  // PSC_COMMON_IO_TESTING_ZIP_BOMB_H_
