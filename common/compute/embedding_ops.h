// The embedding ops: registered kernels (kernel_registry.h) on every
// backend, called through ComputeBackend::Run, as elementwise_ops.h. A
// table is [V,D] float32; ids are float32 holding whole numbers in [0, V)
// (Keras's Embedding casts its input to int32; here the data check
// (common/data) makes sure each id is exact, so ids below 2^24); any shape
// [...], the rows looked up [..., D]. Their references and cases:
// common/ops/embedding_op_defs.cc.
#ifndef PSC_COMMON_COMPUTE_EMBEDDING_OPS_H_
#define PSC_COMMON_COMPUTE_EMBEDDING_OPS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "common/compute/backend.h"
#include "common/compute/embedding_math.h"
#include "common/compute/kernel_registry.h"

namespace psc {
namespace compute {
namespace embedding {

inline constexpr char kEmbeddingLookup[] = "EmbeddingLookup";
inline constexpr char kEmbeddingGradient[] = "EmbeddingGradient";

// The largest id a float32 holds exactly, plus one: tables of at most this
// many rows.
inline constexpr int64_t kMaxRows = int64_t{1} << 24;

// The shared checks: ids float32 of any shape with N elements, table
// [V,D] float32 with V in [1, kMaxRows], rows [ids..., D] or those rows
// with other axes of one ([N,1,L,D] for ids [N,L]: how the executor holds
// a sequence) (EmbeddingLookup's y, EmbeddingGradient's dy). INVALID_ARGUMENT naming
// `op` and the tensor.
absl::Status CheckEmbedding(const char* op, const DeviceTensor& ids, const DeviceTensor& table,
                            const DeviceTensor& rows, int64_t* n, int64_t* v, int64_t* d);

// EmbeddingGradient's: CheckEmbedding of dy, both float32, and dtable of
// the table's shape.
absl::Status CheckEmbeddingGradient(const DeviceTensor& ids, const DeviceTensor& table,
                                    const DeviceTensor& dy, const DeviceTensor& dtable, int64_t* n,
                                    int64_t* v, int64_t* d);

// The INVALID_ARGUMENT of an id that is not one: position `at` of the ids
// holds `value`, for a table of `rows` rows.
absl::Status BadId(const char* op, int64_t at, float value, int64_t rows);

// Ids (the input) and a [V,D] table (the kernel) (kernel_registry.h's Accepts).
bool Accepts(const OpSpec& s);

// y [ids..., D] = table[ids]: each id's row. A bad id is INVALID_ARGUMENT
// on the CPU; the CUDA kernel writes NaN rows for it (the data check
// refuses such ids before any step).
inline absl::Status EmbeddingLookup(ComputeBackend* be, const DeviceTensor& ids,
                                    const DeviceTensor& table, DeviceTensor* y) {
  const DeviceTensor* in[] = {&ids, &table};
  DeviceTensor* out[] = {y};
  return be->Run(kEmbeddingLookup, in, OpAttrs(), out);
}

// dtable [V,D] = the sum of dy's rows into the rows their ids name, zero
// elsewhere, each row's sum taken in the ids' order (deterministic). The
// table gives the shape only.
inline absl::Status EmbeddingGradient(ComputeBackend* be, const DeviceTensor& ids,
                                      const DeviceTensor& table, const DeviceTensor& dy,
                                      DeviceTensor* dtable) {
  const DeviceTensor* in[] = {&ids, &table, &dy};
  DeviceTensor* out[] = {dtable};
  return be->Run(kEmbeddingGradient, in, OpAttrs(), out);
}

}  // namespace embedding
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_EMBEDDING_OPS_H_
