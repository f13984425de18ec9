// InnerProduct: the gradient cases (tests/util/gradient_cases.h), checked against finite
// differences on the reference backend (//tests/training:gradient_check_test) and against the
// reference on CUDA in every precision (//tests/kernels:cuda_gradient_test).
#include <string>
#include <vector>

#include "tests/util/gradient_cases.h"

namespace kiln {
namespace testing {
namespace gradient_cases {

std::vector<GradientCase> InnerProductGradientCases() {
  std::vector<GradientCase> out;
  out.push_back(Case("ip", "InnerProduct", {{3, 2, 2, 2}, {5, 8}, {5}}));
  out.push_back(
      Case("ip_transpose", "InnerProduct", {{3, 6}, {6, 4}, {4}}, {{"transpose", B(true)}}));
  out.push_back(Case("ip_axis2", "InnerProduct", {{2, 3, 2, 2}, {3, 4}}, {{"axis", I(2)}}));
  return out;
}

}  // namespace gradient_cases
}  // namespace testing
}  // namespace kiln
