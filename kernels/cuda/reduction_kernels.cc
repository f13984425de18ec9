// Reduction and ReductionGradient as graph kernels over the tensor and activation primitives,
// with x seen as [outer, inner] (packed) and y as [outer, 1]. Forward: |x| or x^2 (asum, sumsq)
// in f32, then the deterministic ReduceTensorSum scaled by coeff (coeff / inner for the mean).
// Backward: dy broadcast over inner, scaled by coeff, then through the activation's gradient
// (sign(x) or 2x) for asum and sumsq. The f32 staging keeps x^2 of f16 data from overflowing.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "dnn/cuda/activation.h"
#include "dnn/cuda/tensor_ops.h"
#include "kernels/cuda/graph_kernel.h"
#include "kernels/cuda/graph_kernels.h"
#include "ops/shape_util.h"

namespace kiln {

namespace {

using cuda_graph::AlignedBytes;

// The call's views: x [outer, inner] in its dtype and in f32, y [outer, 1] in `y_dtype` and f32.
struct ReductionViews {
  int64_t outer = 1, inner = 1;
  std::string op;
  float coeff = 1;
  dnn::TensorDescriptor x, x32, y, y32;
  bool through_activation = false;  // asum, sumsq
  dnn::ActivationDescriptor act;
};

absl::StatusOr<ReductionViews> ViewsOf(const Node& node, const TensorType& x, DataType y_dtype) {
  ReductionViews v;
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(node.GetInt("axis"), x.rank(), "axis"));
  v.outer = ProductOfDims(x.dims(), 0, axis);
  v.inner = ProductOfDims(x.dims(), axis, x.rank());
  v.op = node.GetString("operation");
  v.coeff = static_cast<float>(node.GetFloat("coeff") /
                               (v.op == "mean" ? static_cast<double>(v.inner) : 1.0));
  KILN_ASSIGN_OR_RETURN(v.x,
                        dnn::TensorDescriptor::Create(x.dtype(), {v.outer, v.inner}, {v.inner, 1}));
  KILN_ASSIGN_OR_RETURN(
      v.x32, dnn::TensorDescriptor::Create(DataType::kF32, {v.outer, v.inner}, {v.inner, 1}));
  KILN_ASSIGN_OR_RETURN(v.y, dnn::TensorDescriptor::Create(y_dtype, {v.outer, 1}, {1, 1}));
  KILN_ASSIGN_OR_RETURN(v.y32, dnn::TensorDescriptor::Create(DataType::kF32, {v.outer, 1}, {1, 1}));
  v.through_activation = v.op == "asum" || v.op == "sumsq";
  if (v.op == "asum") {
    KILN_ASSIGN_OR_RETURN(v.act, dnn::ActivationDescriptor::Create(dnn::ActivationMode::kAbs));
  } else if (v.op == "sumsq") {
    KILN_ASSIGN_OR_RETURN(v.act, dnn::ActivationDescriptor::CreatePower(2.0, 1.0, 0.0));
  }
  return v;
}

absl::StatusOr<cuda_graph::PreparedKernel> PrepareReduction(const Node& node,
                                                            const KernelOptions&) {
  const TensorType& x = node.input(0).type();
  const DataType y_dtype = node.output_types()[0].dtype();
  KILN_ASSIGN_OR_RETURN(ReductionViews v, ViewsOf(node, x, y_dtype));
  const size_t staged = v.through_activation ? AlignedBytes(v.outer * v.inner * sizeof(float)) : 0;
  const bool convert = y_dtype != DataType::kF32;
  const size_t sum = convert ? AlignedBytes(v.outer * sizeof(float)) : 0;
  const dnn::TensorDescriptor& source = v.through_activation ? v.x32 : v.x;
  const size_t reduce = dnn::ReduceTensorSumWorkspaceSize(source, v.y32);
  cuda_graph::PreparedKernel k;
  k.workspace_bytes = 2 * staged + sum + reduce;
  k.description = v.op;
  k.run = [=](dnn::Handle& handle, const KernelArgs& a) -> absl::Status {
    char* ws = static_cast<char*>(a.workspace);
    const void* src = a.inputs[0].data;
    if (v.through_activation) {  // f32 copy of x, then |x| or x^2 beside it
      KILN_RETURN_IF_ERROR(dnn::TransformTensor(handle, 1.0f, v.x, src, 0.0f, v.x32, ws));
      KILN_RETURN_IF_ERROR(
          dnn::ActivationForward(handle, v.act, 1.0f, v.x32, ws, 0.0f, v.x32, ws + staged));
      src = ws + staged;
    }
    void* target = convert ? static_cast<void*>(ws + 2 * staged) : a.outputs[0].data;
    KILN_RETURN_IF_ERROR(dnn::ReduceTensorSum(handle, v.coeff, source, src, 0.0f, v.y32, target,
                                              ws + 2 * staged + sum, reduce));
    if (!convert) return absl::OkStatus();
    return dnn::TransformTensor(handle, 1.0f, v.y32, target, 0.0f, v.y, a.outputs[0].data);
  };
  return k;
}

absl::StatusOr<cuda_graph::PreparedKernel> PrepareReductionGradient(const Node& node,
                                                                    const KernelOptions&) {
  const TensorType& x = node.input(0).type();
  KILN_ASSIGN_OR_RETURN(ReductionViews v, ViewsOf(node, x, node.input(1).type().dtype()));
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor dx,
                        dnn::TensorDescriptor::Create(node.output_types()[0].dtype(),
                                                      {v.outer, v.inner}, {v.inner, 1}));
  const size_t staged = AlignedBytes(v.outer * v.inner * sizeof(float));
  cuda_graph::PreparedKernel k;
  k.workspace_bytes = v.through_activation ? 3 * staged : 0;
  k.description = absl::StrCat(v.op, " backward");
  k.run = [=](dnn::Handle& handle, const KernelArgs& a) -> absl::Status {
    if (!v.through_activation) {  // coeff dy, broadcast over inner
      return dnn::AddTensor(handle, v.coeff, v.y, a.inputs[1].data, 0.0f, dx, a.outputs[0].data);
    }
    char* ws = static_cast<char*>(a.workspace);
    char *dy_b = ws, *x32 = ws + staged, *dx32 = ws + 2 * staged;
    KILN_RETURN_IF_ERROR(dnn::AddTensor(handle, v.coeff, v.y, a.inputs[1].data, 0.0f, v.x32, dy_b));
    KILN_RETURN_IF_ERROR(
        dnn::TransformTensor(handle, 1.0f, v.x, a.inputs[0].data, 0.0f, v.x32, x32));
    // y is not read by |x|' or (x^2)' (both use x): x stands in for it.
    KILN_RETURN_IF_ERROR(dnn::ActivationBackward(handle, v.act, 1.0f, v.x32, x32, v.x32, dy_b,
                                                 v.x32, x32, 0.0f, v.x32, dx32));
    return dnn::TransformTensor(handle, 1.0f, v.x32, dx32, 0.0f, dx, a.outputs[0].data);
  };
  return k;
}

}  // namespace

absl::Status RegisterCudaReductionKernels(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(cuda_graph::RegisterGraphKernel(
      registry, "Reduction", "any", "dnn_reduce", cuda_graph::RequirePacked, PrepareReduction));
  return cuda_graph::RegisterGraphKernel(registry, "ReductionGradient", "any", "dnn_broadcast",
                                         cuda_graph::RequirePacked, PrepareReductionGradient);
}

}  // namespace kiln
