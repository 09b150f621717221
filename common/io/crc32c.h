// CRC-32C (Castagnoli; reflected polynomial 0x82F63B78, init and final xor
// 0xFFFFFFFF), and the masked form that TFRecords (and leveldb's logs)
// store so that a CRC over data that embeds CRCs stays strong. On x86-64
// CPUs with SSE4.2 it runs the crc32 instruction (8 bytes a step, about 8x
// the table's speed: TFRecord input checks every byte it reads); elsewhere
// a table (slicing by 8). The two agree bit for bit (crc32c_test.cc). Pure
// functions; thread-safe.
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

namespace internal {
// The two ways Crc32cExtend computes, for tests and benchmarks.
uint32_t Crc32cExtendTable(uint32_t crc, const void* data, size_t n);
// Whether this CPU has SSE4.2's crc32 (always false off x86-64).
bool Crc32cHardware();
// Only where Crc32cHardware().
uint32_t Crc32cExtendHardware(uint32_t crc, const void* data, size_t n);
}  // namespace internal

}  // namespace io
}  // namespace psc

#endif  // PSC_COMMON_IO_CRC32C_H_
