// LRN: the gradient cases (tests/util/gradient_cases.h), checked against finite differences
// on the reference backend (//tests/training:gradient_check_test) and against the reference on
// CUDA in every precision (//tests/kernels:cuda_gradient_test).
#include <string>
#include <vector>

#include "tests/util/gradient_cases.h"

namespace kiln {
namespace testing {
namespace gradient_cases {

std::vector<GradientCase> LrnGradientCases() {
  std::vector<GradientCase> out;
  out.push_back(Case("lrn_across", "LRN", {{2, 7, 3, 3}},
                     {{"local_size", I(5)}, {"alpha", F(0.5)}, {"beta", F(0.75)}, {"k", F(2.0)}}));
  out.push_back(Case("lrn_within", "LRN", {{2, 2, 5, 5}},
                     {{"region", S("within_channel")},
                      {"local_size", I(3)},
                      {"alpha", F(0.8)},
                      {"beta", F(0.75)}}));
  return out;
}

}  // namespace gradient_cases
}  // namespace testing
}  // namespace kiln
