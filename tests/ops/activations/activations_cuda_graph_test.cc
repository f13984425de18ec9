// The activations and PReLU: the cases of the graph CUDA kernel tests
// (tests/util/cuda_graph_cases.h): every case runs on CUDA against the reference backend in f32,
// f16 and bf16, NCHW and NHWC.
#include <string>
#include <vector>

#include "tests/util/cuda_graph_cases.h"

namespace kiln {
namespace testing {

// Part of //tests/kernels:cuda_graph_nn_test (its case order: the seeds follow it).
std::vector<GraphKernelCase> ActivationGraphCases() {
  return {
      // Activations.
      {"Relu", "ReLU", {Data({2, 5, 7, 9})}, {}},
      {"LeakyRelu", "ReLU", {Data({2, 5, 7, 9})}, {{"negative_slope", 0.1}}},
      {"LeakyRelu5d", "ReLU", {Data({2, 3, 4, 5, 7})}, {{"negative_slope", -0.3}}},
      {"Sigmoid", "Sigmoid", {Data({3, 4, 5, 6}, -6, 6)}, {}},
      {"TanH", "TanH", {Data({3, 4, 5, 6}, -3, 3)}, {}},
      {"Elu", "ELU", {Data({2, 3, 5, 7}, -3, 3)}, {{"alpha", 0.7}}},
      {"ClippedRelu", "ClippedReLU", {Data({2, 3, 5, 7}, -2, 8)}, {{"ceiling", 6.0}}},
      {"AbsVal", "AbsVal", {Data({5, 33})}, {}},
      {"AbsVal4d", "AbsVal", {Data({3, 5, 7, 9})}, {}},
      {"Power",
       "Power",
       {Data({2, 3, 5, 7}, 0.1f, 2)},
       {{"power", 2.0}, {"scale", 0.5}, {"shift", 0.25}}},
      {"PowerSqrt",
       "Power",
       {Data({2, 3, 5, 7}, 0.1f, 2)},
       {{"power", 0.5}, {"scale", 2.0}, {"shift", 0.5}}},
      {"PowerLinear", "Power", {Data({3, 5, 7, 9})}, {{"scale", -1.5}, {"shift", 0.25}}},
      // An activation's backward with its dy the sum of several gradients (a gradient sum
      // folded in): ReLU reading its output, and sigmoid.
      {"ReluGradientOfTwo",
       "ActivationGradient",
       {Data({2, 5, 7, 9}), Data({2, 5, 7, 9}), Data({2, 5, 7, 9})},
       {{"activation", Str("ReLU")}, {"saved", Str("output")}}},
      {"LeakyReluGradientOfThree",
       "ActivationGradient",
       {Data({3, 4, 5, 6}), Data({3, 4, 5, 6}), Data({3, 4, 5, 6}), Data({3, 4, 5, 6})},
       {{"activation", Str("ReLU")}, {"saved", Str("output")}, {"negative_slope", 0.1}}},
      {"SigmoidGradientOfTwo",
       "ActivationGradient",
       {Data({4, 33}, 0.05f, 0.95f), Data({4, 33}), Data({4, 33})},
       {{"activation", Str("Sigmoid")}, {"saved", Str("output")}}},
      {"PRelu", "PReLU", {Data({2, 6, 5, 7}), Param({6}, 0, 0.5)}, {}},
      {"PReluShared",
       "PReLU",
       {Data({2, 6, 5, 7}), Param({1}, 0, 0.5)},
       {{"channel_shared", true}}},
      // A slope in the data's dtype: the element-wise call reads it directly.
      {"PReluSlopeInDataType", "PReLU", {Data({2, 6, 5, 7}), Data({6}, -0.5, 0.5)}, {}},
      {"PRelu2d", "PReLU", {Data({7, 13}), Param({13}, 0, 0.5)}, {}},
  };
}

}  // namespace testing
}  // namespace kiln
