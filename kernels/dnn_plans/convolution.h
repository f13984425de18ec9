// Convolution, Deconvolution and the convolution's two backward ops as one ConvProblem each.
//
// Convolution is the forward direction of its problem; Deconvolution is the backward-data
// direction of the convolution whose output is the deconvolution's input (Caffe's definition),
// so both share one problem builder.
#ifndef KILN_KERNELS_DNN_PLANS_CONVOLUTION_H_
#define KILN_KERNELS_DNN_PLANS_CONVOLUTION_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "dnn/conv_problem.h"
#include "dnn/descriptors.h"
#include "ir/graph.h"
#include "kernels/dnn_plans/tensor.h"

namespace kiln {
namespace dnn_plans {

// The direction of the problem a node computes (dnn::ConvDirection of the CUDA library, which
// host code cannot include).
enum class ConvRole { kForward, kBackwardData, kBackwardFilter };

// Which of a node's values plays a role of the convolution: input i, or kOutput.
constexpr int kOutput = -1;

struct ConvPlan {
  ConvRole role = ConvRole::kForward;
  dnn::ConvProblem problem;
  // Where the problem's x, w and y are among the node's values:
  //   Convolution                x = in0, w = in1, y = out (forward)
  //   Deconvolution              x = out, w = in1, y = in0 (backward data of the convolution
  //   ConvolutionBackwardData    x = out, w = in1, y = in0  from the output to the input)
  //   ConvolutionBackwardFilter  x = in0, w = out, y = in1 (backward filter)
  int x_at = 0, w_at = 1, y_at = kOutput;
  // Elements from x's buffer to where the problem's x starts: a pad_end node's negative padding
  // is a window that starts inside x (the problem sees that window, with no padding there).
  int64_t x_offset = 0;
};

// The problem of a node whose values have `types`. 1-d convolutions run as 2-d ones under a
// unit dim (a unit filter tap, no padding, stride and dilation 1). Unimplemented, with the
// reason, for what the primitives do not take (a filter that is neither KCRS nor KRSC, mixed
// dtypes, pad_end on a backward direction).
absl::StatusOr<ConvPlan> PlanConvolution(const Node& node, const OperandTypes& types,
                                         dnn::MathMode math);

// The type of the value at `at` (an input index or kOutput).
const TensorType& TypeAt(const OperandTypes& types, int at);

// What a fused Convolution (passes/fuse_conv_epilogue) does after its products, and the bias a
// Convolution or Deconvolution adds: y = act(conv + bias + residual), the bias (input 2) per
// output channel, the residual (input 3) of y's shape, the activation a ReLU of `slope`.
struct ConvEpiloguePlan {
  bool bias = false, residual = false, relu = false;
  float slope = 0;  // f32, as the unfused ReLU multiplies (activation.cc)
  int64_t channels = 0;
  // y; the bias as (1, K, 1, ...) with its own stride along K; the residual.
  dnn::TensorDescriptor out_d, bias_d, residual_d;
};
absl::StatusOr<ConvEpiloguePlan> PlanConvEpilogue(const Node& node, const OperandTypes& types);

}  // namespace dnn_plans
}  // namespace kiln

#endif  // KILN_KERNELS_DNN_PLANS_CONVOLUTION_H_
