// LRN, forward and backward, as a graph kernel over the primitive library
// (dnn/cuda/normalization.h): any dtype of f32/f16/bf16 and any strides. LRN across channels on
// [N, C] runs on [N, C, 1], and spatial dims past three are folded into one; the check runs the
// same plan function, so what cannot be served is refused at kernel selection with the reason.
//
// LRN semantics: the op (ops/normalization_ops.cc), the reference kernel and the primitive
// (dnn/primitive_descriptors.h) agree. Across channels y = x (k + alpha/n Σ x^2)^-beta
// over the n channels centred on c (outside ones count as 0). Within channel Caffe pools x^2
// with AVE over an n x n window, pad (n-1)/2, stride 1; that window never overhangs the padded
// extent, so its divisor is always n^2, and Caffe's power layer adds 1, not k:
// y = x (1 + alpha/n^2 Σ x^2)^-beta, the sum over the zero-padded window, which is the
// primitive's within-channel formula.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "dnn/cuda/normalization.h"
#include "dnn/primitive_descriptors.h"
#include "kernels/cuda/graph_kernel.h"
#include "kernels/cuda/graph_kernels.h"

namespace kiln {

namespace {

using cuda_graph::DescriptorOf;
using cuda_graph::NothingToDo;
using cuda_graph::OutputIsEmpty;
using cuda_graph::PreparedKernel;
using cuda_graph::WithUnitDim;

struct LrnPlan {
  dnn::LrnDescriptor lrn;
  dnn::TensorDescriptor xd, yd;
};

// Folds adjacent spatial dims of x and y (the same fold for both) until the rank is at most
// `max_rank`; across-channel LRN treats every spatial position alike, so the fold changes
// nothing but the count of dims. Unimplemented when the strides do not allow it.
absl::Status FoldSpatialDims(dnn::TensorDescriptor& xd, dnn::TensorDescriptor& yd, int max_rank) {
  auto foldable = [](const dnn::TensorDescriptor& d, int i) {
    return d.strides[i] == d.strides[i + 1] * d.dims[i + 1];
  };
  for (int i = xd.rank() - 2; i >= 2 && xd.rank() > max_rank; --i) {
    if (!foldable(xd, i) || !foldable(yd, i)) continue;
    for (dnn::TensorDescriptor* d : {&xd, &yd}) {
      d->dims[i] *= d->dims[i + 1];
      d->strides[i] = d->strides[i + 1];
      d->dims.erase(d->dims.begin() + i + 1);
      d->strides.erase(d->strides.begin() + i + 1);
    }
  }
  if (xd.rank() <= max_rank) return absl::OkStatus();
  return absl::UnimplementedError(absl::StrCat(
      "cuda LRN: ", xd.ToString(), " has more than 3 spatial dims that its strides cannot fold"));
}

// LRN of x to y (LRN: input 0 to the output; LRNGradient: input 0 to dy, input 1, of y's shape).
absl::StatusOr<LrnPlan> PlanLrn(const Node& node) {
  const std::string& region = node.GetString("region");
  if (region != "across_channels" && region != "within_channel") {
    return absl::InvalidArgumentError(absl::StrCat("cuda LRN: region '", region, "'"));
  }
  const bool across = region == "across_channels";
  LrnPlan p;
  absl::StatusOr<dnn::LrnDescriptor> lrn = dnn::LrnDescriptor::Create(
      across ? dnn::LrnMode::kAcrossChannels : dnn::LrnMode::kWithinChannel,
      node.GetInt("local_size"), node.GetFloat("alpha"), node.GetFloat("beta"), node.GetFloat("k"));
  if (!lrn.ok()) {
    // The op allows what the primitive refuses (windows past 63, a scale that may reach 0).
    return absl::UnimplementedError(absl::StrCat("cuda LRN: ", lrn.status().message()));
  }
  p.lrn = *lrn;
  KILN_ASSIGN_OR_RETURN(p.xd, DescriptorOf(node.input(0).type()));
  KILN_ASSIGN_OR_RETURN(p.yd,
                        DescriptorOf(node.kind() == OpKind::kLRNGradient ? node.input(1).type()
                                                                         : node.output_types()[0]));
  if (across && p.xd.rank() == 2) {
    // The primitive wants a spatial dim; [N, C] is [N, C, 1].
    KILN_ASSIGN_OR_RETURN(p.xd, WithUnitDim(p.xd, 2));
    KILN_ASSIGN_OR_RETURN(p.yd, WithUnitDim(p.yd, 2));
  }
  if (across) KILN_RETURN_IF_ERROR(FoldSpatialDims(p.xd, p.yd, 5));
  if (p.xd.rank() < 3 || p.xd.rank() > 5) {
    return absl::UnimplementedError(absl::StrCat(
        "cuda LRN: ", region, " needs 1 to 3 spatial dims, input is ", p.xd.ToString()));
  }
  return p;
}

absl::Status CheckLrn(const Node& node) {
  if (OutputIsEmpty(node)) return absl::OkStatus();
  return PlanLrn(node).status();
}

absl::StatusOr<PreparedKernel> PrepareLrn(const Node& node, const KernelOptions&) {
  if (OutputIsEmpty(node)) return NothingToDo();
  KILN_ASSIGN_OR_RETURN(LrnPlan p, PlanLrn(node));
  PreparedKernel k;
  k.description = p.lrn.ToString();
  k.run = [p](dnn::Handle& handle, const KernelArgs& a) {
    return dnn::LrnForward(handle, p.lrn, 1.0f, p.xd, a.inputs[0].data, 0.0f, p.yd,
                           a.outputs[0].data);
  };
  return k;
}

// LRNGradient(x, dy) -> dx
absl::StatusOr<PreparedKernel> PrepareLrnGradient(const Node& node, const KernelOptions&) {
  if (OutputIsEmpty(node)) return NothingToDo();
  KILN_ASSIGN_OR_RETURN(LrnPlan p, PlanLrn(node));
  // dx has x's shape: [N, C] gets the unit dim x got.
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor dxd, DescriptorOf(node.output_types()[0]));
  if (dxd.rank() == 2) {
    KILN_ASSIGN_OR_RETURN(dxd, WithUnitDim(dxd, 2));
  }
  if (dxd.rank() != p.xd.rank()) {
    return absl::UnimplementedError(absl::StrCat(
        "cuda LRNGradient: ", node.input(0).type().ToString(), " has more than 3 spatial dims"));
  }
  PreparedKernel k;
  k.description = p.lrn.ToString();
  // y's values are recomputed from x by the primitive: dy stands in for it (same shape).
  k.run = [p, dxd](dnn::Handle& handle, const KernelArgs& a) {
    return dnn::LrnBackward(handle, p.lrn, 1.0f, p.yd, a.inputs[1].data, p.yd, a.inputs[1].data,
                            p.xd, a.inputs[0].data, 0.0f, dxd, a.outputs[0].data);
  };
  return k;
}

}  // namespace

absl::Status RegisterCudaLrnKernels(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(cuda_graph::RegisterGraphKernel(registry, "LRNGradient", "any", "dnn_lrn",
                                                       CheckLrn, PrepareLrnGradient));
  return cuda_graph::RegisterGraphKernel(registry, "LRN", "any", "dnn_lrn", CheckLrn, PrepareLrn);
}

}  // namespace kiln
