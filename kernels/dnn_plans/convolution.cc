#include "kernels/dnn_plans/convolution.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ops/convolution_params.h"

namespace kiln {
namespace dnn_plans {

namespace {

// A pad_end node's padding as the primitive takes it (>= 0 on both sides): negative padding
// before a dim moves x's start into the tensor, negative padding after it shortens x. The
// output is unchanged: it reads the same input positions.
absl::Status WindowOfX(const ConvolutionParams& params, const TensorType& x,
                       dnn::TensorDescriptor& xd, std::vector<int64_t>& pad,
                       std::vector<int64_t>& pad_end, int64_t& offset) {
  pad = params.pad;
  pad_end = params.pad_end;
  offset = 0;
  for (size_t i = 0; i < pad.size(); ++i) {
    const int d = 2 + static_cast<int>(i);
    if (pad[i] < 0) {
      offset += -pad[i] * x.stride(d);
      xd.dims[d] += pad[i];
      pad[i] = 0;
    }
    if (pad_end[i] < 0) {
      xd.dims[d] += pad_end[i];
      pad_end[i] = 0;
    }
    if (xd.dims[d] < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("Convolution: pads ", params.pad[i], " and ", params.pad_end[i],
                       " leave no input in spatial dim ", i, " of ", x.ToString()));
    }
  }
  return absl::OkStatus();
}

// The primitive's error prefix (a literal: the problem keeps the pointer).
const char* WhereOf(const Node& node) {
  if (node.kind() == OpKind::kDeconvolution) return "Deconvolution";
  if (node.kind() == OpKind::kConvolutionBackwardData) return "ConvolutionBackwardData";
  if (node.kind() == OpKind::kConvolutionBackwardFilter) return "ConvolutionBackwardFilter";
  return "Convolution";
}

// A 1-d problem as a 2-d one: a unit dim before the spatial dim of a tensor and of the filter,
// and the identity window along it.
absl::Status AsTwoD(dnn::TensorDescriptor& in, dnn::TensorDescriptor& out,
                    std::vector<int64_t>& filter_dims, ConvolutionParams& params) {
  KILN_ASSIGN_OR_RETURN(in, WithUnitDim(in, 2));
  KILN_ASSIGN_OR_RETURN(out, WithUnitDim(out, 2));
  filter_dims.insert(filter_dims.begin() + 2, 1);
  params.pad.insert(params.pad.begin(), 0);
  params.pad_end.insert(params.pad_end.begin(), 0);
  params.stride.insert(params.stride.begin(), 1);
  params.dilation.insert(params.dilation.begin(), 1);
  return absl::OkStatus();
}

}  // namespace

const TensorType& TypeAt(const OperandTypes& types, int at) {
  return at == kOutput ? types.out[0] : types.in[at];
}

absl::StatusOr<ConvPlan> PlanConvolution(const Node& node, const OperandTypes& types,
                                         dnn::MathMode math) {
  ConvPlan plan;
  if (node.kind() == OpKind::kDeconvolution || node.kind() == OpKind::kConvolutionBackwardData) {
    plan.role = ConvRole::kBackwardData;
    plan.x_at = kOutput;
    plan.y_at = 0;
  } else if (node.kind() == OpKind::kConvolutionBackwardFilter) {
    plan.role = ConvRole::kBackwardFilter;
    plan.w_at = kOutput;
    plan.y_at = 1;
  }
  const TensorType& in = TypeAt(types, plan.x_at);
  const TensorType& w = TypeAt(types, plan.w_at);
  const TensorType& out = TypeAt(types, plan.y_at);
  const int nd = in.rank() - 2;
  if (nd < 1 || nd > 3) return absl::UnimplementedError("1-d, 2-d and 3-d convolutions only");
  KILN_ASSIGN_OR_RETURN(ConvolutionParams params, ConvolutionParams::FromAttrs(node.attrs(), nd));
  if (w.dtype() != in.dtype() || out.dtype() != in.dtype()) {
    return absl::UnimplementedError(absl::StrCat("input ", in.ToString(), ", filter ", w.ToString(),
                                                 " and output ", out.ToString(),
                                                 " must share a dtype"));
  }
  dnn::TensorFormat filter_format = dnn::TensorFormat::kNCHW;
  if (w.IsChannelsLast() && !w.IsContiguous()) {
    filter_format = dnn::TensorFormat::kNHWC;
  } else if (!w.IsContiguous()) {
    return absl::UnimplementedError(
        absl::StrCat("the filter must be packed KCRS or KRSC, got ", w.ToString()));
  }
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor ind, DescriptorOf(in));
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor outd, DescriptorOf(out));
  std::vector<int64_t> pad = params.pad, pad_end = params.pad_end;
  if (params.asymmetric) {
    if (plan.role != ConvRole::kForward) {
      return absl::UnimplementedError("asymmetric padding (pad_end) is forward-only");
    }
    KILN_RETURN_IF_ERROR(WindowOfX(params, in, ind, pad, pad_end, plan.x_offset));
    params.pad = pad;
    params.pad_end = pad_end;
  }
  std::vector<int64_t> filter_dims = w.dims();
  if (nd == 1) KILN_RETURN_IF_ERROR(AsTwoD(ind, outd, filter_dims, params));
  KILN_ASSIGN_OR_RETURN(dnn::FilterDescriptor wd,
                        dnn::FilterDescriptor::Create(w.dtype(), filter_format, filter_dims));
  KILN_ASSIGN_OR_RETURN(dnn::ConvolutionDescriptor conv,
                        dnn::ConvolutionDescriptor::Create(
                            params.pad, params.stride, params.dilation, params.group,
                            params.flip_filter ? dnn::ConvolutionMode::kConvolution
                                               : dnn::ConvolutionMode::kCrossCorrelation,
                            math));
  if (params.asymmetric) {
    KILN_ASSIGN_OR_RETURN(conv, conv.WithPadsEnd(params.pad_end));
  }
  KILN_ASSIGN_OR_RETURN(plan.problem, dnn::MakeConvProblem(ind, wd, conv, outd, WhereOf(node)));
  return plan;
}

absl::StatusOr<ConvEpiloguePlan> PlanConvEpilogue(const Node& node, const OperandTypes& types) {
  ConvEpiloguePlan e;
  const TensorType& out = types.out[0];
  e.bias = types.in.size() > 2;
  e.residual = types.in.size() > 3;
  e.relu = node.attrs().count("activation") && node.GetString("activation") == "relu";
  e.slope = e.relu ? static_cast<float>(node.GetFloat("negative_slope")) : 0.0f;
  e.channels = out.dim(1);
  KILN_ASSIGN_OR_RETURN(e.out_d, DescriptorOf(out));
  if (e.residual) {
    KILN_ASSIGN_OR_RETURN(e.residual_d, DescriptorOf(types.in[3]));
  }
  if (e.bias) {
    std::vector<int64_t> dims(out.rank(), 1), strides(out.rank(), 1);
    dims[1] = out.dim(1);
    const TensorType& b = types.in[2];
    strides[1] = b.rank() == 1 ? b.stride(0) : 1;
    KILN_ASSIGN_OR_RETURN(e.bias_d, dnn::TensorDescriptor::Create(b.dtype(), dims, strides));
  }
  return e;
}

}  // namespace dnn_plans
}  // namespace kiln
