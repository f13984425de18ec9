// Scale and Bias, forward and backward (BiasGradient, ScaleParamGradient), as graph kernels over
// the primitive library (the element-wise kernel behind kernels/cuda/tensor_ops.h and its
// reductions): any dtype of f32/f16/bf16 data, any strides. Scale and Bias read their parameters
// in any storage type and strides.
#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "dnn/cuda/primitive_call.h"
#include "dnn/cuda/primitive_launch.h"
#include "dnn/cuda/tensor_ops.h"
#include "dnn/primitive_descriptors.h"
#include "kernels/cuda/graph_kernel.h"
#include "kernels/cuda/graph_kernels.h"
#include "ops/broadcast_params.h"
#include "ops/shape_util.h"

namespace kiln {

namespace {

using cuda_graph::DescriptorOf;
using cuda_graph::IdentityFor;
using cuda_graph::IdentityParams;
using cuda_graph::NothingToDo;
using cuda_graph::OutputIsEmpty;
using cuda_graph::PreparedKernel;

// Workspace slices start on 256-byte boundaries, as the workspace itself does.
size_t AlignUp(size_t bytes) { return (bytes + 255) / 256 * 256; }

// ---- Scale and Bias ----

struct AffinePlan {
  bool is_bias = false;
  dnn::TensorDescriptor xd, yd;
  // Scale [and bias], or the bias: each seen with x's rank, its dims on the axes it covers and 1
  // elsewhere, its own strides, so the element-wise kernel broadcasts it in place.
  std::vector<dnn::TensorDescriptor> params;
  // Packed f32 parameters run as the element-wise kernel's per-feature affine form.
  bool per_feature = false;
  int64_t features = 1;
  std::vector<int64_t> feature_strides;
};

absl::StatusOr<dnn::TensorDescriptor> BroadcastView(const Node& node, int input, int rank) {
  const TensorType& x = node.input(0).type();
  const TensorType& param = node.input(input).type();
  const int64_t axis = node.GetInt("axis"), num_axes = node.GetInt("num_axes");
  KILN_RETURN_IF_ERROR(BroadcastParams::Create(x, param, axis, num_axes).status());
  std::vector<int64_t> dims(rank, 1), strides(rank, 1);
  // BroadcastParams' scalar forms: one value for every element, whatever the axis says.
  const bool scalar = param.rank() == 0 || (num_axes == 0 && param.num_elements() == 1);
  if (!scalar) {
    KILN_ASSIGN_OR_RETURN(int first, NormalizeAxis(axis, x.rank(), "axis"));
    for (int i = 0; i < param.rank(); ++i) {
      dims[first + i] = param.dim(i);
      strides[first + i] = param.stride(i);
    }
  }
  return dnn::TensorDescriptor::Create(param.dtype(), dims, strides);
}

absl::StatusOr<AffinePlan> PlanAffine(const Node& node) {
  AffinePlan p;
  p.is_bias = node.kind() == OpKind::kBias;
  KILN_ASSIGN_OR_RETURN(p.xd, DescriptorOf(node.input(0).type()));
  KILN_ASSIGN_OR_RETURN(p.yd, DescriptorOf(node.output_types()[0]));
  p.per_feature = true;
  for (int i = 1; i < node.num_inputs(); ++i) {
    KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor d, BroadcastView(node, i, p.xd.rank()));
    const TensorType& t = node.input(i).type();
    p.per_feature = p.per_feature && t.dtype() == DataType::kF32 && t.IsContiguous();
    p.params.push_back(std::move(d));
  }
  if (p.params.empty() || p.params.size() > 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("cuda ", node.op(), ": ", node.num_inputs(), " inputs"));
  }
  // The feature index of an element is its offset in the (packed) parameter.
  p.features = p.params[0].ElementCount();
  p.feature_strides.assign(p.xd.rank(), 0);
  for (int d = 0; d < p.xd.rank(); ++d) {
    if (p.params[0].dims[d] > 1) p.feature_strides[d] = p.params[0].strides[d];
  }
  return p;
}

absl::Status CheckAffine(const Node& node) {
  if (OutputIsEmpty(node)) return absl::OkStatus();
  return PlanAffine(node).status();
}

// y = x * scale (+ bias) or y = x + bias. With packed f32 parameters (always, in the compiler's
// plans) one pass of the element-wise kernel's per-feature affine form, the one batch norm
// applies with: dense operands move 16 bytes at a time and each feature's coefficients are read
// once per run of it. Other parameters (16-bit, strided, computed) are broadcast operands of a
// product and a sum instead, read in their own storage type.
absl::StatusOr<PreparedKernel> PrepareAffine(const Node& node, const KernelOptions&) {
  if (OutputIsEmpty(node)) return NothingToDo();
  KILN_ASSIGN_OR_RETURN(AffinePlan p, PlanAffine(node));
  PreparedKernel k;
  k.description = p.per_feature ? "per-feature affine" : "broadcast operands";
  k.in_place_input = 0;
  // A Scale with a fused ReLU (passes/fuse_pointwise) applies it before the store.
  const bool relu = !p.is_bias && node.GetString("activation") == "relu";
  dnn::ActivationParams<float> act;
  act.kind = dnn::kActRelu;
  act.coef = relu ? static_cast<float>(node.GetFloat("negative_slope")) : 0.0f;
  if (relu) absl::StrAppend(&k.description, " + relu");
  const char* where = p.is_bias ? "cuda Bias" : "cuda Scale";
  k.run = [p, where, relu, act](dnn::Handle& handle, const KernelArgs& a) -> absl::Status {
    namespace in = dnn::internal;
    const bool has_bias = p.is_bias || p.params.size() > 1;
    const void* bias = has_bias ? a.inputs.back().data : nullptr;
    if (p.per_feature) {
      KILN_ASSIGN_OR_RETURN(const IdentityParams* id, IdentityFor(a, p.features));
      // One operand: y = p0 (x - p3) + p2.
      cuda::ElementwiseCall c =
          in::ElementwiseOver(cuda::ElementwiseOp::kAffine, p.yd, a.outputs[0].data, 1.0f, 0.0f);
      in::AddInput(c, in::OperandOf(p.xd, a.inputs[0].data));
      for (int d = 0; d < p.xd.rank(); ++d) c.feature_strides[d] = p.feature_strides[d];
      c.params[0] = p.is_bias ? id->ones() : static_cast<const float*>(a.inputs[1].data);
      c.params[1] = id->zeros();
      c.params[2] = has_bias ? static_cast<const float*>(bias) : id->zeros();
      c.params[3] = id->zeros();
      c.then_activation = relu;
      c.act = act;
      return in::LaunchStatus(cuda::LaunchElementwise(c, handle.stream()), where);
    }
    // Broadcast operands: the product, the sum, then the activation, each over y.
    auto activate = [&]() -> absl::Status {
      if (!relu) return absl::OkStatus();
      cuda::ElementwiseCall r = in::ElementwiseOver(cuda::ElementwiseOp::kActivation, p.yd,
                                                    a.outputs[0].data, 1.0f, 0.0f);
      in::AddInput(r, in::OperandOf(p.yd, a.outputs[0].data));
      r.act = act;
      return in::LaunchStatus(cuda::LaunchElementwise(r, handle.stream()), where);
    };
    const void* source = a.inputs[0].data;
    if (!p.is_bias) {
      cuda::ElementwiseCall mul = in::ElementwiseOver(cuda::ElementwiseOp::kEltwiseProd, p.yd,
                                                      a.outputs[0].data, 1.0f, 0.0f);
      in::AddInput(mul, in::OperandOf(p.xd, a.inputs[0].data));
      in::AddInput(mul, in::BroadcastOperandOf(p.params[0], a.inputs[1].data, p.xd));
      KILN_RETURN_IF_ERROR(in::LaunchStatus(cuda::LaunchElementwise(mul, handle.stream()), where));
      if (!has_bias) return activate();
      source = a.outputs[0].data;  // the product, read back in place
    }
    cuda::ElementwiseCall add =
        in::ElementwiseOver(cuda::ElementwiseOp::kEltwiseSum, p.yd, a.outputs[0].data, 1.0f, 0.0f);
    in::AddInput(add, in::OperandOf(p.is_bias ? p.xd : p.yd, source));
    in::AddInput(add, in::BroadcastOperandOf(p.params.back(), bias, p.xd));
    add.coef[0] = add.coef[1] = 1.0f;
    KILN_RETURN_IF_ERROR(in::LaunchStatus(cuda::LaunchElementwise(add, handle.stream()), where));
    return activate();
  };
  return k;
}

// ---- BiasGradient(dy) and ScaleParamGradient(x, dy) ----

// Σ dy (Σ x dy for a scale, one pass over both, no product tensor) over the dims the parameter
// broadcasts along, as the primitive's deterministic reduction into packed f32; a parameter
// gradient of another type is reduced into the workspace and converted.
absl::StatusOr<PreparedKernel> PrepareParamGradient(const Node& node, const KernelOptions&) {
  const bool scale = node.kind() == OpKind::kScaleParamGradient;
  const TensorType& dy = node.input(scale ? 1 : 0).type();
  const TensorType& dparam = node.output_types()[0];
  if (dparam.num_elements() == 0) return NothingToDo();
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor dyd, DescriptorOf(dy));
  KILN_RETURN_IF_ERROR(
      BroadcastParams::Create(dy, dparam, node.GetInt("axis"), node.GetInt("num_axes")).status());
  // The parameter seen with dy's rank (1 on the axes it is broadcast along), packed f32.
  std::vector<int64_t> dims(dy.rank(), 1);
  const bool scalar = dparam.rank() == 0 || (node.GetInt("num_axes") == 0);
  if (!scalar) {
    KILN_ASSIGN_OR_RETURN(int first, NormalizeAxis(node.GetInt("axis"), dy.rank(), "axis"));
    for (int i = 0; i < dparam.rank(); ++i) dims[first + i] = dparam.dim(i);
  }
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor reduced,
                        dnn::TensorDescriptor::Create(DataType::kF32, dims, RowMajorStrides(dims)));
  // The gradient is dense (OutputLike): only its dtype may differ from the reduction's f32.
  if (!dparam.IsContiguous()) {
    return absl::UnimplementedError(
        absl::StrCat("cuda ", node.op(), ": strided output ", dparam.ToString()));
  }
  if (scale && node.input(0).type().dtype() != dy.dtype()) {
    return absl::UnimplementedError(absl::StrCat("cuda ScaleParamGradient: x is ",
                                                 DataTypeName(node.input(0).type().dtype()),
                                                 " but dy is ", DataTypeName(dy.dtype())));
  }
  dnn::TensorDescriptor out = reduced;
  out.dtype = dparam.dtype();
  const bool convert = dparam.dtype() != DataType::kF32;
  // Workspace: [reduced f32, when converted] [reduction scratch].
  size_t at = 0, reduced_at = 0;
  if (convert) {
    reduced_at = at;
    at += AlignUp(reduced.ElementCount() * sizeof(float));
  }
  const size_t reduce_at = at;
  const size_t reduce_bytes = scale ? dnn::ReduceTensorDotWorkspaceSize(dyd, reduced)
                                    : dnn::ReduceTensorSumWorkspaceSize(dyd, reduced);
  PreparedKernel k;
  k.workspace_bytes = at + reduce_bytes;
  k.description = scale ? "sum of x*dy" : "sum of dy";
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor xd, DescriptorOf(node.input(0).type()));
  k.run = [=](dnn::Handle& handle, const KernelArgs& a) -> absl::Status {
    char* ws = static_cast<char*>(a.workspace);
    void* target = convert ? ws + reduced_at : a.outputs[0].data;
    if (scale) {
      KILN_RETURN_IF_ERROR(dnn::ReduceTensorDot(handle, 1.0f, xd, a.inputs[0].data, dyd,
                                                a.inputs[1].data, 0.0f, reduced, target,
                                                ws + reduce_at, reduce_bytes));
    } else {
      KILN_RETURN_IF_ERROR(dnn::ReduceTensorSum(handle, 1.0f, dyd, a.inputs[0].data, 0.0f, reduced,
                                                target, ws + reduce_at, reduce_bytes));
    }
    if (!convert) return absl::OkStatus();
    return dnn::TransformTensor(handle, 1.0f, reduced, target, 0.0f, out, a.outputs[0].data);
  };
  return k;
}

}  // namespace

absl::Status RegisterCudaScaleKernels(KernelRegistry& registry) {
  for (const char* op : {"BiasGradient", "ScaleParamGradient"}) {
    KILN_RETURN_IF_ERROR(cuda_graph::RegisterGraphKernel(registry, op, "any", "dnn_reduce", nullptr,
                                                         PrepareParamGradient));
  }
  for (const char* op : {"Scale", "Bias"}) {
    KILN_RETURN_IF_ERROR(cuda_graph::RegisterGraphKernel(registry, op, "any", "dnn_broadcast",
                                                         CheckAffine, PrepareAffine));
  }
  return absl::OkStatus();
}

}  // namespace kiln
