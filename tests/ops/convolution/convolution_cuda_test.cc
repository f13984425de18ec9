// Convolution and its backward kernels: the CUDA kernels against the reference backend (skipped
// where no CUDA device is usable). Cases of //tests/kernels:cuda_test (tests/util/kernel_cases.h).
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
    Kernels, CudaVsReferenceTest,
    ::testing::Values(
        KernelCase{"Conv", "Convolution", {{2, 3, 13, 11}, {8, 3, 3, 3}, {8}}, {{"pad", Ints{1}}},
                   "cuda.convolution.any.any.dnn_conv"},
        KernelCase{"ConvGroupsDilated", "Convolution", {{1, 6, 15, 17}, {9, 2, 3, 3}},
                   {{"group", int64_t{3}}, {"dilation", Ints{2}}, {"stride", Ints{2, 1}}},
                   "cuda.convolution.any.any.dnn_conv"}),
    KernelCaseName);
// clang-format on

}  // namespace
}  // namespace testing
}  // namespace kiln
