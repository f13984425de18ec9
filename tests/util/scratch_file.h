// A fresh path in the test's scratch folder (TEST_TMPDIR).
#ifndef KILN_TESTS_UTIL_SCRATCH_FILE_H_
#define KILN_TESTS_UTIL_SCRATCH_FILE_H_

#include <cstdlib>
#include <string>

namespace kiln {

inline std::string ScratchFile(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name;
}

}  // namespace kiln

#endif  // KILN_TESTS_UTIL_SCRATCH_FILE_H_
