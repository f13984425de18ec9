// Dropout: the gradient cases (tests/util/gradient_cases.h), checked against finite differences
// on the reference backend (//tests/training:gradient_check_test) and against the reference on
// CUDA in every precision (//tests/kernels:cuda_gradient_test).
#include <string>
#include <vector>

#include "tests/util/gradient_cases.h"

namespace kiln {
namespace testing {
namespace gradient_cases {

std::vector<GradientCase> DropoutGradientCases() {
  std::vector<GradientCase> out;
  const std::vector<Ints> x = {{2, 3, 4, 5}};
  out.push_back(Case("dropout_training", "Dropout", x,
                     {{"training", B(true)}, {"ratio", F(0.3)}, {"seed", I(7)}}));
  return out;
}

}  // namespace gradient_cases
}  // namespace testing
}  // namespace kiln
