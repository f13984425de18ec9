// Reference Convolution, Deconvolution and the convolution's two backward ops through the
// primitive library's oracle (dnn/conv_reference.h: f32 values, double accumulation), on the
// problem the CUDA adapters plan (kernels/dnn_plans/convolution.h). 1-d convolutions run as 2-d
// ones, and a pad_end node's negative padding as a window of x, both in the plan.
#include "kernels/dnn_plans/convolution.h"

#include <vector>

#include "base/status_macros.h"
#include "dnn/conv_reference.h"
#include "dnn/primitive_reference.h"
#include "kernels/reference/dnn_oracle.h"
#include "kernels/reference/reference_kernel.h"

namespace kiln {

namespace {

using dnn_plans::kOutput;

const float* In(const DenseArgs& a, int at) { return at == kOutput ? a.out[0] : a.in[at]; }
float* Out(const DenseArgs& a) { return a.out[0]; }

// Writes the bias, broadcast along the output's channels, over the whole output: the convolution
// then adds its products to it (beta = 1), so the sum is rounded to f32 once, as the CUDA
// kernels' in-kernel epilogue does.
absl::Status FillWithBias(const dnn_plans::ConvEpiloguePlan& e, const DenseArgs& a) {
  const int64_t count = a.out_types[0].num_elements();
  std::vector<double> y(static_cast<size_t>(count));
  std::vector<double> bias(a.in[2], a.in[2] + a.in_types[2].num_elements());
  KILN_RETURN_IF_ERROR(
      dnn::reference::AddTensor(1.0, e.bias_d, bias.data(), 0.0, e.out_d, y.data()));
  for (int64_t i = 0; i < count; ++i) a.out[0][i] = static_cast<float>(y[i]);
  return absl::OkStatus();
}

// The fused epilogue of passes/fuse_conv_epilogue: + residual, then the ReLU, each rounded to
// f32 where the unfused graph stores its intermediate values (its Eltwise sum and its ReLU).
absl::Status ResidualAndRelu(const dnn_plans::ConvEpiloguePlan& e, const DenseArgs& a) {
  if (!e.residual && !e.relu) return absl::OkStatus();
  const int64_t count = a.out_types[0].num_elements();
  std::vector<double> y(a.out[0], a.out[0] + count);
  if (e.residual) {
    std::vector<double> residual(a.in[3], a.in[3] + count);
    KILN_RETURN_IF_ERROR(
        dnn::reference::AddTensor(1.0, e.residual_d, residual.data(), 1.0, e.out_d, y.data()));
    for (double& v : y) v = static_cast<float>(v);
  }
  if (e.relu) {
    KILN_ASSIGN_OR_RETURN(dnn::ActivationDescriptor relu,
                          dnn::ActivationDescriptor::Create(dnn::ActivationMode::kRelu, e.slope));
    KILN_RETURN_IF_ERROR(
        dnn::reference::ActivationForward(relu, 1.0, e.out_d, y.data(), 0.0, e.out_d, y.data()));
  }
  for (int64_t i = 0; i < count; ++i) a.out[0][i] = static_cast<float>(y[i]);
  return absl::OkStatus();
}

// Convolution(x, w[, bias[, residual]]) and Deconvolution(x, w[, bias]).
absl::Status Convolution(const Node& node, const DenseArgs& a) {
  if (NothingToCompute(a)) return absl::OkStatus();
  const dnn_plans::OperandTypes types = TypesOf(a);
  KILN_ASSIGN_OR_RETURN(dnn_plans::ConvPlan p,
                        dnn_plans::PlanConvolution(node, types, dnn::MathMode::kFp32));
  KILN_ASSIGN_OR_RETURN(dnn_plans::ConvEpiloguePlan e, dnn_plans::PlanConvEpilogue(node, types));
  if (e.bias) KILN_RETURN_IF_ERROR(FillWithBias(e, a));
  const double beta = e.bias ? 1.0 : 0.0;
  if (p.role == dnn_plans::ConvRole::kForward) {
    dnn::ReferenceConvolutionForward(p.problem, In(a, p.x_at) + p.x_offset, In(a, p.w_at), Out(a),
                                     1.0, beta);
  } else {
    dnn::ReferenceConvolutionBackwardData(p.problem, In(a, p.y_at), In(a, p.w_at), Out(a), 1.0,
                                          beta);
  }
  return ResidualAndRelu(e, a);
}

// ConvolutionBackwardData(dy, w) -> dx and ConvolutionBackwardFilter(x, dy) -> dw.
absl::Status ConvolutionGradient(const Node& node, const DenseArgs& a) {
  if (NothingToCompute(a)) return absl::OkStatus();
  KILN_ASSIGN_OR_RETURN(dnn_plans::ConvPlan p,
                        dnn_plans::PlanConvolution(node, TypesOf(a), dnn::MathMode::kFp32));
  if (p.role == dnn_plans::ConvRole::kBackwardData) {
    dnn::ReferenceConvolutionBackwardData(p.problem, In(a, p.y_at), In(a, p.w_at), Out(a));
  } else {
    dnn::ReferenceConvolutionBackwardFilter(p.problem, In(a, p.x_at), In(a, p.y_at), Out(a));
  }
  return absl::OkStatus();
}

}  // namespace

// The gradients register here too: they share the forward's plan.
absl::Status RegisterReferenceConvolution(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "Convolution", Convolution, "direct"));
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "Deconvolution", Convolution, "direct"));
  KILN_RETURN_IF_ERROR(
      RegisterReference(registry, "ConvolutionBackwardData", ConvolutionGradient, "direct"));
  return RegisterReference(registry, "ConvolutionBackwardFilter", ConvolutionGradient, "direct");
}

}  // namespace kiln
