// BatchNorm and AffineBatchNorm: the gradient cases (tests/util/gradient_cases.h), checked against
// finite differences on the reference backend (//tests/training:gradient_check_test) and against
// the reference on CUDA in every precision (//tests/kernels:cuda_gradient_test).
#include <string>
#include <vector>

#include "tests/util/gradient_cases.h"

namespace kiln {
namespace testing {
namespace gradient_cases {

std::vector<GradientCase> BatchNormGradientCases() {
  std::vector<GradientCase> out;
  GradientCase bn = Case("batchnorm_batch_stats", "BatchNorm", {{4, 3, 2, 3}, {3}, {3}},
                         {{"use_global_stats", B(false)}});
  bn.fixed_inputs[1] = Constant(0.0f);
  bn.fixed_inputs[2] = Constant(1.0f);
  out.push_back(bn);
  GradientCase bn_global = Case("batchnorm_global_stats", "BatchNorm",
                                {{3, 3, 2, 2}, {3}, {3}, {1}}, {{"use_global_stats", B(true)}});
  bn_global.fixed_inputs[1] = Uniform(-0.5f, 0.5f);
  bn_global.fixed_inputs[2] = Uniform(0.5f, 2.0f);
  bn_global.fixed_inputs[3] = Constant(2.0f);
  out.push_back(bn_global);
  // The fused training form of Caffe's BatchNorm + Scale: x, scale and bias get gradients.
  GradientCase affine =
      Case("affine_batchnorm", "AffineBatchNorm", {{4, 3, 2, 3}, {3}, {3}, {1}, {3}, {3}});
  affine.fixed_inputs[1] = Uniform(-0.5f, 0.5f);
  affine.fixed_inputs[2] = Uniform(0.5f, 2.0f);
  affine.fixed_inputs[3] = Constant(2.0f);
  affine.gradient_outputs = 1;  // y; the saved mean and inverse std feed only the backward
  out.push_back(affine);
  // Training's form: the running statistics updated into new outputs (no gradient either).
  GradientCase affine_running = affine;
  affine_running.name = "affine_batchnorm_running_stats";
  affine_running.attrs = {{"update_running_stats", B(true)}, {"moving_average_fraction", F(0.9)}};
  out.push_back(affine_running);
  // With the ReLU after the pair folded in: dy counts where the output is positive.
  GradientCase affine_relu = affine;
  affine_relu.name = "affine_batchnorm_relu";
  affine_relu.attrs = {{"relu", B(true)}};
  out.push_back(affine_relu);
  return out;
}

}  // namespace gradient_cases
}  // namespace testing
}  // namespace kiln
