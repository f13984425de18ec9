// CUDA: device detection and every CUDA kernel against the reference backend. Tagged `gpu`;
// skips cleanly where no CUDA device is usable (CI), and must pass on the GPU machine.
#include <cstdio>
#include <string>

#include "runtime/device.h"
#include "gtest/gtest.h"
#include "tests/util/op_test_util.h"

namespace kiln {
namespace {

using testing::F32;
using testing::RandomTensor;
using Dims = std::vector<int64_t>;
using Ints = std::vector<int64_t>;

TEST(CudaDeviceTest, DetectionReportsDevicesOrAReason) {
  const CudaProbe probe = ProbeCuda();
  std::printf("CUDA runtime %d, driver %d, usable: %s %s\n", probe.runtime_version,
              probe.driver_version, probe.usable ? "yes" : "no", probe.reason.c_str());
  if (!probe.usable) {
    EXPECT_FALSE(probe.reason.empty());
    EXPECT_EQ(CreateCudaDevice(0).status().code(), absl::StatusCode::kUnavailable);
    GTEST_SKIP() << "no usable CUDA device: " << probe.reason;
  }
  ASSERT_FALSE(probe.devices.empty());
  for (const auto& d : probe.devices) {
    std::printf("device %d: %s sm_%d%d %d SMs %.1f GiB\n", d.ordinal, d.name.c_str(), d.major,
                d.minor, d.multiprocessors, d.total_memory / 1073741824.0);
  }
  auto device = CreateCudaDevice(0);
  ASSERT_TRUE(device.ok()) << device.status();
  // A round trip through device memory.
  auto buffer = (*device)->Allocate(1024);
  ASSERT_TRUE(buffer.ok());
  std::vector<uint8_t> in(1024), out(1024, 0);
  for (int i = 0; i < 1024; ++i) in[i] = static_cast<uint8_t>(i * 7);
  ASSERT_TRUE((*device)->CopyToDevice(*buffer, in.data(), 1024).ok());
  ASSERT_TRUE((*device)->CopyToHost(out.data(), *buffer, 1024).ok());
  EXPECT_EQ(in, out);
  (*device)->Free(*buffer);
  EXPECT_EQ(CreateCudaDevice(99).status().code(), absl::StatusCode::kInvalidArgument);
  // Asking for more memory than exists is ResourceExhausted, not a crash.
  EXPECT_EQ((*device)->Allocate(size_t{1} << 50).status().code(),
            absl::StatusCode::kResourceExhausted);
}

struct CudaCase {
  std::string label;
  std::string op;
  std::vector<Dims> inputs;
  AttrMap attrs;
  std::string expected_kernel;
};

class CudaVsReferenceTest : public ::testing::TestWithParam<CudaCase> {};

TEST_P(CudaVsReferenceTest, Agrees) {
  if (!ProbeCuda().usable) GTEST_SKIP() << "no usable CUDA device";
  const CudaCase& c = GetParam();
  std::string kernel;
  auto ratio = testing::CompareWithReference(c.op, c.inputs, c.attrs, BackendChoice::kCuda, 300,
                                             1e-4, 1e-4, &kernel);
  ASSERT_TRUE(ratio.ok()) << ratio.status();
  EXPECT_EQ(kernel, c.expected_kernel);
  EXPECT_GE(*ratio, 0) << "element count differs";
  EXPECT_LE(*ratio, 1.0) << "worst error / tolerance";
}

std::string Name(const ::testing::TestParamInfo<CudaCase>& i) { return i.param.label; }

// One case per line reads better than the formatter's layout.
// clang-format off
INSTANTIATE_TEST_SUITE_P(
    Kernels, CudaVsReferenceTest,
    ::testing::Values(
        CudaCase{"Conv", "Convolution", {{2, 3, 13, 11}, {8, 3, 3, 3}, {8}}, {{"pad", Ints{1}}},
                 "cuda.convolution.any.any.dnn_conv"},
        CudaCase{"ConvGroupsDilated", "Convolution", {{1, 6, 15, 17}, {9, 2, 3, 3}},
                 {{"group", int64_t{3}}, {"dilation", Ints{2}}, {"stride", Ints{2, 1}}},
                 "cuda.convolution.any.any.dnn_conv"},
        CudaCase{"MaxPool", "Pooling", {{2, 5, 13, 13}},
                 {{"kernel", Ints{3}}, {"stride", Ints{2}}, {"rounding", std::string("ceil")}},
                 "cuda.pooling.any.any.dnn_pooling"},
        CudaCase{"AvgPoolPadded", "Pooling", {{1, 3, 9, 10}},
                 {{"kernel", Ints{3}}, {"stride", Ints{2}}, {"pad", Ints{1}},
                  {"mode", std::string("avg")}, {"rounding", std::string("ceil")}},
                 "cuda.pooling.any.any.dnn_pooling"},
        CudaCase{"AvgPoolExcludePad", "Pooling", {{1, 3, 9, 10}},
                 {{"kernel", Ints{3}}, {"stride", Ints{2}}, {"pad", Ints{1}},
                  {"mode", std::string("avg_exclude_pad")}},
                 "cuda.pooling.any.any.dnn_pooling"},
        CudaCase{"Lrn", "LRN", {{2, 9, 5, 7}}, {{"alpha", 0.5}, {"k", 2.0}},
                 "cuda.lrn.any.any.dnn_lrn"},
        CudaCase{"Softmax", "Softmax", {{3, 17, 5}}, {}, "cuda.softmax.any.any.dnn_softmax"},
        CudaCase{"LogSoftmaxLastAxis", "Softmax", {{4, 33}}, {{"log", true}, {"axis", int64_t{-1}}},
                 "cuda.softmax.any.any.dnn_softmax"},
        CudaCase{"Relu", "ReLU", {{3, 1001}}, {{"negative_slope", 0.2}},
                 "cuda.relu.any.any.dnn_activation"},
        CudaCase{"Sigmoid", "Sigmoid", {{999}}, {}, "cuda.sigmoid.any.any.dnn_activation"},
        CudaCase{"TanH", "TanH", {{999}}, {}, "cuda.tanh.any.any.dnn_activation"},
        CudaCase{"Elu", "ELU", {{999}}, {{"alpha", 0.3}}, "cuda.elu.any.any.dnn_activation"},
        CudaCase{"ClippedRelu", "ClippedReLU", {{999}}, {{"ceiling", 0.7}},
                 "cuda.clippedrelu.any.any.dnn_activation"},
        CudaCase{"Power", "Power", {{999}}, {{"power", 2.0}, {"scale", 0.5}, {"shift", 1.5}},
                 "cuda.power.any.any.dnn_activation"},
        CudaCase{"AbsVal", "AbsVal", {{999}}, {}, "cuda.absval.any.any.dnn_activation"},
        CudaCase{"DropoutTraining", "Dropout", {{50, 41}},
                 {{"training", true}, {"ratio", 0.3}, {"seed", int64_t{5}}},
                 "cuda.dropout.any.any.dnn_dropout"},
        CudaCase{"DropoutInference", "Dropout", {{50, 41}}, {{"training", false}, {"ratio", 0.3}},
                 "cuda.dropout.any.any.dnn_dropout"},
        CudaCase{"InnerProduct", "InnerProduct", {{7, 3, 5, 5}, {11, 75}, {11}}, {},
                 "cuda.innerproduct.any.any.dnn_cublas"},
        CudaCase{"InnerProductTranspose", "InnerProduct", {{5, 13}, {13, 9}},
                 {{"transpose", true}}, "cuda.innerproduct.any.any.dnn_cublas"}),
    Name);
// clang-format on

}  // namespace
}  // namespace kiln
