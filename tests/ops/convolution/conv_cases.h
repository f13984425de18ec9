// The convolution configurations every convolution test runs: odd sizes, strides 2-4, padding,
// dilation 2, groups 2 and depthwise, 3-d, NHWC, non-contiguous sub-regions, batch 1, true
// convolution and alpha/beta != (1, 0). Shared by the CPU view/gradient tests and the GPU tests
// so both check the same problems.
#ifndef KILN_TESTS_OPS_CONVOLUTION_CONV_CASES_H_
#define KILN_TESTS_OPS_CONVOLUTION_CONV_CASES_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "dnn/conv_problem.h"
#include "dnn/descriptors.h"

namespace kiln {
namespace testing {

struct ConvCase {
  std::string name;
  dnn::TensorDescriptor x, y;
  dnn::FilterDescriptor w;
  dnn::ConvolutionDescriptor conv;
  float alpha = 1, beta = 0;
  dnn::ConvProblem problem;
};

// Builds every case for `dtype` and `math`; aborts the test binary on a malformed case (a bug in
// this list, not in the code under test).
std::vector<ConvCase> ConvTestCases(DataType dtype, dnn::MathMode math);

// `count` uniform values in [-1, 1), different for every seed.
std::vector<float> RandomValues(int64_t count, uint32_t seed);

// Rounds every value to what `dtype` can hold (f16/bf16), so CPU and GPU see identical inputs.
void RoundTo(DataType dtype, std::vector<float>& values);

}  // namespace testing
}  // namespace kiln

#endif  // KILN_TESTS_OPS_CONVOLUTION_CONV_CASES_H_
