// Softmax: the gradient cases (tests/util/gradient_cases.h), checked against finite differences
// on the reference backend (//tests/training:gradient_check_test) and against the reference on
// CUDA in every precision (//tests/kernels:cuda_gradient_test).
#include <string>
#include <vector>

#include "tests/util/gradient_cases.h"

namespace kiln {
namespace testing {
namespace gradient_cases {

std::vector<GradientCase> SoftmaxGradientCases() {
  std::vector<GradientCase> out;
  out.push_back(Case("softmax", "Softmax", {{3, 5, 2}}));
  out.push_back(Case("log_softmax", "Softmax", {{4, 6}}, {{"log", B(true)}}));
  return out;
}

}  // namespace gradient_cases
}  // namespace testing
}  // namespace kiln
