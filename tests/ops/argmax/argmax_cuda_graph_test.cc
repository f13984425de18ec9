// ArgMax: the cases of the graph CUDA kernel tests (tests/util/cuda_graph_cases.h), on CUDA
// against the reference backend in f32, f16 and bf16 (the output is f32 indices or values in
// every one; both sides read the same rounded scores, so 16-bit ties fall the same way), NCHW
// and NHWC for the 4-d scores (the kernel reads any strides).
#include <vector>

#include "tests/util/cuda_graph_cases.h"

namespace kiln {
namespace testing {

// Part of //tests/kernels:cuda_graph_nn_test, after the Embed cases.
std::vector<GraphKernelCase> ArgMaxGraphCases() {
  using Ints = std::vector<int64_t>;
  // Without an axis: each item's 90 scores, a warp per item when packed, decoded per element
  // when channels-last.
  GraphKernelCase flat{"ArgMaxFlat",
                       "ArgMax",
                       {Data({4, 10, 3, 3})},
                       {{"top_k", int64_t{3}}, {"out_max_val", true}}};
  // A segmentation net's per-pixel class: axis 1 with trailing dims, a thread per pixel.
  GraphKernelCase pixels{"ArgMaxAxis1", "ArgMax", {Data({2, 21, 5, 7})}, {{"axis", Ints{1}}}};
  // The last axis, long rows: a warp per row; values out.
  GraphKernelCase last{"ArgMaxLastAxisValues",
                       "ArgMax",
                       {Data({6, 100})},
                       {{"top_k", int64_t{5}}, {"axis", Ints{-1}}, {"out_max_val", true}}};
  last.nhwc = false;
  // top_k = the whole axis: a full sort, one pass per entry.
  GraphKernelCase full{
      "ArgMaxWholeAxis", "ArgMax", {Data({3, 7})}, {{"top_k", int64_t{7}}, {"axis", Ints{1}}}};
  full.nhwc = false;
  return {flat, pixels, last, full};
}

}  // namespace testing
}  // namespace kiln
