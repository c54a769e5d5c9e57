// Status propagation helpers shared by every pdc module.
// Thread-safety: macros only; no state.
#ifndef PDC_COMMON_STATUS_MACROS_H_
#define PDC_COMMON_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define PDC_CONCAT_INNER_(a, b) a##b
#define PDC_CONCAT_(a, b) PDC_CONCAT_INNER_(a, b)

// Returns from the enclosing function when `expr` (an absl::Status) is not OK.
#define RETURN_IF_ERROR(expr)                          \
  do {                                                 \
    ::absl::Status pdc_status_ = (expr);               \
    if (!pdc_status_.ok()) return pdc_status_;         \
  } while (0)

// `ASSIGN_OR_RETURN(auto x, Foo());` assigns the value of an absl::StatusOr or
// returns its error status.
#define ASSIGN_OR_RETURN(lhs, rexpr) \
  PDC_ASSIGN_OR_RETURN_IMPL_(PDC_CONCAT_(pdc_statusor_, __LINE__), lhs, rexpr)

#define PDC_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                               \
  if (!statusor.ok()) return statusor.status();          \
  lhs = std::move(*statusor)

#endif  // PDC_COMMON_STATUS_MACROS_H_
