// The plan's precision and memory order, applied to a graph before kernel selection.
//
// A Caffe graph is f32 and row-major (NCHW). A plan may run it in f16 or bf16 (activations and
// weights in the 16-bit type, f32 accumulation in every kernel) and/or channels-last (NHWC, the
// order the tensor-core convolution kernels read without copies). This rewrite builds the graph
// the kernels see:
//   - weights (Constants) are converted once, here, at compile time: data weights to the plan's
//     dtype, convolution filters to KRSC when channels-last; the parameters the primitives keep
//     in f32 (BatchNorm statistics, Scale/Bias/PReLU parameters) stay f32;
//   - graph inputs keep the user's dtype and order: a Convert node after each input brings it to
//     the plan's; labels (SoftmaxWithLoss/Accuracy/ContrastiveLoss label ports) are left alone;
//   - graph outputs are converted back to the dtype and order the unrewritten graph gave them.
// Every other node is re-added with the same op, name and attributes, so shape inference gives
// its outputs the plan's dtype and layout family.
#ifndef KILN_PASSES_PRECISION_LAYOUT_H_
#define KILN_PASSES_PRECISION_LAYOUT_H_

#include <memory>

#include "absl/status/statusor.h"
#include "ir/graph.h"

namespace kiln {

struct PlanTypes {
  DataType dtype = DataType::kF32;  // f32, f16 or bf16
  bool channels_last = false;
};

// The rewritten graph (a new graph; `graph` is not changed). When nothing would change (an f32
// row-major graph under f32 row-major types) the result is a plain clone.
absl::StatusOr<std::unique_ptr<Graph>> ApplyPrecisionAndLayout(const Graph& graph,
                                                               const PlanTypes& types);

}  // namespace kiln

#endif  // KILN_PASSES_PRECISION_LAYOUT_H_
