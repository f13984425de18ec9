// The activations: the CUDA kernels against the reference backend (skipped where
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
        KernelCase{"Relu", "ReLU", {{3, 1001}}, {{"negative_slope", 0.2}},
                   "cuda.relu.any.any.dnn_activation"},
        KernelCase{"Sigmoid", "Sigmoid", {{999}}, {}, "cuda.sigmoid.any.any.dnn_activation"},
        KernelCase{"TanH", "TanH", {{999}}, {}, "cuda.tanh.any.any.dnn_activation"},
        KernelCase{"Elu", "ELU", {{999}}, {{"alpha", 0.3}}, "cuda.elu.any.any.dnn_activation"},
        KernelCase{"ClippedRelu", "ClippedReLU", {{999}}, {{"ceiling", 0.7}},
                   "cuda.clippedrelu.any.any.dnn_activation"},
        KernelCase{"Power", "Power", {{999}}, {{"power", 2.0}, {"scale", 0.5}, {"shift", 1.5}},
                   "cuda.power.any.any.dnn_activation"},
        KernelCase{"AbsVal", "AbsVal", {{999}}, {}, "cuda.absval.any.any.dnn_activation"}),
    KernelCaseName);
// clang-format on

}  // namespace
}  // namespace testing
}  // namespace kiln
