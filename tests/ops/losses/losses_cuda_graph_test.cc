// The losses and Accuracy: the cases of the graph CUDA kernel tests
// (tests/util/cuda_graph_cases.h): every case runs on CUDA against the reference backend in f32,
// f16 and bf16, NCHW and NHWC.
#include <string>
#include <vector>

#include "tests/util/cuda_graph_cases.h"

namespace kiln {
namespace testing {

using Ints = std::vector<int64_t>;

// Losses sum hundreds of 16-bit terms: their rounding adds up (a loss of N terms rounded per
// term differs by about sqrt(N) units), hence the looser scale where marked.
// Part of //tests/kernels:cuda_graph_tensor_test (its case order: the seeds follow it).
std::vector<GraphKernelCase> LossGraphCases() {
  return {
      {"SoftmaxWithLoss",
       "SoftmaxWithLoss",
       {Data({6, 10}), Labels({6}, 10, 3)},
       {{"ignore_label", Ints{3}}},
       true,
       4.0},
      {"SoftmaxWithLossSpatial",
       "SoftmaxWithLoss",
       {Data({2, 5, 3, 4}), Labels({2, 1, 3, 4}, 5)},
       {{"normalization", std::string("full")}},
       true,
       4.0},
      {"AccuracyTop1", "Accuracy", {Data({20, 10}), Labels({20}, 10)}, {}},
      {"AccuracyTop3Ignore",
       "Accuracy",
       {Data({20, 10}), Labels({20}, 10, 4)},
       {{"top_k", int64_t{3}}, {"ignore_label", Ints{4}}}},
      {"EuclideanLoss", "EuclideanLoss", {Data({8, 7}), Data({8, 7})}, {}, true, 4.0},
      {"SigmoidCrossEntropy",
       "SigmoidCrossEntropyLoss",
       {Data({6, 9}), Data({6, 9}, 0, 1)},
       {},
       true,
       4.0},
      {"ContrastiveLoss",
       "ContrastiveLoss",
       {Data({8, 5}), Data({8, 5}), Labels({8}, 2)},
       {{"margin", 2.0}},
       true,
       4.0},
      {"ContrastiveLossLegacy",
       "ContrastiveLoss",
       {Data({8, 5}), Data({8, 5}), Labels({8}, 2)},
       {{"margin", 2.0}, {"legacy_version", true}},
       true,
       4.0},
  };
}

}  // namespace testing
}  // namespace kiln
