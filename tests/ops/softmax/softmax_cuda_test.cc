// Softmax: the CUDA kernels against the reference backend (skipped where
// no CUDA device is usable).
// Cases of //tests/kernels:cuda_test (tests/util/kernel_cases.h).
#include <string>

#include "gtest/gtest.h"
#include "tests/util/kernel_cases.h"

namespace kiln {
namespace testing {
namespace {

// One case per line reads better than the formatter's layout.
// clang-format off
INSTANTIATE_TEST_SUITE_P(
    Kernels, CudaVsReferenceTest,
    ::testing::Values(
        KernelCase{"Softmax", "Softmax", {{3, 17, 5}}, {}, "cuda.softmax.any.any.dnn_softmax"},
        KernelCase{"LogSoftmaxLastAxis", "Softmax", {{4, 33}}, {{"log", true}, {"axis", int64_t{-1}}},
                   "cuda.softmax.any.any.dnn_softmax"}),
    KernelCaseName);
// clang-format on

}  // namespace
}  // namespace testing
}  // namespace kiln
