// Dropout: the CUDA kernels against the reference backend (skipped where
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
        KernelCase{"DropoutTraining", "Dropout", {{50, 41}},
                   {{"training", true}, {"ratio", 0.3}, {"seed", int64_t{5}}},
                   "cuda.dropout.any.any.dnn_dropout"},
        KernelCase{"DropoutInference", "Dropout", {{50, 41}}, {{"training", false}, {"ratio", 0.3}},
                   "cuda.dropout.any.any.dnn_dropout"}),
    KernelCaseName);
// clang-format on

}  // namespace
}  // namespace testing
}  // namespace kiln
