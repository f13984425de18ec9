#include "base/fault_injection.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace kiln {
namespace {

// The N of KILN_TEST_KILL_AT_WRITE_POINT; 0 (off) when unset or not a positive number.
int64_t KillPoint() {
  static const int64_t point = [] {
    const char* value = std::getenv("KILN_TEST_KILL_AT_WRITE_POINT");
    int64_t n = 0;
    if (value == nullptr || !absl::SimpleAtoi(value, &n) || n < 1) return int64_t{0};
    return n;
  }();
  return point;
}

struct RankFailure {
  bool on = false;
  int rank = 0;
  int64_t iteration = 0;
};

RankFailure RankFailureAsked() {
  static const RankFailure asked = [] {
    RankFailure f;
    const char* value = std::getenv("KILN_TEST_FAIL_RANK_AT");
    if (value == nullptr) return f;
    std::pair<std::string, std::string> parts = absl::StrSplit(value, ':');
    f.on = absl::SimpleAtoi(parts.first, &f.rank) && absl::SimpleAtoi(parts.second, &f.iteration);
    return f;
  }();
  return asked;
}

}  // namespace

void ReachWritePoint(absl::string_view point, absl::string_view path) {
  static std::atomic<int64_t> reached{0};
  const int64_t target = KillPoint();
  if (target == 0) return;
  if (reached.fetch_add(1) + 1 != target) return;
  std::fprintf(stderr, "kiln: KILN_TEST_KILL_AT_WRITE_POINT=%lld: killed at %s of %s\n",
               static_cast<long long>(target), std::string(point).c_str(),
               std::string(path).c_str());
  std::fflush(stderr);
  kill(getpid(), SIGKILL);
}

absl::Status InjectedRankFailure(int rank, int64_t iteration) {
  const RankFailure f = RankFailureAsked();
  if (!f.on || f.rank != rank || f.iteration != iteration) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("rank ", rank, " failed at iteration ", iteration,
                                          " (KILN_TEST_FAIL_RANK_AT, a test hook)"));
}

}  // namespace kiln
