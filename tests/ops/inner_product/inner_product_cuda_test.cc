// InnerProduct and its backward kernels: the CUDA kernels against the reference backend (skipped
// where no CUDA device is usable). Cases of //tests/kernels:cuda_test (tests/util/kernel_cases.h).
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
        KernelCase{"InnerProduct", "InnerProduct", {{7, 3, 5, 5}, {11, 75}, {11}}, {},
                   "cuda.innerproduct.any.any.dnn_cublas"},
        KernelCase{"InnerProductTranspose", "InnerProduct", {{5, 13}, {13, 9}},
                   {{"transpose", true}}, "cuda.innerproduct.any.any.dnn_cublas"}),
    KernelCaseName);
// clang-format on

}  // namespace
}  // namespace testing
}  // namespace kiln
