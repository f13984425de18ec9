// InnerProduct and its backward kernels: the fast CPU kernels against the reference backend, on
// fresh random inputs of odd sizes. Cases of //tests/kernels:cpu_test (tests/util/kernel_cases.h).
#include <string>

#include "gtest/gtest.h"
#include "tests/util/kernel_cases.h"

namespace kiln {
namespace testing {
namespace {

using Ints = std::vector<int64_t>;

const char kIp[] = "cpu.innerproduct.f32.any.gemm";

// One case per line reads better than the formatter's layout.
// clang-format off
INSTANTIATE_TEST_SUITE_P(
    Shapes, CpuVsReferenceTest,
    ::testing::Values(
        KernelCase{"InnerProduct", "InnerProduct", {{7, 3, 5, 5}, {11, 75}, {11}}, {}, kIp},
        KernelCase{"InnerProductTranspose", "InnerProduct", {{5, 13}, {13, 9}},
                   {{"transpose", true}}, kIp},
        KernelCase{"InnerProductAxis2", "InnerProduct", {{2, 3, 10}, {4, 10}, {4}},
                   {{"axis", int64_t{2}}}, kIp},
        KernelCase{"IpBackwardData", "InnerProductBackwardData", {{7, 11}, {11, 75}},
                   {{"input_dims", Ints{7, 3, 5, 5}}}, "cpu.innerproductbackwarddata.f32.any.gemm"},
        KernelCase{"IpBackwardFilter", "InnerProductBackwardFilter", {{5, 13}, {5, 9}},
                   {{"transpose", true}}, "cpu.innerproductbackwardfilter.f32.any.gemm"}),
    KernelCaseName);
// clang-format on

}  // namespace
}  // namespace testing
}  // namespace kiln
