// Status plumbing shared by every Kiln library. Abseil 20220623 (Debian 12) has no ABSL_CHECK,
// so KILN_CHECK is our invariant check: it is for bugs in Kiln, never for bad user input, which
// always gets an absl::Status.
#ifndef KILN_BASE_STATUS_MACROS_H_
#define KILN_BASE_STATUS_MACROS_H_

#include "absl/base/internal/raw_logging.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define KILN_STATUS_CONCAT_INNER_(a, b) a##b
#define KILN_STATUS_CONCAT_(a, b) KILN_STATUS_CONCAT_INNER_(a, b)

// Returns the status from the enclosing function when `expr` is not OK.
#define KILN_RETURN_IF_ERROR(expr)               \
  do {                                           \
    ::absl::Status kiln_status_ = (expr);        \
    if (!kiln_status_.ok()) return kiln_status_; \
  } while (0)

// `KILN_ASSIGN_OR_RETURN(auto x, MakeX());` declares x from an OK StatusOr, else returns.
#define KILN_ASSIGN_OR_RETURN(lhs, expr) \
  KILN_ASSIGN_OR_RETURN_IMPL_(KILN_STATUS_CONCAT_(kiln_statusor_, __LINE__), lhs, expr)
#define KILN_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()

// Aborts with file:line when an internal invariant is broken.
#define KILN_CHECK(cond)                                                  \
  do {                                                                    \
    if (!(cond)) ABSL_RAW_LOG(FATAL, "Kiln invariant failed: %s", #cond); \
  } while (0)

namespace kiln {

// Prefixes `status`'s message with `context` ("import: layer 'x'", ...), keeping the code.
absl::Status Annotate(const absl::Status& status, absl::string_view context);

}  // namespace kiln

#endif  // KILN_BASE_STATUS_MACROS_H_
