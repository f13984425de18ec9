// The real `kiln` binary run as a child process from a test (a data dependency on //tools:kiln),
// and the small files such tests write: .npy and IDX images.
#ifndef KILN_TESTS_UTIL_KILN_PROCESS_H_
#define KILN_TESTS_UTIL_KILN_PROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

namespace kiln {

std::string Slurp(const std::string& path);
void Put(const std::string& path, const std::string& bytes);

// The path of the kiln binary in the test's runfiles.
std::string KilnBinary();

struct KilnOutcome {
  int status = -1;  // the exit status, or 128 + the signal that ended it
  std::string output;
};

struct KilnJob {
  std::string dir;                // its working directory
  std::vector<std::string> args;  // after "kiln"
  std::string log;                // stdout and stderr together
  std::vector<std::string> env;   // NAME=VALUE added to this process's environment
};

// Starts one job; returns its pid.
pid_t StartKiln(const KilnJob& job);

// Runs every job, `parallel` at a time; a job still running after 60 s is killed (its output
// then starts with "(timed out) ").
std::vector<KilnOutcome> RunKilnJobs(const std::vector<KilnJob>& jobs, size_t parallel);

// One job in `dir`, its output kept in `dir`/../kiln_output.txt.
KilnOutcome RunKiln(const std::string& dir, const std::vector<std::string>& args,
                    const std::vector<std::string>& env = {});

// A float32 .npy of `dims`, all values `v`.
std::string Npy(const std::vector<int>& dims, float v);
// An IDX file: unsigned bytes, `type_dims` dimensions `dims`, then `data`.
std::string Idx(unsigned char type_dims, const std::vector<int>& dims, const std::string& data);

}  // namespace kiln

#endif  // KILN_TESTS_UTIL_KILN_PROCESS_H_
