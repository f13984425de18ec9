// Pooling: the cases of the graph CUDA kernel tests (tests/util/cuda_graph_cases.h): every case
// runs on CUDA against the reference backend in f32, f16 and bf16, NCHW and NHWC.
#include <string>
#include <vector>

#include "tests/util/cuda_graph_cases.h"

namespace kiln {
namespace testing {

using Ints = std::vector<int64_t>;

// Part of //tests/kernels:cuda_graph_nn_test (its case order: the seeds follow it).
std::vector<GraphKernelCase> PoolingGraphCases() {
  return {
      // Pooling.
      {"MaxPoolCeil",
       "Pooling",
       {Data({2, 5, 13, 11})},
       {{"kernel", Ints{3}}, {"stride", Ints{2}}, {"rounding", Str("ceil")}}},
      {"MaxPoolPaddedFloor",
       "Pooling",
       {Data({2, 5, 12, 11})},
       {{"kernel", Ints{3}}, {"stride", Ints{2}}, {"pad", Ints{1}}}},
      {"MaxPoolRect",
       "Pooling",
       {Data({2, 4, 11, 8})},
       {{"kernel", Ints{3, 2}}, {"stride", Ints{2, 1}}, {"pad", Ints{1, 0}}}},
      {"AvgPoolPadded",
       "Pooling",
       {Data({2, 5, 9, 10})},
       {{"kernel", Ints{3}},
        {"stride", Ints{2}},
        {"pad", Ints{1}},
        {"mode", Str("avg")},
        {"rounding", Str("ceil")}}},
      {"AvgPoolExcludePad",
       "Pooling",
       {Data({2, 5, 9, 10})},
       {{"kernel", Ints{3}},
        {"stride", Ints{2}},
        {"pad", Ints{1}},
        {"mode", Str("avg_exclude_pad")},
        {"rounding", Str("ceil")}}},
      // Caffe clips the unpadded W too (9 -> 3 windows, not 4): x is read as 8 columns.
      {"MaxPoolCaffeClip",
       "Pooling",
       {Data({2, 3, 8, 9})},
       {{"kernel", Ints{3, 2}},
        {"stride", Ints{2, 3}},
        {"pad", Ints{1, 0}},
        {"rounding", Str("ceil")}}},
      {"AvgPoolCaffeClip",
       "Pooling",
       {Data({2, 3, 8, 9})},
       {{"kernel", Ints{3, 2}},
        {"stride", Ints{2, 3}},
        {"pad", Ints{1, 0}},
        {"mode", Str("avg")},
        {"rounding", Str("ceil")}}},
      {"MaxPoolWide",
       "Pooling",
       {Data({1, 3, 17, 19})},
       {{"kernel", Ints{7}}, {"stride", Ints{3}}, {"pad", Ints{2}}, {"rounding", Str("ceil")}}},
      {"GlobalAvgPool", "Pooling", {Data({2, 7, 6, 5})}, {{"global", true}, {"mode", Str("avg")}}},
      {"GlobalMaxPool", "Pooling", {Data({2, 7, 6, 5})}, {{"global", true}}},
      {"MaxPool3d",
       "Pooling",
       {Data({2, 3, 5, 7, 6})},
       {{"kernel", Ints{3}}, {"stride", Ints{2}}, {"rounding", Str("ceil")}}},
      {"AvgPool3dPadded",
       "Pooling",
       {Data({2, 3, 5, 7, 6})},
       {{"kernel", Ints{3, 3, 2}},
        {"stride", Ints{2}},
        {"pad", Ints{1, 1, 0}},
        {"mode", Str("avg")},
        {"rounding", Str("ceil")}}},
      {"GlobalAvgPool3d",
       "Pooling",
       {Data({2, 3, 4, 5, 3})},
       {{"global", true}, {"mode", Str("avg_exclude_pad")}}},
      {"MaxPool1d", "Pooling", {Data({2, 5, 11})}, {{"kernel", Ints{3}}, {"stride", Ints{2}}}},
      {"AvgPool1dPadded",
       "Pooling",
       {Data({3, 4, 10})},
       {{"kernel", Ints{4}},
        {"stride", Ints{3}},
        {"pad", Ints{1}},
        {"mode", Str("avg")},
        {"rounding", Str("ceil")}}},
  };
}

}  // namespace testing
}  // namespace kiln
