// Status propagation macros. Abseil 20220623 has no ABSL_RETURN_IF_ERROR, so
// pscluster defines its own, in the spirit of Abseil's internal ones.
#ifndef PSC_COMMON_BASE_STATUS_MACROS_H_
#define PSC_COMMON_BASE_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// Evaluates `expr` (an absl::Status); returns it from the caller if not OK.
#define PSC_RETURN_IF_ERROR(expr)              \
  do {                                         \
    ::absl::Status psc_status_ = (expr);       \
    if (!psc_status_.ok()) return psc_status_; \
  } while (0)

#define PSC_STATUS_MACROS_CONCAT_INNER_(x, y) x##y
#define PSC_STATUS_MACROS_CONCAT_(x, y) PSC_STATUS_MACROS_CONCAT_INNER_(x, y)

// Evaluates `rexpr` (an absl::StatusOr<T>); on error returns its status from
// the caller, else moves the value into `lhs` (a declaration or an lvalue).
#define PSC_ASSIGN_OR_RETURN(lhs, rexpr) \
  PSC_ASSIGN_OR_RETURN_IMPL_(PSC_STATUS_MACROS_CONCAT_(psc_statusor_, __LINE__), lhs, rexpr)

#define PSC_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr)   \
  auto statusor = (rexpr);                                 \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()

#endif  // PSC_COMMON_BASE_STATUS_MACROS_H_
