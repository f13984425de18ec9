// The activations and PReLU: the gradient cases (tests/util/gradient_cases.h), checked against
// finite differences on the reference backend (//tests/training:gradient_check_test) and against
// the reference on CUDA in every precision (//tests/kernels:cuda_gradient_test).
#include <string>
#include <vector>

#include "tests/util/gradient_cases.h"

namespace kiln {
namespace testing {
namespace gradient_cases {

std::vector<GradientCase> ActivationGradientCases() {
  std::vector<GradientCase> out;
  const std::vector<Ints> x = {{2, 3, 4, 5}};
  out.push_back(Case("relu", "ReLU", x));
  out.push_back(Case("leaky_relu", "ReLU", x, {{"negative_slope", F(0.1)}}));
  out.push_back(Case("relu_negative_slope", "ReLU", x, {{"negative_slope", F(-0.3)}}));
  out.push_back(Case("sigmoid", "Sigmoid", x));
  out.push_back(Case("tanh", "TanH", x));
  out.push_back(Case("elu", "ELU", x, {{"alpha", F(0.7)}}));
  out.push_back(Case("clipped_relu", "ClippedReLU", x, {{"ceiling", F(0.55)}}));
  out.push_back(
      Case("power", "Power", x, {{"power", F(2.0)}, {"scale", F(0.5)}, {"shift", F(1.5)}}));
  out.push_back(Case("absval", "AbsVal", x));
  out.push_back(Case("prelu", "PReLU", {{2, 3, 3, 2}, {3}}));
  out.push_back(Case("prelu_shared", "PReLU", {{2, 3, 3, 2}, {1}}, {{"channel_shared", B(true)}}));
  return out;
}

}  // namespace gradient_cases
}  // namespace testing
}  // namespace kiln
