// The live progress line of the long-running kiln commands that count records (convert).
#ifndef KILN_TOOLS_PROGRESS_LINE_H_
#define KILN_TOOLS_PROGRESS_LINE_H_

#include <chrono>
#include <cstdint>
#include <string>

namespace kiln {

// One progress line on stderr, "<what>: done/total <unit> (percent), rate, ETA": rewritten in
// place on a terminal, a new line every few seconds when stderr goes to a file or a pipe (where
// carriage returns would pile up). The last update (done == total) always prints.
class ProgressLine {
 public:
  ProgressLine(std::string what, std::string unit);

  void Update(int64_t done, int64_t total);
  // Seconds since the line was created.
  double Seconds() const;

 private:
  using Clock = std::chrono::steady_clock;
  std::string what_;
  std::string unit_;
  bool tty_;
  Clock::time_point start_;
  Clock::time_point last_;
};

}  // namespace kiln

#endif  // KILN_TOOLS_PROGRESS_LINE_H_
