// Pooling and its gradient: the CUDA kernels against the reference backend (skipped where
// no CUDA device is usable).
// Cases of //tests/kernels:cuda_test (tests/util/kernel_cases.h).
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
        KernelCase{"MaxPool", "Pooling", {{2, 5, 13, 13}},
                   {{"kernel", Ints{3}}, {"stride", Ints{2}}, {"rounding", std::string("ceil")}},
                   "cuda.pooling.any.any.dnn_pooling"},
        KernelCase{"AvgPoolPadded", "Pooling", {{1, 3, 9, 10}},
                   {{"kernel", Ints{3}}, {"stride", Ints{2}}, {"pad", Ints{1}},
                    {"mode", std::string("avg")}, {"rounding", std::string("ceil")}},
                   "cuda.pooling.any.any.dnn_pooling"},
        KernelCase{"AvgPoolExcludePad", "Pooling", {{1, 3, 9, 10}},
                   {{"kernel", Ints{3}}, {"stride", Ints{2}}, {"pad", Ints{1}},
                    {"mode", std::string("avg_exclude_pad")}},
                   "cuda.pooling.any.any.dnn_pooling"}),
    KernelCaseName);
// clang-format on

}  // namespace
}  // namespace testing
}  // namespace kiln
