// LRN: the CUDA kernels against the reference backend (skipped where
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
        KernelCase{"Lrn", "LRN", {{2, 9, 5, 7}}, {{"alpha", 0.5}, {"k", 2.0}},
                   "cuda.lrn.any.any.dnn_lrn"}),
    KernelCaseName);
// clang-format on

}  // namespace
}  // namespace testing
}  // namespace kiln
