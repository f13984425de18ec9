// Test hooks for failures that cannot be provoked from outside a process at a chosen moment:
// a SIGKILL in the middle of writing a snapshot, and one rank of a multi-GPU job failing alone.
// Both are off unless their environment variable is set (read once per process); the tests that
// use them are tests/tools/kiln_kill_test.cc and tools/gpu_check_resume.sh.
//
//   KILN_TEST_KILL_AT_WRITE_POINT=N   the process kills itself with SIGKILL when it reaches the
//                                     N-th write point (1-based, counted over the process).
//                                     Every WriteFileBytes has three: half of the bytes written,
//                                     the whole file synced but not yet renamed, renamed.
//   KILN_TEST_FAIL_RANK_AT=R:I        rank R of a data-parallel job fails with an Internal error
//                                     before its step at iteration I (every other rank goes on).
#ifndef KILN_BASE_FAULT_INJECTION_H_
#define KILN_BASE_FAULT_INJECTION_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace kiln {

// Counts a write point; kills the process if it is the one KILN_TEST_KILL_AT_WRITE_POINT names
// (after a line on stderr naming the point and `path`). Async-signal-safe it is not: call it only
// from ordinary code.
void ReachWritePoint(absl::string_view point, absl::string_view path);

// The error KILN_TEST_FAIL_RANK_AT asks for at this rank and iteration, else OK.
absl::Status InjectedRankFailure(int rank, int64_t iteration);

}  // namespace kiln

#endif  // KILN_BASE_FAULT_INJECTION_H_
