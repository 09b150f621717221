// CRC-32C (Castagnoli; reflected polynomial 0x82F63B78, init and final xor
// 0xFFFFFFFF), table-driven (slicing by 8), and the masked form that
// TFRecords (and leveldb's logs) store so that a CRC over data that embeds
// CRCs stays strong. Pure functions; thread-safe.
#ifndef PSC_COMMON_IO_CRC32C_H_
#define PSC_COMMON_IO_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace psc {
namespace io {

// Crc32c("123456789") == 0xE3069283.
uint32_t Crc32c(const void* data, size_t n);
// The CRC-32C of A followed by the `n` bytes at `data`, given crc == Crc32c(A).
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n);
// ((crc >> 15) | (crc << 17)) + 0xa282ead8 of Crc32c(data, n).
uint32_t MaskedCrc32c(const void* data, size_t n);

}  // namespace io
}  // namespace psc

#endif  // PSC_COMMON_IO_CRC32C_H_
