// LRN, forward and backward, as a graph kernel over the primitive library
// (dnn/cuda/normalization.h): any dtype of f32/f16/bf16 and any strides. The node becomes
// descriptors in kernels/dnn_plans/lrn.h (shared with the reference kernels, and where the op's
// semantics are compared with the primitive's); the check runs the same plan function, so what
// cannot be served is refused at kernel selection with the reason.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "dnn/cuda/normalization.h"
#include "dnn/primitive_descriptors.h"
#include "kernels/cuda/graph_kernel.h"
#include "kernels/cuda/graph_kernels.h"
#include "kernels/dnn_plans/lrn.h"

namespace kiln {

namespace {

using cuda_graph::NothingToDo;
using cuda_graph::OutputIsEmpty;
using cuda_graph::PreparedKernel;
using dnn_plans::LrnPlan;

absl::StatusOr<LrnPlan> PlanLrn(const Node& node) {
  return dnn_plans::PlanLrn(node, dnn_plans::OperandTypes::Of(node));
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
  PreparedKernel k;
  k.description = p.lrn.ToString();
  // y's values are recomputed from x by the primitive: dy stands in for it (same shape).
  k.run = [p](dnn::Handle& handle, const KernelArgs& a) {
    return dnn::LrnBackward(handle, p.lrn, 1.0f, p.yd, a.inputs[1].data, p.yd, a.inputs[1].data,
                            p.xd, a.inputs[0].data, 0.0f, p.dxd, a.outputs[0].data);
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
