// Test helpers for the shared Caffe files (@caffe_models: third_party/caffe_models, pinned by
// sha256, from ../shared/models/caffe or their public origins).
//
// A test binary that includes this header skips all its tests, saying which files are missing,
// when the repository could not provide the whole corpus (a clone with neither ../shared nor a
// network): it is a test of those files, and would otherwise fail on a missing path.
#ifndef KILN_TESTS_UTIL_CAFFE_FILES_H_
#define KILN_TESTS_UTIL_CAFFE_FILES_H_

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "tests/util/scratch_file.h"

namespace kiln {

// The folder of @caffe_models in the test's runfiles.
inline std::string CaffeModelsDir() {
  const char* root = std::getenv("TEST_SRCDIR");
  const std::string base = root ? root : ".";
  for (const std::string& dir : {base + "/caffe_models/", base + "/kiln/external/caffe_models/"}) {
    if (std::ifstream(dir + "MISSING").good() || std::ifstream(dir + "lenet.prototxt").good()) {
      return dir;
    }
  }
  return base + "/caffe_models/";
}

// The path of a shared Caffe file in the test's runfiles.
inline std::string CaffeFile(const std::string& name) { return CaffeModelsDir() + name; }

namespace internal {

// Skips every test of the binary when @caffe_models lists missing files.
class CaffeCorpusCheck : public ::testing::Environment {
 public:
  void SetUp() override {
    std::ifstream in(CaffeModelsDir() + "MISSING");
    std::stringstream missing;
    missing << in.rdbuf();
    if (!missing.str().empty()) {
      GTEST_SKIP() << "the Caffe test corpus is incomplete (neither ../shared/models/caffe nor "
                      "the network gave these files): "
                   << missing.str();
    }
  }
};

inline const bool kCaffeCorpusCheckRegistered =
    (::testing::AddGlobalTestEnvironment(new CaffeCorpusCheck), true);

}  // namespace internal
}  // namespace kiln

#endif  // KILN_TESTS_UTIL_CAFFE_FILES_H_
