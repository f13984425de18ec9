// Pooling: the gradient cases (tests/util/gradient_cases.h), checked against finite differences
// on the reference backend (//tests/training:gradient_check_test) and against the reference on
// CUDA in every precision (//tests/kernels:cuda_gradient_test).
#include <string>
#include <vector>

#include "tests/util/gradient_cases.h"

namespace kiln {
namespace testing {
namespace gradient_cases {

std::vector<GradientCase> PoolingGradientCases() {
  std::vector<GradientCase> out;
  out.push_back(Case("maxpool_3x3s2_ceil", "Pooling", {{2, 2, 7, 7}},
                     {{"kernel", Is({3})}, {"stride", Is({2})}, {"rounding", S("ceil")}}));
  out.push_back(Case("maxpool_pad", "Pooling", {{1, 2, 6, 5}},
                     {{"kernel", Is({2})}, {"stride", Is({2})}, {"pad", Is({1})}}));
  out.push_back(Case("avepool_pad", "Pooling", {{2, 2, 5, 6}},
                     {{"mode", S("avg")},
                      {"kernel", Is({3})},
                      {"stride", Is({2})},
                      {"pad", Is({1})},
                      {"rounding", S("ceil")}}));
  out.push_back(Case("avepool_exclude", "Pooling", {{1, 2, 5, 5}},
                     {{"mode", S("avg_exclude_pad")}, {"kernel", Is({3})}, {"pad", Is({1})}}));
  out.push_back(
      Case("globalpool", "Pooling", {{2, 3, 3, 4}}, {{"mode", S("avg")}, {"global", B(true)}}));
  return out;
}

}  // namespace gradient_cases
}  // namespace testing
}  // namespace kiln
