// Pooling, forward and backward, as a graph kernel over the primitive library
// (dnn/cuda/pooling.h): any dtype of f32/f16/bf16 and any strides.
//
// The op allows a little more than the primitive takes; the plan function (kernels/dnn_plans/
// pooling.h, shared with the reference kernels) reshapes the problem where that gives the same
// result. The check runs the same plan function, so what cannot be served is refused at kernel
// selection with the reason.
#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "dnn/cuda/cuda_status.h"
#include "dnn/cuda/pooling.h"
#include "dnn/primitive_descriptors.h"
#include "kernels/cuda/graph_kernel.h"
#include "kernels/cuda/graph_kernels.h"
#include "kernels/dnn_plans/pooling.h"

namespace kiln {

namespace {

using cuda_graph::NothingToDo;
using cuda_graph::OutputIsEmpty;
using cuda_graph::PreparedKernel;
using dnn_plans::PoolingPlan;

// ---- Pooling ----

absl::StatusOr<PoolingPlan> PlanPooling(const Node& node) {
  return dnn_plans::PlanPooling(node, dnn_plans::OperandTypes::Of(node));
}

absl::Status CheckPooling(const Node& node) {
  if (OutputIsEmpty(node)) return absl::OkStatus();
  return PlanPooling(node).status();
}

absl::StatusOr<PreparedKernel> PreparePooling(const Node& node, const KernelOptions&) {
  if (OutputIsEmpty(node)) return NothingToDo();
  KILN_ASSIGN_OR_RETURN(PoolingPlan p, PlanPooling(node));
  PreparedKernel k;
  k.description = p.pool.ToString() + p.note;
  k.run = [p](dnn::Handle& handle, const KernelArgs& a) {
    return dnn::PoolingForward(handle, p.pool, 1.0f, p.xd, a.inputs[0].data, 0.0f, p.yd,
                               a.outputs[0].data);
  };
  return k;
}

// ---- PoolingGradient(x, y, dy) -> dx ----

absl::StatusOr<PreparedKernel> PreparePoolingGradient(const Node& node, const KernelOptions&) {
  if (OutputIsEmpty(node)) return NothingToDo();
  KILN_ASSIGN_OR_RETURN(PoolingPlan p, PlanPooling(node));
  // Caffe's clip pools a shorter view of x (PlanPooling): the rows past it get no gradient, so
  // the whole of dx is zeroed first and the view's gradient written into it.
  const bool view = p.dx_view.dims != p.dxd.dims;
  const size_t dx_bytes = static_cast<size_t>(node.output_types()[0].span_bytes());
  PreparedKernel k;
  k.description = p.pool.ToString() + p.note;
  k.run = [p, view, dx_bytes](dnn::Handle& handle, const KernelArgs& a) {
    if (view) {
      KILN_CUDA_RETURN_IF_ERROR(
          cudaMemsetAsync(a.outputs[0].data, 0, dx_bytes, static_cast<cudaStream_t>(a.stream)));
    }
    return dnn::PoolingBackward(handle, p.pool, 1.0f, p.yd, a.inputs[1].data, p.yd,
                                a.inputs[2].data, p.xd, a.inputs[0].data, 0.0f, p.dx_view,
                                a.outputs[0].data);
  };
  return k;
}

}  // namespace

absl::Status RegisterCudaPoolingKernels(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(cuda_graph::RegisterGraphKernel(
      registry, "PoolingGradient", "any", "dnn_pooling", CheckPooling, PreparePoolingGradient));
  return cuda_graph::RegisterGraphKernel(registry, "Pooling", "any", "dnn_pooling", CheckPooling,
                                         PreparePooling);
}

}  // namespace kiln
