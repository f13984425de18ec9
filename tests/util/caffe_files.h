// Test helpers for the shared Caffe files (@caffe_models, ../shared/models/caffe).
#ifndef KILN_TESTS_UTIL_CAFFE_FILES_H_
#define KILN_TESTS_UTIL_CAFFE_FILES_H_

#include <cstdlib>
#include <fstream>
#include <string>

namespace kiln {

// The path of a shared Caffe file in the test's runfiles.
inline std::string CaffeFile(const std::string& name) {
  const char* root = std::getenv("TEST_SRCDIR");
  const std::string base = root ? root : ".";
  for (const std::string& dir : {base + "/caffe_models/", base + "/kiln/external/caffe_models/"}) {
    if (std::ifstream(dir + name).good()) return dir + name;
  }
  return base + "/caffe_models/" + name;
}

// A fresh path in the test's scratch folder.
inline std::string ScratchFile(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name;
}

}  // namespace kiln

#endif  // KILN_TESTS_UTIL_CAFFE_FILES_H_
