// Bias's gradient: the fast CPU kernels against the reference backend, on fresh
// random inputs of odd sizes.
// Cases of //tests/kernels:cpu_test (tests/util/kernel_cases.h).
#include <string>

#include "gtest/gtest.h"
#include "tests/util/kernel_cases.h"

namespace kiln {
namespace testing {
namespace {

using Ints = std::vector<int64_t>;

// One case per line reads better than the formatter's layout.
// clang-format off
INSTANTIATE_TEST_SUITE_P(
    Shapes, CpuVsReferenceTest,
    ::testing::Values(
        KernelCase{"BiasGradient", "BiasGradient", {{3, 5, 4, 6}},
                   {{"param_dims", Ints{5}}}, "cpu.biasgradient.f32.any.direct"}),
    KernelCaseName);
// clang-format on

}  // namespace
}  // namespace testing
}  // namespace kiln
