#include "tools/progress_line.h"

#include <unistd.h>

#include <cstdio>
#include <utility>

namespace kiln {

ProgressLine::ProgressLine(std::string what, std::string unit)
    : what_(std::move(what)),
      unit_(std::move(unit)),
      tty_(isatty(STDERR_FILENO) == 1),
      start_(Clock::now()),
      last_(start_) {}

void ProgressLine::Update(int64_t done, int64_t total) {
  const Clock::time_point now = Clock::now();
  const double since_last = std::chrono::duration<double>(now - last_).count();
  if (done != total && since_last < (tty_ ? 0.1 : 5.0)) return;
  last_ = now;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double rate = elapsed > 0 ? done / elapsed : 0.0;
  const double eta = rate > 0 ? (total - done) / rate : 0.0;
  std::fprintf(stderr, "%s%s: %lld/%lld %s (%.1f%%), %.0f %s/s, ETA %.0fs%s", tty_ ? "\r" : "",
               what_.c_str(), static_cast<long long>(done), static_cast<long long>(total),
               unit_.c_str(), total > 0 ? 100.0 * done / total : 100.0, rate, unit_.c_str(), eta,
               tty_ && done != total ? "" : "\n");
  std::fflush(stderr);
}

double ProgressLine::Seconds() const {
  return std::chrono::duration<double>(Clock::now() - start_).count();
}

}  // namespace kiln
