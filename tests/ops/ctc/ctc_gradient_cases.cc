// CTCLoss: the gradient cases (tests/util/gradient_cases.h): the activations' gradient against
// finite differences on the reference backend (//tests/training:gradient_check_test) and CUDA
// against the reference in every precision (//tests/kernels:cuda_gradient_test). Labels and
// lengths are fixed inputs (they get no gradient), ragged, with padding past each label.
#include <functional>
#include <vector>

#include "tests/util/gradient_cases.h"

namespace kiln {
namespace testing {
namespace gradient_cases {

namespace {

std::function<void(HostTensor&)> Values(std::vector<float> values) {
  return [values](HostTensor& t) {
    for (int64_t i = 0; i < t.type().num_elements(); ++i) t.SetFloat(i, values[i]);
  };
}

}  // namespace

std::vector<GradientCase> CtcGradientCases() {
  std::vector<GradientCase> out;
  // T = 6, N = 3, C = 5, blank 0: a repeated label (2 2 needs its blank), a one-label sample
  // over 4 frames, two labels over 5; padding 0 past each length.
  GradientCase mean =
      Case("ctc_mean_ragged", "CTCLoss", {{6, 3, 5}, {3, 3}, {3}, {3}}, {{"reduction", S("mean")}});
  mean.fixed_inputs[1] = Values({1, 2, 2, 3, 0, 0, 4, 1, 0});
  mean.fixed_inputs[2] = Values({6, 4, 5});
  mean.fixed_inputs[3] = Values({3, 1, 2});
  mean.loss_weight = 1.3;
  out.push_back(mean);
  // The blank last (4), sum, zero_infinity: an empty label, and [1, 1] over 2 frames, which
  // cannot align (infinite loss, zeroed with its gradient).
  GradientCase sum =
      Case("ctc_sum_blank_last_zero_infinity", "CTCLoss", {{5, 4, 5}, {4, 2}, {4}, {4}},
           {{"reduction", S("sum")}, {"blank", I(4)}, {"zero_infinity", B(true)}});
  sum.fixed_inputs[1] = Values({0, 3, 2, 4, 1, 1, 3, 0});
  sum.fixed_inputs[2] = Values({5, 3, 2, 4});
  sum.fixed_inputs[3] = Values({2, 0, 2, 2});
  sum.loss_weight = 0.6;
  out.push_back(sum);
  return out;
}

}  // namespace gradient_cases
}  // namespace testing
}  // namespace kiln
