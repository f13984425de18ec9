// Convolution and its backward kernels: the fast CPU kernels against the reference backend, on
// fresh random inputs of odd sizes. Cases of //tests/kernels:cpu_test (tests/util/kernel_cases.h).
#include <string>

#include "gtest/gtest.h"
#include "tests/util/kernel_cases.h"
#include "tests/util/op_test_util.h"

namespace kiln {
namespace testing {
namespace {

using Ints = std::vector<int64_t>;

const char kConv[] = "cpu.convolution.f32.nchw.im2col_gemm";

// One case per line reads better than the formatter's layout.
// clang-format off
INSTANTIATE_TEST_SUITE_P(
    Shapes, CpuVsReferenceTest,
    ::testing::Values(
        KernelCase{"Conv3x3", "Convolution", {{2, 3, 13, 11}, {8, 3, 3, 3}, {8}}, {}, kConv},
        KernelCase{"ConvStridePad", "Convolution", {{1, 5, 17, 19}, {7, 5, 5, 5}, {7}},
                   {{"stride", Ints{2}}, {"pad", Ints{2}}}, kConv},
        KernelCase{"ConvDilated", "Convolution", {{1, 4, 15, 15}, {6, 4, 3, 3}},
                   {{"dilation", Ints{2, 3}}, {"pad", Ints{1}}}, kConv},
        KernelCase{"ConvGroups", "Convolution", {{2, 6, 9, 9}, {9, 2, 3, 3}, {9}},
                   {{"group", int64_t{3}}, {"pad", Ints{1}}}, kConv},
        KernelCase{"ConvDepthwise", "Convolution", {{1, 8, 10, 10}, {8, 1, 3, 3}},
                   {{"group", int64_t{8}}, {"stride", Ints{2}}}, kConv},
        KernelCase{"Conv1x1", "Convolution", {{3, 16, 7, 7}, {5, 16, 1, 1}}, {}, kConv},
        KernelCase{"ConvRectangular", "Convolution", {{1, 3, 12, 9}, {4, 3, 5, 2}, {4}},
                   {{"stride", Ints{3, 1}}, {"pad", Ints{1, 0}}}, kConv},
        KernelCase{"ConvBackwardData", "ConvolutionBackwardData", {{2, 4, 6, 5}, {4, 3, 3, 3}},
                   {{"stride", Ints{2}}, {"pad", Ints{1}}, {"input_dims", Ints{2, 3, 11, 10}}},
                   "cpu.convolutionbackwarddata.f32.nchw.col2im_gemm"},
        KernelCase{"ConvBackwardFilter", "ConvolutionBackwardFilter", {{2, 6, 9, 9}, {2, 4, 9, 9}},
                   {{"group", int64_t{2}}, {"pad", Ints{1}}, {"filter_dims", Ints{4, 3, 3, 3}}},
                   "cpu.convolutionbackwardfilter.f32.nchw.im2col_gemm"}),
    KernelCaseName);
// clang-format on

TEST(CpuKernelSelectionTest, NonDenseInputsFallBackToReference) {
  // An NHWC input is not the CPU GEMM kernel's contract: the plan uses the reference kernel.
  HostTensor x = RandomTensor(Nhwc({1, 3, 5, 5}), 1);
  HostTensor w = RandomTensor(F32({2, 3, 3, 3}), 2);
  std::string kernel;
  auto out = RunOp("Convolution", {x, w}, {}, BackendChoice::kCpu, &kernel);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(kernel, "reference.convolution.any.any.direct");
}

}  // namespace
}  // namespace testing
}  // namespace kiln
