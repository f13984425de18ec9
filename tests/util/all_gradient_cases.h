// Every gradient case: each op family's table (tests/ops/<family>/<family>_gradient_cases.cc), in
// a fixed order (the tests' seeds follow it). The reference backend is checked on them against
// finite differences (tests/training/gradient_check_test.cc), the CUDA backend against the
// reference in every precision (tests/kernels/cuda_gradient_test.cc).
#ifndef KILN_TESTS_UTIL_ALL_GRADIENT_CASES_H_
#define KILN_TESTS_UTIL_ALL_GRADIENT_CASES_H_

#include <vector>

#include "tests/util/gradient_cases.h"

namespace kiln {
namespace testing {

// Every gradient case (every differentiable op, several attribute forms each).
std::vector<GradientCase> AllGradientCases();

}  // namespace testing
}  // namespace kiln

#endif  // KILN_TESTS_UTIL_ALL_GRADIENT_CASES_H_
