// LRN: the cases of the graph CUDA kernel tests (tests/util/cuda_graph_cases.h): every case runs
// on CUDA against the reference backend in f32, f16 and bf16, NCHW and NHWC.
#include <string>
#include <vector>

#include "tests/util/cuda_graph_cases.h"

namespace kiln {
namespace testing {

// Part of //tests/kernels:cuda_graph_nn_test (its case order: the seeds follow it).
std::vector<GraphKernelCase> LrnGraphCases() {
  return {
      // LRN.
      {"LrnAcross", "LRN", {Data({2, 9, 5, 7})}, {{"alpha", 0.5}, {"k", 2.0}}},
      {"LrnAcrossSize3",
       "LRN",
       {Data({2, 7, 5, 7})},
       {{"local_size", int64_t{3}}, {"alpha", 2.0}, {"beta", 0.6}}},
      {"LrnAcrossSize11",
       "LRN",
       {Data({1, 13, 4, 5})},
       {{"local_size", int64_t{11}}, {"alpha", 1.0}, {"k", 1.5}}},
      {"LrnAcross5d", "LRN", {Data({2, 6, 3, 4, 5})}, {{"local_size", int64_t{3}}, {"alpha", 1.0}}},
      {"LrnAcross2d", "LRN", {Data({5, 9})}, {{"alpha", 1.0}}},
      {"LrnWithin",
       "LRN",
       {Data({2, 4, 9, 7})},
       {{"region", Str("within_channel")}, {"local_size", int64_t{3}}, {"alpha", 0.5}}},
      {"LrnWithinSize5",
       "LRN",
       {Data({2, 3, 11, 9})},
       {{"region", Str("within_channel")}, {"local_size", int64_t{5}}, {"alpha", 2.0}}},
  };
}

}  // namespace testing
}  // namespace kiln
