// Pooling and its gradient: the fast CPU kernels against the reference backend, on fresh
// random inputs of odd sizes.
// Cases of //tests/kernels:cpu_test (tests/util/kernel_cases.h).
#include <string>

#include "gtest/gtest.h"
#include "tests/util/kernel_cases.h"

namespace kiln {
namespace testing {
namespace {

using Ints = std::vector<int64_t>;

const char kPool[] = "cpu.pooling.f32.nchw.direct";
const char kPoolGrad[] = "cpu.poolinggradient.f32.nchw.direct";

// One case per line reads better than the formatter's layout.
// clang-format off
INSTANTIATE_TEST_SUITE_P(
    Shapes, CpuVsReferenceTest,
    ::testing::Values(
        // Pooling and its backward kernel of training (pooling_cpu.cc).
        KernelCase{"MaxPoolCeil", "Pooling", {{2, 3, 11, 9}},
                   {{"kernel", Ints{3}}, {"stride", Ints{2}}, {"rounding", std::string("ceil")}}, kPool},
        KernelCase{"AvePoolPad", "Pooling", {{1, 4, 8, 7}},
                   {{"mode", std::string("avg")}, {"kernel", Ints{3}}, {"stride", Ints{2}},
                    {"pad", Ints{1}}}, kPool},
        KernelCase{"AvePoolExcludePad", "Pooling", {{1, 2, 6, 6}},
                   {{"mode", std::string("avg_exclude_pad")}, {"kernel", Ints{3}}, {"pad", Ints{1}}},
                   kPool},
        KernelCase{"MaxPoolGradient", "PoolingGradient", {{2, 3, 11, 9}, {2, 3, 5, 4}, {2, 3, 5, 4}},
                   {{"kernel", Ints{3}}, {"stride", Ints{2}}}, kPoolGrad},
        KernelCase{"AvePoolGradient", "PoolingGradient", {{1, 4, 8, 7}, {1, 4, 4, 4}, {1, 4, 4, 4}},
                   {{"mode", std::string("avg")}, {"kernel", Ints{3}}, {"stride", Ints{2}},
                    {"pad", Ints{1}}}, kPoolGrad}),
    KernelCaseName);
// clang-format on

}  // namespace
}  // namespace testing
}  // namespace kiln
