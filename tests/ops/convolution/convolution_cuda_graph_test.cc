// Convolution and Deconvolution: the cases of the graph CUDA kernel tests
// (tests/util/cuda_graph_cases.h): every case runs on CUDA against the reference backend in f32,
// f16 and bf16, NCHW and NHWC.
#include <string>
#include <vector>

#include "tests/util/cuda_graph_cases.h"

namespace kiln {
namespace testing {

using Ints = std::vector<int64_t>;

// Part of //tests/kernels:cuda_graph_nn_test (its case order: the seeds follow it).
std::vector<GraphKernelCase> ConvolutionGraphCases() {
  return {
      {"Conv",
       "Convolution",
       {Data({2, 3, 13, 11}), Data({8, 3, 3, 3}), Data({8})},
       {{"pad", Ints{1}}}},
      // The epilogue the fusion passes give a Convolution: bias + ReLU, + residual.
      {"ConvBiasRelu",
       "Convolution",
       {Data({2, 3, 13, 11}), Data({8, 3, 3, 3}), Data({8})},
       {{"pad", Ints{1}}, {"activation", std::string("relu")}}},
      {"ConvResidualLeakyRelu",
       "Convolution",
       {Data({2, 3, 13, 11}), Data({8, 3, 3, 3}), Data({8}), Data({2, 8, 13, 11})},
       {{"pad", Ints{1}}, {"activation", std::string("relu")}, {"negative_slope", 0.1}}},
      {"ConvResidualNoActivation",
       "Convolution",
       {Data({2, 6, 9, 9}), Data({6, 6, 1, 1}), Data({6}), Data({2, 6, 9, 9})},
       {}},
      {"ConvStridedGrouped",
       "Convolution",
       {Data({1, 8, 15, 17}), Data({8, 2, 3, 3})},
       {{"group", int64_t{4}}, {"stride", Ints{2}}}},
      {"Deconv",
       "Deconvolution",
       {Data({2, 6, 7, 5}), Data({6, 4, 4, 4}), Data({4})},
       {{"stride", Ints{2}}, {"pad", Ints{1}}}},
      // Padding beyond the filter, as passes/shrink_deconvolution_to_crop leaves FCN-8s's
      // upscore8 (16x16 filter, stride 8, pad 31): the sub-pixel phases get negative padding.
      {"DeconvPadBeyondFilter",
       "Deconvolution",
       {Data({2, 8, 9, 7}), Data({8, 5, 16, 16})},
       {{"stride", Ints{8}}, {"pad", Ints{31, 20}}}},
      {"DeconvPadBeyondFilterSmall",
       "Deconvolution",
       {Data({2, 6, 7, 5}), Data({6, 4, 4, 4}), Data({4})},
       {{"stride", Ints{2}}, {"pad", Ints{5, 3}}}},
  };
}

}  // namespace testing
}  // namespace kiln
