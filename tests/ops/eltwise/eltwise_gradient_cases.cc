// Scale, Bias and Eltwise: the gradient cases (tests/util/gradient_cases.h), checked against finite
// differences on the reference backend (//tests/training:gradient_check_test) and against the
// reference on CUDA in every precision (//tests/kernels:cuda_gradient_test).
#include <string>
#include <vector>

#include "tests/util/gradient_cases.h"

namespace kiln {
namespace testing {
namespace gradient_cases {

std::vector<GradientCase> ScaleBiasGradientCases() {
  std::vector<GradientCase> out;
  out.push_back(Case("scale_bias", "Scale", {{2, 3, 4, 4}, {3}, {3}}));
  out.push_back(Case("scale_two_axes", "Scale", {{2, 3, 4, 2}, {3, 4}}, {{"num_axes", I(2)}}));
  out.push_back(Case("bias", "Bias", {{2, 3, 2, 2}, {3}}));
  return out;
}

std::vector<GradientCase> EltwiseGradientCases() {
  std::vector<GradientCase> out;
  out.push_back(Case("eltwise_sum_coeffs", "Eltwise", {{2, 3, 4}, {2, 3, 4}},
                     {{"coeffs", AttrValue(std::vector<double>{0.5, -2.0})}}));
  out.push_back(Case("eltwise_prod", "Eltwise", {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}},
                     {{"operation", S("prod")}}));
  out.push_back(
      Case("eltwise_max", "Eltwise", {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}}, {{"operation", S("max")}}));
  // With a fused ReLU (a residual sum and its ReLU), plain and leaky.
  out.push_back(Case("eltwise_sum_relu", "Eltwise", {{2, 3, 4, 5}, {2, 3, 4, 5}},
                     {{"activation", S("relu")}}));
  out.push_back(
      Case("eltwise_max_leaky_relu", "Eltwise", {{2, 3, 4}, {2, 3, 4}},
           {{"operation", S("max")}, {"activation", S("relu")}, {"negative_slope", F(0.2)}}));
  return out;
}

}  // namespace gradient_cases
}  // namespace testing
}  // namespace kiln
