// The fast CPU kernels against the reference backend, on fresh random inputs of odd sizes.
#include <string>

#include "gtest/gtest.h"
#include "tests/util/op_test_util.h"

namespace kiln {
namespace {

using testing::F32;
using testing::RandomTensor;
using Dims = std::vector<int64_t>;
using Ints = std::vector<int64_t>;

struct CpuCase {
  std::string label;
  std::string op;
  std::vector<Dims> inputs;
  AttrMap attrs;
  std::string expected_kernel;
};

class CpuVsReferenceTest : public ::testing::TestWithParam<CpuCase> {};

TEST_P(CpuVsReferenceTest, Agrees) {
  const CpuCase& c = GetParam();
  std::string kernel;
  auto ratio = testing::CompareWithReference(c.op, c.inputs, c.attrs, BackendChoice::kCpu, 200,
                                             1e-4, 1e-4, &kernel);
  ASSERT_TRUE(ratio.ok()) << ratio.status();
  EXPECT_EQ(kernel, c.expected_kernel);
  EXPECT_GE(*ratio, 0) << "element count differs";
  EXPECT_LE(*ratio, 1.0) << "worst error / tolerance";
}

std::string Name(const ::testing::TestParamInfo<CpuCase>& i) { return i.param.label; }

const char kConv[] = "cpu.convolution.f32.nchw.im2col_gemm";
const char kIp[] = "cpu.innerproduct.f32.any.gemm";
const char kPool[] = "cpu.pooling.f32.nchw.direct";
const char kPoolGrad[] = "cpu.poolinggradient.f32.nchw.direct";

// One case per line reads better than the formatter's layout.
// clang-format off
INSTANTIATE_TEST_SUITE_P(
    Shapes, CpuVsReferenceTest,
    ::testing::Values(
        CpuCase{"Conv3x3", "Convolution", {{2, 3, 13, 11}, {8, 3, 3, 3}, {8}}, {}, kConv},
        CpuCase{"ConvStridePad", "Convolution", {{1, 5, 17, 19}, {7, 5, 5, 5}, {7}},
                {{"stride", Ints{2}}, {"pad", Ints{2}}}, kConv},
        CpuCase{"ConvDilated", "Convolution", {{1, 4, 15, 15}, {6, 4, 3, 3}},
                {{"dilation", Ints{2, 3}}, {"pad", Ints{1}}}, kConv},
        CpuCase{"ConvGroups", "Convolution", {{2, 6, 9, 9}, {9, 2, 3, 3}, {9}},
                {{"group", int64_t{3}}, {"pad", Ints{1}}}, kConv},
        CpuCase{"ConvDepthwise", "Convolution", {{1, 8, 10, 10}, {8, 1, 3, 3}},
                {{"group", int64_t{8}}, {"stride", Ints{2}}}, kConv},
        CpuCase{"Conv1x1", "Convolution", {{3, 16, 7, 7}, {5, 16, 1, 1}}, {}, kConv},
        CpuCase{"ConvRectangular", "Convolution", {{1, 3, 12, 9}, {4, 3, 5, 2}, {4}},
                {{"stride", Ints{3, 1}}, {"pad", Ints{1, 0}}}, kConv},
        CpuCase{"InnerProduct", "InnerProduct", {{7, 3, 5, 5}, {11, 75}, {11}}, {}, kIp},
        CpuCase{"InnerProductTranspose", "InnerProduct", {{5, 13}, {13, 9}},
                {{"transpose", true}}, kIp},
        CpuCase{"InnerProductAxis2", "InnerProduct", {{2, 3, 10}, {4, 10}, {4}},
                {{"axis", int64_t{2}}}, kIp},
        // Pooling and the backward kernels of training (pooling_cpu.cc, gradients_gemm.cc).
        CpuCase{"MaxPoolCeil", "Pooling", {{2, 3, 11, 9}},
                {{"kernel", Ints{3}}, {"stride", Ints{2}}, {"rounding", std::string("ceil")}}, kPool},
        CpuCase{"AvePoolPad", "Pooling", {{1, 4, 8, 7}},
                {{"mode", std::string("avg")}, {"kernel", Ints{3}}, {"stride", Ints{2}},
                 {"pad", Ints{1}}}, kPool},
        CpuCase{"AvePoolExcludePad", "Pooling", {{1, 2, 6, 6}},
                {{"mode", std::string("avg_exclude_pad")}, {"kernel", Ints{3}}, {"pad", Ints{1}}},
                kPool},
        CpuCase{"MaxPoolGradient", "PoolingGradient", {{2, 3, 11, 9}, {2, 3, 5, 4}, {2, 3, 5, 4}},
                {{"kernel", Ints{3}}, {"stride", Ints{2}}}, kPoolGrad},
        CpuCase{"AvePoolGradient", "PoolingGradient", {{1, 4, 8, 7}, {1, 4, 4, 4}, {1, 4, 4, 4}},
                {{"mode", std::string("avg")}, {"kernel", Ints{3}}, {"stride", Ints{2}},
                 {"pad", Ints{1}}}, kPoolGrad},
        CpuCase{"BiasGradient", "BiasGradient", {{3, 5, 4, 6}},
                {{"param_dims", Ints{5}}}, "cpu.biasgradient.f32.any.direct"},
        CpuCase{"ConvBackwardData", "ConvolutionBackwardData", {{2, 4, 6, 5}, {4, 3, 3, 3}},
                {{"stride", Ints{2}}, {"pad", Ints{1}}, {"input_dims", Ints{2, 3, 11, 10}}},
                "cpu.convolutionbackwarddata.f32.nchw.col2im_gemm"},
        CpuCase{"ConvBackwardFilter", "ConvolutionBackwardFilter", {{2, 6, 9, 9}, {2, 4, 9, 9}},
                {{"group", int64_t{2}}, {"pad", Ints{1}}, {"filter_dims", Ints{4, 3, 3, 3}}},
                "cpu.convolutionbackwardfilter.f32.nchw.im2col_gemm"},
        CpuCase{"IpBackwardData", "InnerProductBackwardData", {{7, 11}, {11, 75}},
                {{"input_dims", Ints{7, 3, 5, 5}}}, "cpu.innerproductbackwarddata.f32.any.gemm"},
        CpuCase{"IpBackwardFilter", "InnerProductBackwardFilter", {{5, 13}, {5, 9}},
                {{"transpose", true}}, "cpu.innerproductbackwardfilter.f32.any.gemm"}),
    Name);
// clang-format on

TEST(CpuKernelSelectionTest, NonDenseInputsFallBackToReference) {
  // An NHWC input is not the CPU GEMM kernel's contract: the plan uses the reference kernel.
  HostTensor x = RandomTensor(testing::Nhwc({1, 3, 5, 5}), 1);
  HostTensor w = RandomTensor(F32({2, 3, 3, 3}), 2);
  std::string kernel;
  auto out = testing::RunOp("Convolution", {x, w}, {}, BackendChoice::kCpu, &kernel);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(kernel, "reference.convolution.any.any.direct");
}

}  // namespace
}  // namespace kiln
