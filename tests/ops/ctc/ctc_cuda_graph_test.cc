// CTCLoss and CTCLossGradient: the cases of the graph CUDA kernel tests
// (tests/util/cuda_graph_cases.h), on CUDA against the reference backend in f32, f16 and bf16 of
// the activations (labels and lengths stay f32). The CUDA kernels build the primitive's tables
// on the device from these tensors, so ragged lengths, padding and repeats matter here.
#include <vector>

#include "tests/util/cuda_graph_cases.h"

namespace kiln {
namespace testing {

// Part of //tests/kernels:cuda_graph_nn_test, after the Embed cases.
std::vector<GraphKernelCase> CtcGraphCases() {
  // T = 12, N = 4, C = 7, L = 4: a repeat (5 5), an empty label, the full length, and padding
  // past each label (the blank, then -1, which the kernels must not read).
  const std::vector<float> labels = {5, 5, 2, 0, 0, 0, 0, 0, 1, 6, 3, 6, 4, -1, -1, -1};
  const std::vector<CaseInput> inputs = {Data({12, 4, 7}, -2, 2), Fixed({4, 4}, labels),
                                         Fixed({4}, {12, 7, 10, 3}), Fixed({4}, {3, 0, 4, 1})};
  std::vector<GraphKernelCase> out;
  for (const char* reduction : {"mean", "sum"}) {
    for (const char* op : {"CTCLoss", "CTCLossGradient"}) {
      GraphKernelCase c{
          std::string(op) + "_" + reduction, op, inputs, {{"reduction", Str(reduction)}}};
      if (std::string(op) == "CTCLossGradient") c.attrs["loss_weight"] = 0.8;
      c.nhwc = false;
      c.tolerance_scale = 4;  // the loss sums 4 samples' alpha recursions over 12 frames
      out.push_back(c);
    }
  }
  // The blank last and zero_infinity: sample 3's [2, 2] cannot fit in 2 frames.
  GraphKernelCase zero{"CTCLossGradient_zero_infinity",
                       "CTCLossGradient",
                       {Data({6, 4, 5}, -2, 2), Fixed({4, 2}, {1, 2, 3, 0, 0, 0, 2, 2}),
                        Fixed({4}, {6, 5, 1, 2}), Fixed({4}, {2, 1, 0, 2})},
                       {{"blank", int64_t{4}}, {"zero_infinity", true}}};
  zero.nhwc = false;
  zero.tolerance_scale = 4;
  out.push_back(zero);
  return out;
}

}  // namespace testing
}  // namespace kiln
