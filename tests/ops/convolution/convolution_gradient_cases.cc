// Convolution and Deconvolution: the gradient cases (tests/util/gradient_cases.h), checked against
// finite differences on the reference backend (//tests/training:gradient_check_test) and against
// the reference on CUDA in every precision (//tests/kernels:cuda_gradient_test).
#include <string>
#include <vector>

#include "tests/util/gradient_cases.h"

namespace kiln {
namespace testing {
namespace gradient_cases {

std::vector<GradientCase> ConvolutionGradientCases() {
  std::vector<GradientCase> out;
  out.push_back(
      Case("conv_3x3_pad1", "Convolution", {{2, 3, 5, 5}, {4, 3, 3, 3}, {4}}, {{"pad", Is({1})}}));
  out.push_back(Case("conv_stride2_group2", "Convolution", {{2, 4, 6, 7}, {6, 2, 3, 2}, {6}},
                     {{"stride", Is({2})}, {"pad", Is({1, 0})}, {"group", I(2)}}));
  out.push_back(Case("conv_dilated_nobias", "Convolution", {{1, 2, 7, 6}, {3, 2, 2, 3}},
                     {{"dilation", Is({2})}, {"stride", Is({1, 2})}}));
  out.push_back(Case("conv_flip", "Convolution", {{1, 2, 4, 4}, {2, 2, 3, 3}, {2}},
                     {{"mode", S("convolution")}}));
  out.push_back(Case("conv_3d", "Convolution", {{1, 2, 3, 4, 4}, {2, 2, 2, 2, 2}, {2}}));
  out.push_back(Case("deconv_stride2", "Deconvolution", {{2, 3, 3, 4}, {3, 2, 3, 3}, {2}},
                     {{"stride", Is({2})}, {"pad", Is({1})}}));
  return out;
}

}  // namespace gradient_cases
}  // namespace testing
}  // namespace kiln
