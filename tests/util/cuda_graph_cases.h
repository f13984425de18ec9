// Shared driver of the graph CUDA kernel tests: each case is an op, its inputs and attributes;
// the driver runs it in f32, f16 and bf16, in NCHW and (for 4-d data) NHWC, on CUDA and on the
// reference backend with fresh random inputs and poisoned buffers, and checks every output.
#ifndef KILN_TESTS_UTIL_CUDA_GRAPH_CASES_H_
#define KILN_TESTS_UTIL_CUDA_GRAPH_CASES_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ir/attribute.h"
#include "ir/host_tensor.h"

namespace kiln {
namespace testing {

// One input of a case.
struct CaseInput {
  std::vector<int64_t> dims;
  // Data follow the plan's dtype and layout; parameters stay f32 row-major (as the compiler
  // keeps BatchNorm/Scale/PReLU parameters); labels are f32 integers in [0, label_classes).
  enum Kind { kData, kParameter, kLabels } kind = kData;
  float lo = -1.0f, hi = 1.0f;  // the uniform range of random values
  int64_t label_classes = 0;
  int64_t ignored_label = -1;  // one label in every few set to this, when >= 0
};

// Shorthands for the case tables.
CaseInput DataInput(std::vector<int64_t> dims, float lo = -1, float hi = 1);
CaseInput ParameterInput(std::vector<int64_t> dims, float lo = -1, float hi = 1);
CaseInput LabelInput(std::vector<int64_t> dims, int64_t classes, int64_t ignored = -1);

struct GraphKernelCase {
  std::string label;
  std::string op;
  std::vector<CaseInput> inputs;
  AttrMap attrs;
  bool nhwc = true;  // also run with channels-last 4-d data
  // Looser tolerances for reductions over many 16-bit terms (a loss), as a multiple.
  double tolerance_scale = 1.0;
};

// True when the default registry has a CUDA kernel for `op`.
bool HasCudaKernel(const std::string& op);

// Runs every variant of `c`, returns how many ran; failures are reported through gtest
// (EXPECT_*), naming the case, dtype and layout.
int RunGraphKernelCase(const GraphKernelCase& c, uint32_t seed);

}  // namespace testing
}  // namespace kiln

#endif  // KILN_TESTS_UTIL_CUDA_GRAPH_CASES_H_
