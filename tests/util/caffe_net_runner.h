// Caffe nets from prototxt text, imported and run on a host backend with poisoned buffers: the
// two steps the Caffe layer tests (tests/caffe/) share.
#ifndef KILN_TESTS_UTIL_CAFFE_NET_RUNNER_H_
#define KILN_TESTS_UTIL_CAFFE_NET_RUNNER_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "frontends/caffe/caffe_model.h"
#include "runtime/compiler.h"

namespace kiln {
namespace testing {

// Parses `text` as a NetParameter and imports it (TEST phase, fillers seeded by `fill_seed`,
// the blobs of `weights` where it has them).
absl::StatusOr<CaffeModel> ImportNetText(const std::string& text, uint64_t fill_seed = 1,
                                         const caffe::NetParameter* weights = nullptr);

// Runs `model` on `backend` with each input blob bound to `inputs[blob]` (f32, the input's
// dims); every graph output by name.
absl::StatusOr<std::map<std::string, std::vector<float>>> RunNet(
    const CaffeModel& model, const std::map<std::string, std::vector<float>>& inputs,
    BackendChoice backend = BackendChoice::kReference);

}  // namespace testing
}  // namespace kiln

#endif  // KILN_TESTS_UTIL_CAFFE_NET_RUNNER_H_
