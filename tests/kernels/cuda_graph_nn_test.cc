// The graph's CUDA kernels of the neural-network families (activations, PReLU, Dropout, Pooling,
// LRN, BatchNorm, Scale, Bias, Convolution, Deconvolution, InnerProduct) against the reference:
// f32, f16 and bf16, NCHW and NHWC, odd sizes, fresh random inputs, poisoned buffers. The GPU
// cases skip without a device; the registry test runs everywhere.
#include <cstdio>

#include "engine/runtime/device.h"
#include "gtest/gtest.h"
#include "kernels/all_kernels.h"
#include "tests/util/cuda_graph_cases.h"

namespace kiln {
namespace {

using testing::CaseInput;
using testing::GraphKernelCase;
using Ints = std::vector<int64_t>;

CaseInput Data(std::vector<int64_t> dims, float lo = -1, float hi = 1) {
  return testing::DataInput(std::move(dims), lo, hi);
}
CaseInput Param(std::vector<int64_t> dims, float lo = -1, float hi = 1) {
  return testing::ParameterInput(std::move(dims), lo, hi);
}

const std::vector<GraphKernelCase>& Cases() {
  static const auto* cases = new std::vector<GraphKernelCase>{
      {"Relu", "ReLU", {Data({2, 5, 7, 9})}, {}},
      {"LeakyRelu", "ReLU", {Data({2, 5, 7, 9})}, {{"negative_slope", 0.1}}},
      {"Sigmoid", "Sigmoid", {Data({3, 4, 5, 6})}, {}},
      {"TanH", "TanH", {Data({3, 4, 5, 6})}, {}},
      {"Elu", "ELU", {Data({2, 3, 5, 7})}, {{"alpha", 0.7}}},
      {"ClippedRelu", "ClippedReLU", {Data({2, 3, 5, 7}, -2, 8)}, {{"ceiling", 6.0}}},
      {"AbsVal", "AbsVal", {Data({5, 33})}, {}},
      {"Power",
       "Power",
       {Data({2, 3, 5, 7}, 0.1f, 2)},
       {{"power", 2.0}, {"scale", 0.5}, {"shift", 0.25}}},
      {"PRelu", "PReLU", {Data({2, 6, 5, 7}), Param({6}, 0, 0.5)}, {}},
      {"PReluShared",
       "PReLU",
       {Data({2, 6, 5, 7}), Param({1}, 0, 0.5)},
       {{"channel_shared", true}}},
      {"DropoutTraining",
       "Dropout",
       {Data({4, 6, 5, 7})},
       {{"training", true}, {"ratio", 0.3}, {"seed", int64_t{9}}}},
      {"DropoutInference", "Dropout", {Data({4, 6, 5, 7})}, {{"training", false}}},
      {"MaxPoolCeil",
       "Pooling",
       {Data({2, 5, 13, 11})},
       {{"kernel", Ints{3}}, {"stride", Ints{2}}, {"rounding", std::string("ceil")}}},
      {"AvgPoolPadded",
       "Pooling",
       {Data({2, 5, 9, 10})},
       {{"kernel", Ints{3}},
        {"stride", Ints{2}},
        {"pad", Ints{1}},
        {"mode", std::string("avg")},
        {"rounding", std::string("ceil")}}},
      {"GlobalAvgPool",
       "Pooling",
       {Data({2, 7, 6, 5})},
       {{"global", true}, {"mode", std::string("avg")}}},
      {"LrnAcross", "LRN", {Data({2, 9, 5, 7})}, {{"alpha", 0.5}, {"k", 2.0}}},
      {"LrnWithin",
       "LRN",
       {Data({2, 4, 9, 7})},
       {{"region", std::string("within_channel")}, {"local_size", int64_t{3}}, {"alpha", 0.5}}},
      {"BatchNormStored",
       "BatchNorm",
       {Data({3, 6, 5, 7}), Param({6}, -0.5, 0.5), Param({6}, 0.5, 2), Param({1}, 0.5, 2)},
       {}},
      {"BatchNormBatchStats",
       "BatchNorm",
       {Data({3, 6, 5, 7}), Param({6}), Param({6}, 0.5, 2)},
       {{"use_global_stats", false}}},
      {"ScaleWithBias", "Scale", {Data({2, 6, 5, 7}), Param({6}), Param({6})}, {}},
      {"ScaleTwoAxes", "Scale", {Data({2, 6, 5, 7}), Param({6, 5})}, {{"num_axes", int64_t{2}}}},
      {"ScaleByData", "Scale", {Data({2, 6, 5, 7}), Data({6})}, {}},
      {"Bias", "Bias", {Data({2, 6, 5, 7}), Param({6})}, {}},
      {"Conv",
       "Convolution",
       {Data({2, 3, 13, 11}), Data({8, 3, 3, 3}), Data({8})},
       {{"pad", Ints{1}}}},
      {"ConvStridedGrouped",
       "Convolution",
       {Data({1, 8, 15, 17}), Data({8, 2, 3, 3})},
       {{"group", int64_t{4}}, {"stride", Ints{2}}}},
      {"Deconv",
       "Deconvolution",
       {Data({2, 6, 7, 5}), Data({6, 4, 4, 4}), Data({4})},
       {{"stride", Ints{2}}, {"pad", Ints{1}}}},
      {"InnerProduct", "InnerProduct", {Data({7, 3, 5, 5}), Data({11, 75}), Data({11})}, {}},
      {"InnerProductAxis2",
       "InnerProduct",
       {Data({2, 3, 4, 5}), Data({6, 20})},
       {{"axis", int64_t{2}}}},
      {"InnerProductTranspose",
       "InnerProduct",
       {Data({5, 13}), Data({13, 9})},
       {{"transpose", true}}},
  };
  return *cases;
}

TEST(CudaGraphNnTest, EveryCaseAgreesWithTheReference) {
  if (!ProbeCuda().usable) GTEST_SKIP() << "no usable CUDA device";
  int ran = 0;
  uint32_t seed = 100;
  for (const GraphKernelCase& c : Cases()) ran += testing::RunGraphKernelCase(c, seed += 7);
  std::printf("cuda_graph_nn_test: %d cases checked\n", ran);
}

TEST(CudaGraphNnTest, EveryOpOfTheseCasesHasACudaKernel) {
  for (const GraphKernelCase& c : Cases()) EXPECT_TRUE(testing::HasCudaKernel(c.op)) << c.op;
}

}  // namespace
}  // namespace kiln
