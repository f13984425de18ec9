// A small deterministic mutation fuzzer for the test suite: runs a libFuzzer-style target on
// every seed file given on the command line, then on mutations of them (bit flips, byte
// changes, insertions, deletions, duplicated and spliced ranges, truncation) until the
// iteration count or the time budget runs out. Any crash or sanitizer report fails the test.
// The long runs use real libFuzzer (tools/fuzz.sh); this keeps a short one in every CI run.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_targets.h"

namespace {

// The input under test, for the crash handler: on a fatal signal it is written to crash-input in
// $TEST_UNDECLARED_OUTPUTS_DIR (or the working directory), so the failure can be replayed.
const std::string* g_current = nullptr;
char g_crash_path[4096] = "crash-input";

void OnFatalSignal(int sig) {
  if (g_current != nullptr) {
    const int fd = open(g_crash_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ssize_t ignored = write(fd, g_current->data(), g_current->size());
      (void)ignored;
      close(fd);
      static const char kNote[] = "mutation_driver: the crashing input is in crash-input\n";
      ignored = write(2, kNote, sizeof(kNote) - 1);
    }
  }
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void RunOne(const std::string& input) {
  g_current = &input;
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
  g_current = nullptr;
}

std::string Mutate(const std::vector<std::string>& seeds, std::mt19937_64& rng) {
  std::string s = seeds[rng() % seeds.size()];
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int e = 0; e < edits; ++e) {
    const size_t n = s.size();
    switch (rng() % 8) {
      case 0:  // flip a bit
        if (n) s[rng() % n] ^= static_cast<char>(1u << (rng() % 8));
        break;
      case 1:  // set a byte to an interesting value
        if (n) {
          static const char kBytes[] = {0, 1, 0x7f, '\x80', '\xff', '{', '}', ':', '"', '-', '9'};
          s[rng() % n] = kBytes[rng() % sizeof(kBytes)];
        }
        break;
      case 2:  // insert random bytes
        s.insert(n ? rng() % n : 0, std::string(1 + rng() % 8, static_cast<char>(rng())));
        break;
      case 3:  // delete a range
        if (n) {
          const size_t at = rng() % n;
          s.erase(at, 1 + rng() % std::min<size_t>(64, n - at));
        }
        break;
      case 4:  // duplicate a range
        if (n) {
          const size_t at = rng() % n;
          const std::string piece = s.substr(at, 1 + rng() % 64);
          s.insert(rng() % n, piece);
        }
        break;
      case 5: {  // splice in part of another seed
        const std::string& other = seeds[rng() % seeds.size()];
        if (!other.empty() && n) {
          const size_t from = rng() % other.size();
          s.replace(rng() % n, rng() % 32, other.substr(from, 1 + rng() % 256));
        }
        break;
      }
      case 6:  // truncate
        if (n) s.resize(rng() % n);
        break;
      default:  // overwrite a digit run with a large or negative number
        if (n) {
          static const char* const kNumbers[] = {
              "0",          "-1",          "4294967296", "99999999999999999999",
              "2147483647", "-2147483648", "1e40",       "nan"};
          s.insert(rng() % n, kNumbers[rng() % 8]);
        }
        break;
    }
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  long iterations = 20000;
  double seconds = 20.0;
  std::vector<std::string> seeds;
  // --only=S (repeatable): read only the seed files whose path contains one of the S.
  std::vector<std::string> only;
  const auto wanted = [&only](const std::string& path) {
    for (const std::string& s : only) {
      if (path.find(s) != std::string::npos) return true;
    }
    return only.empty();
  };
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--only=", 0) == 0) {
      only.push_back(arg.substr(7));
    } else if (arg[0] != '-' && !wanted(arg)) {
      continue;
    } else if (arg.rfind("--iterations=", 0) == 0) {
      iterations = std::atol(arg.c_str() + 13);
    } else if (arg.rfind("--seconds=", 0) == 0) {
      seconds = std::atof(arg.c_str() + 10);
    } else {
      std::ifstream in(arg, std::ios::binary);
      if (!in) {
        std::fprintf(stderr, "cannot read seed %s\n", arg.c_str());
        return 2;
      }
      seeds.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
  }
  if (seeds.empty()) seeds.push_back("");
  if (const char* dir = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR")) {
    std::snprintf(g_crash_path, sizeof(g_crash_path), "%s/crash-input", dir);
  }
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) std::signal(sig, OnFatalSignal);
  for (const std::string& s : seeds) RunOne(s);
  std::mt19937_64 rng(20261121);
  const auto start = std::chrono::steady_clock::now();
  long done = 0;
  for (; done < iterations; ++done) {
    RunOne(Mutate(seeds, rng));
    if (done % 256 == 0 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > seconds) {
      break;
    }
  }
  std::printf("%zu seeds, %ld mutated inputs, no crash\n", seeds.size(), done);
  return 0;
}
