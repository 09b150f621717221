// Rows of an embedding table read from the servers that hold its parts
// (PullRequest.rows), for the chief's digest and exports: a range of rows at
// a time, so that the chief never holds a whole table.
#ifndef PSC_CHIEF_TABLE_ROWS_H_
#define PSC_CHIEF_TABLE_ROWS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/ps_client/parameter_client.h"
#include "proto/job.pb.h"

namespace psc {
namespace chief {

// Rows [first, first + count) of the variable `placement` places (values
// when `slot` is 0, else its optimizer slot `slot - 1`) into `out`, count ×
// the row's elements, from each part they fall in, in float32.
// INVALID_ARGUMENT for a range outside the variable or a part that sends
// other rows than asked; the servers' errors as they are.
absl::Status ReadTableRows(ps_client::ParameterClient* servers,
                           const proto::VariablePlacement& placement, int slot, int64_t first,
                           int64_t count, absl::Duration timeout, float* out);

}  // namespace chief
}  // namespace psc

#endif  // PSC_CHIEF_TABLE_ROWS_H_
