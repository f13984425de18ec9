// The data-movement ops: the cases of the graph CUDA kernel tests (tests/util/cuda_graph_cases.h):
// every case runs on CUDA against the reference backend in f32, f16 and bf16, NCHW and NHWC.
#include <string>
#include <vector>

#include "tests/util/cuda_graph_cases.h"

namespace kiln {
namespace testing {

using Ints = std::vector<int64_t>;

// Part of //tests/kernels:cuda_graph_tensor_test (its case order: the seeds follow it).
std::vector<GraphKernelCase> TensorGraphCases() {
  return {
      {"Concat", "Concat", {Data({2, 3, 5, 7}), Data({2, 5, 5, 7}), Data({2, 1, 5, 7})}, {}},
      // Parts whose rows (C x H x W of one image) are multiples of 4 elements: copied 4 at a time.
      {"ConcatVectorRows", "Concat", {Data({2, 8, 7, 4}), Data({2, 4, 7, 4})}, {}},
      {"ConcatAxis0", "Concat", {Data({2, 3, 4, 5}), Data({1, 3, 4, 5})}, {{"axis", int64_t{0}}}},
      {"SlicePoints", "Slice", {Data({2, 9, 5, 7})}, {{"slice_points", Ints{2, 5}}}},
      {"SliceEqual",
       "Slice",
       {Data({6, 4, 3, 5})},
       {{"axis", int64_t{0}}, {"num_outputs", int64_t{3}}}},
      {"Split", "Split", {Data({2, 3, 5, 7})}, {{"num_outputs", int64_t{3}}}},
      {"Crop", "Crop", {Data({2, 3, 11, 13}), Data({2, 3, 6, 7})}, {{"offset", Ints{2, 3}}}},
      {"CropFromAxis1",
       "Crop",
       {Data({2, 5, 9, 9}), Data({2, 3, 4, 4})},
       {{"axis", int64_t{1}}, {"offset", Ints{1}}}},
      // The Crop that passes/fold_convert_into_crop.cc gives a Convert: crop and convert at once.
      {"CropToF16",
       "Crop",
       {Data({2, 3, 11, 13}), Data({2, 3, 6, 7})},
       {{"offset", Ints{2, 3}}, {"dtype", std::string("f16")}}},
      {"CropToF32",
       "Crop",
       {Data({2, 5, 9, 9}), Data({2, 3, 4, 4})},
       {{"axis", int64_t{1}}, {"offset", Ints{1}}, {"dtype", std::string("f32")}}},
      {"Flatten", "Flatten", {Data({2, 3, 5, 7})}, {}},
      {"Reshape", "Reshape", {Data({2, 3, 5, 7})}, {{"shape", Ints{0, -1, 7}}}},
      {"ConvertF32", "Convert", {Data({2, 3, 5, 7})}, {{"dtype", std::string("f32")}}},
      {"ConvertToChannelsLast",
       "Convert",
       {Data({2, 3, 5, 7})},
       {{"layout", std::string("channels_last")}}},
      {"ConvertToRowMajorF16",
       "Convert",
       {Data({2, 3, 5, 7})},
       {{"dtype", std::string("f16")}, {"layout", std::string("row_major")}}},
      // ChannelShuffle, NCHW and (its strided copy) channels-last alike.
      {"ChannelShuffle", "ChannelShuffle", {Data({2, 12, 5, 7})}, {{"group", int64_t{3}}}},
      {"ChannelShuffle2d",
       "ChannelShuffle",
       {Data({3, 8})},
       {{"group", int64_t{2}}},
       /*nhwc=*/false},
      // Tile (packed tensors only: no channels-last variant).
      {"TileAxis1", "Tile", {Data({3, 4, 5})}, {{"tiles", int64_t{3}}}, /*nhwc=*/false},
      {"TileAxis0",
       "Tile",
       {Data({2, 7})},
       {{"axis", int64_t{0}}, {"tiles", int64_t{4}}},
       /*nhwc=*/false},
      {"TileGradient",
       "TileGradient",
       {Data({3, 12, 5})},
       {{"tiles", int64_t{3}}},
       /*nhwc=*/false},
      // Reduction, every operation (packed tensors only).
      {"ReductionSum", "Reduction", {Data({4, 6, 5})}, {{"axis", int64_t{1}}}, /*nhwc=*/false},
      {"ReductionAsumAll",
       "Reduction",
       {Data({3, 7})},
       {{"operation", Str("asum")}},
       /*nhwc=*/false,
       /*tolerance_scale=*/2},
      {"ReductionSumsq",
       "Reduction",
       {Data({5, 9})},
       {{"operation", Str("sumsq")}, {"axis", int64_t{1}}, {"coeff", 0.5}},
       /*nhwc=*/false},
      {"ReductionMean",
       "Reduction",
       {Data({2, 3, 8})},
       {{"operation", Str("mean")}, {"axis", int64_t{2}}},
       /*nhwc=*/false},
      {"ReductionGradientAsum",
       "ReductionGradient",
       {Data({3, 7}), Data({3})},
       {{"operation", Str("asum")}, {"axis", int64_t{1}}, {"coeff", 2.0}},
       /*nhwc=*/false},
      {"ReductionGradientSumsq",
       "ReductionGradient",
       {Data({4, 5}), Data({4})},
       {{"operation", Str("sumsq")}, {"axis", int64_t{1}}},
       /*nhwc=*/false},
      {"ReductionGradientMean",
       "ReductionGradient",
       {Data({2, 3, 4}), Data({2})},
       {{"operation", Str("mean")}, {"axis", int64_t{1}}},
       /*nhwc=*/false},
  };
}

}  // namespace testing
}  // namespace kiln
