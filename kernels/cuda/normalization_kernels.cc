// BatchNorm, Scale and Bias, forward and backward, as graph kernels over the primitive library
// (kernels/cuda/normalization.h and the element-wise kernel behind kernels/cuda/tensor_ops.h):
// any dtype of f32/f16/bf16 data, any strides.
//
// Parameters. The primitives take BatchNorm's statistics as packed f32 (cuDNN's convention), and
// the compiler keeps them so in 16-bit plans, but a graph may hand them over in f16/bf16 or
// strided (a graph built in 16 bits, computed statistics). Those are converted into the
// workspace by one small transform each before the call: they are runtime inputs, so plan time
// cannot do it. Statistics that are constants (the compiler's inference plans) are not inputs
// at run time: their coefficients are computed once at plan time and each run is one pass of
// the affine kernel. Scale and Bias read their parameters in any storage type and strides.
//
// Caffe's BatchNorm has no scale or bias of its own (a Scale layer follows it), but the batch
// norm primitive takes both: the identity ones (scale 1, bias 0) live in a small per-context
// device buffer made on the context's first run, which the executor runs step by step before
// any CUDA-graph capture, and kept in the context's resources.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "dnn/cuda/normalization.h"
#include "dnn/cuda/primitive_call.h"
#include "dnn/cuda/primitive_launch.h"
#include "dnn/cuda/tensor_ops.h"
#include "dnn/primitive_descriptors.h"
#include "kernels/cuda/graph_kernel.h"
#include "kernels/cuda/graph_kernels.h"
#include "kernels/dnn_plans/batch_norm.h"
#include "ops/broadcast_params.h"
#include "ops/shape_util.h"

namespace kiln {

namespace {

using cuda_graph::DescriptorOf;
using cuda_graph::IdentityFor;
using cuda_graph::IdentityParams;
using cuda_graph::PreparedKernel;

bool OutputIsEmpty(const Node& node) { return node.output_types()[0].num_elements() == 0; }

// The primitive descriptors refuse zero-sized dims, and an empty output needs no work.
PreparedKernel NothingToDo() {
  PreparedKernel k;
  k.run = [](dnn::Handle&, const KernelArgs&) { return absl::OkStatus(); };
  k.description = "empty";
  return k;
}

// Workspace slices start on 256-byte boundaries, as the workspace itself does.
size_t AlignUp(size_t bytes) { return (bytes + 255) / 256 * 256; }

// ---- BatchNorm ----

// A statistic input converted to packed f32 in the workspace before the call.
struct StagedInput {
  bool needed = false;
  dnn::TensorDescriptor from, to;
  size_t offset = 0;  // in the workspace
};

// The node's descriptors (kernels/dnn_plans/batch_norm.h, shared with the reference kernels) and
// the workspace: the primitive's own, then the staged statistics.
struct BatchNormPlan : dnn_plans::BatchNormPlan {
  size_t primitive_bytes = 0;  // the primitive's own workspace, first in ours
  // The forward's inputs 1, 2, 3; the gradient stages its inputs 3 and 4 as var and factor.
  StagedInput mean, var, factor;
  size_t workspace_bytes = 0;
};

// Plans the conversion of a statistic of `type` into packed f32 at the end of the workspace
// (`workspace` bytes so far), unless it already is packed f32.
absl::Status PlanStaging(const TensorType& type, StagedInput& staged, size_t& workspace) {
  if (type.dtype() == DataType::kF32 && type.IsContiguous()) return absl::OkStatus();
  staged.needed = true;
  KILN_ASSIGN_OR_RETURN(staged.from, DescriptorOf(type));
  KILN_ASSIGN_OR_RETURN(staged.to, DescriptorOf(type.Contiguous().WithDataType(DataType::kF32)));
  staged.offset = workspace;
  workspace += AlignUp(type.num_elements() * sizeof(float));
  return absl::OkStatus();
}

absl::StatusOr<BatchNormPlan> PlanBatchNorm(const Node& node) {
  BatchNormPlan p;
  KILN_ASSIGN_OR_RETURN(static_cast<dnn_plans::BatchNormPlan&>(p),
                        dnn_plans::PlanBatchNorm(node, dnn_plans::OperandTypes::Of(node)));
  p.primitive_bytes = AlignUp(dnn::BatchNormWorkspaceSize(p.mode, p.xd));
  p.workspace_bytes = p.primitive_bytes;
  if (p.stored_stats) {
    // Training mode ignores the statistic inputs, so only inference converts them.
    KILN_RETURN_IF_ERROR(PlanStaging(node.input(1).type(), p.mean, p.workspace_bytes));
    KILN_RETURN_IF_ERROR(PlanStaging(node.input(2).type(), p.var, p.workspace_bytes));
    if (p.has_factor) {
      KILN_RETURN_IF_ERROR(PlanStaging(node.input(3).type(), p.factor, p.workspace_bytes));
    }
  }
  return p;
}

absl::Status CheckBatchNorm(const Node& node) {
  if (OutputIsEmpty(node)) return absl::OkStatus();
  return PlanBatchNorm(node).status();
}

// The statistic of input `input`, converted into the workspace first when the plan says so.
absl::StatusOr<const void*> StatisticOf(dnn::Handle& handle, const KernelArgs& a, int input,
                                        const StagedInput& staged) {
  if (!staged.needed) return a.inputs[input].data;
  void* to = static_cast<char*>(a.workspace) + staged.offset;
  KILN_RETURN_IF_ERROR(
      dnn::TransformTensor(handle, 1.0f, staged.from, a.inputs[input].data, 0.0f, staged.to, to));
  return to;
}

// Inference over constant statistics (every compiled inference plan's BatchNorm): the
// per-channel coefficients y = A (x - s mean), A = 1 / sqrt(s var + eps), s = 1 / factor (0 for
// a zero factor), are fixed, so they are computed here once, in double as the primitive's
// parameter kernel computes them, and each run is one pass of the per-feature affine kernel: no
// parameter kernel and no statistic conversions per run (on DenseNet-121, 121 launches of each).
// Empty when the statistics are not all constants or the mode is per-activation.
std::vector<float> ConstantCoefficients(const Node& node, const BatchNormPlan& p) {
  if (!p.stored_stats || p.mode != dnn::BatchNormMode::kSpatial) return {};
  const HostTensor* mean = node.input(1).node->constant();
  const HostTensor* var = node.input(2).node->constant();
  const HostTensor* factor = p.has_factor ? node.input(3).node->constant() : nullptr;
  if (mean == nullptr || var == nullptr || (p.has_factor && factor == nullptr)) return {};
  const int64_t f = p.features;
  if (mean->type().num_elements() != f || var->type().num_elements() != f) return {};
  double s = 1;
  if (factor != nullptr) {
    if (factor->type().num_elements() < 1) return {};
    const double v = factor->GetFloat(0);
    s = v == 0.0 ? 0.0 : 1.0 / v;
  }
  // The affine kernel's four vectors: scale, the unused second scale, bias, shift.
  std::vector<float> c(4 * f, 0.0f);
  for (int64_t i = 0; i < f; ++i) {
    c[i] = static_cast<float>(1.0 / std::sqrt(s * var->GetFloat(i) + p.eps));
    c[3 * f + i] = static_cast<float>(s * mean->GetFloat(i));
  }
  return c;
}

absl::StatusOr<PreparedKernel> PrepareBatchNorm(const Node& node, const KernelOptions&) {
  if (OutputIsEmpty(node)) return NothingToDo();
  KILN_ASSIGN_OR_RETURN(BatchNormPlan p, PlanBatchNorm(node));
  const std::vector<float> fixed = ConstantCoefficients(node, p);
  if (!fixed.empty()) {
    PreparedKernel k;
    k.description = "stored statistics, coefficients fixed at plan time";
    k.in_place_input = 0;
    auto host = std::make_shared<const std::vector<float>>(fixed);
    const std::string key = absl::StrCat("batchnorm.coefficients.", node.name(), ".",
                                         reinterpret_cast<uintptr_t>(host.get()));
    k.run = [p, host, key](dnn::Handle& handle, const KernelArgs& a) -> absl::Status {
      namespace in = dnn::internal;
      KILN_ASSIGN_OR_RETURN(const cuda_graph::DeviceFloats* d,
                            cuda_graph::DeviceFloatsFor(a, key, *host));
      cuda::ElementwiseCall c =
          in::ElementwiseOver(cuda::ElementwiseOp::kAffine, p.yd, a.outputs[0].data, 1.0f, 0.0f);
      in::AddInput(c, in::OperandOf(p.xd, a.inputs[0].data));
      c.feature_strides[1] = 1;
      for (int j = 0; j < 4; ++j) c.params[j] = d->data() + j * p.features;
      return in::LaunchStatus(cuda::LaunchElementwise(c, handle.stream()), "cuda BatchNorm");
    };
    return k;
  }
  PreparedKernel k;
  k.workspace_bytes = p.workspace_bytes;
  k.description = p.stored_stats ? "stored statistics" : "batch statistics";
  // Stored statistics make it element-wise; batch statistics read all of x first.
  if (p.stored_stats) k.in_place_input = 0;
  if (p.mean.needed || p.var.needed || p.factor.needed) {
    absl::StrAppend(&k.description, ", converted to packed f32 per run");
  }
  const bool update = node.GetBool("update_running_stats");
  std::vector<dnn::TensorDescriptor> stat_in(3), stat_out(3);
  if (update) {
    for (int i = 0; i < 3; ++i) {
      KILN_ASSIGN_OR_RETURN(stat_in[i], DescriptorOf(node.input(i + 1).type()));
      KILN_ASSIGN_OR_RETURN(stat_out[i], DescriptorOf(node.output_types()[i + 1]));
      if (node.output_types()[i + 1].dtype() != DataType::kF32) {
        return absl::UnimplementedError("cuda BatchNorm: running statistics must be f32");
      }
    }
    k.description += ", running statistics updated";
  }
  k.run = [p, update, stat_in, stat_out](dnn::Handle& handle, const KernelArgs& a) -> absl::Status {
    KILN_ASSIGN_OR_RETURN(const IdentityParams* id, IdentityFor(a, p.features));
    if (p.stored_stats) {
      KILN_ASSIGN_OR_RETURN(const void* mean, StatisticOf(handle, a, 1, p.mean));
      KILN_ASSIGN_OR_RETURN(const void* var, StatisticOf(handle, a, 2, p.var));
      const void* factor = nullptr;
      if (p.has_factor) {
        KILN_ASSIGN_OR_RETURN(factor, StatisticOf(handle, a, 3, p.factor));
      }
      return dnn::BatchNormForwardInference(
          handle, p.mode, 1.0f, 0.0f, p.xd, a.inputs[0].data, p.yd, a.outputs[0].data, p.pd,
          id->ones(), id->zeros(), mean, var, p.eps, factor, a.workspace, p.primitive_bytes);
    }
    // Training mode normalizes with the batch's own (biased) statistics. With
    // update_running_stats the statistic inputs are copied to outputs 1..3, which the primitive
    // then updates by Caffe's rule in the same pass.
    void* running[3] = {nullptr, nullptr, nullptr};
    if (update) {
      for (int i = 0; i < 3; ++i) {
        running[i] = a.outputs[i + 1].data;
        KILN_RETURN_IF_ERROR(dnn::TransformTensor(handle, 1.0f, stat_in[i], a.inputs[i + 1].data,
                                                  0.0f, stat_out[i], running[i]));
      }
    }
    return dnn::BatchNormForwardTraining(handle, p.training, 1.0f, 0.0f, p.xd, a.inputs[0].data,
                                         p.yd, a.outputs[0].data, p.pd, id->ones(), id->zeros(),
                                         running[0], running[1], running[2], nullptr, nullptr,
                                         a.workspace, p.primitive_bytes);
  };
  return k;
}

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

// ---- BatchNormGradient(x, dy, mean, variance, scale_factor?) -> dx ----

// Batch statistics: the primitive's backward with identity scale (its dscale/dbias land in the
// workspace, unused). Stored statistics are constants, so dx = dy / sqrt(var s + eps): the
// inference transform of dy with a zero mean, run by the inference primitive itself.
absl::StatusOr<PreparedKernel> PrepareBatchNormGradient(const Node& node, const KernelOptions&) {
  if (OutputIsEmpty(node)) return NothingToDo();
  BatchNormPlan p;
  KILN_ASSIGN_OR_RETURN(static_cast<dnn_plans::BatchNormPlan&>(p),
                        dnn_plans::PlanBatchNorm(node, dnn_plans::OperandTypes::Of(node)));
  const dnn::TensorDescriptor dyd = p.dyd;
  p.primitive_bytes = AlignUp(dnn::BatchNormWorkspaceSize(p.mode, p.xd));
  p.workspace_bytes = p.primitive_bytes;
  size_t scratch = 0;  // dscale and dbias of the batch-statistics backward
  if (p.stored_stats) {
    KILN_RETURN_IF_ERROR(PlanStaging(node.input(3).type(), p.var, p.workspace_bytes));
    if (p.has_factor) {
      KILN_RETURN_IF_ERROR(PlanStaging(node.input(4).type(), p.factor, p.workspace_bytes));
    }
  } else {
    scratch = p.workspace_bytes;
    p.workspace_bytes += 2 * AlignUp(p.features * sizeof(float));
  }
  PreparedKernel k;
  k.workspace_bytes = p.workspace_bytes;
  k.description = p.stored_stats ? "stored statistics backward" : "batch statistics backward";
  k.run = [p, dyd, scratch](dnn::Handle& handle, const KernelArgs& a) -> absl::Status {
    KILN_ASSIGN_OR_RETURN(const IdentityParams* id, IdentityFor(a, p.features));
    if (p.stored_stats) {
      KILN_ASSIGN_OR_RETURN(const void* var, StatisticOf(handle, a, 3, p.var));
      const void* factor = nullptr;
      if (p.has_factor) {
        KILN_ASSIGN_OR_RETURN(factor, StatisticOf(handle, a, 4, p.factor));
      }
      return dnn::BatchNormForwardInference(
          handle, p.mode, 1.0f, 0.0f, dyd, a.inputs[1].data, p.yd, a.outputs[0].data, p.pd,
          id->ones(), id->zeros(), id->zeros(), var, p.eps, factor, a.workspace, p.primitive_bytes);
    }
    char* ws = static_cast<char*>(a.workspace);
    return dnn::BatchNormBackward(handle, p.mode, 1.0f, 0.0f, 1.0f, 0.0f, p.xd, a.inputs[0].data,
                                  dyd, a.inputs[1].data, p.yd, a.outputs[0].data, p.pd, id->ones(),
                                  ws + scratch, ws + scratch + AlignUp(p.features * sizeof(float)),
                                  p.eps, nullptr, nullptr, a.workspace, p.primitive_bytes);
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

absl::Status RegisterCudaNormalizationKernels(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(cuda_graph::RegisterGraphKernel(
      registry, "BatchNormGradient", "any", "dnn_batchnorm", nullptr, PrepareBatchNormGradient));
  for (const char* op : {"BiasGradient", "ScaleParamGradient"}) {
    KILN_RETURN_IF_ERROR(cuda_graph::RegisterGraphKernel(registry, op, "any", "dnn_reduce", nullptr,
                                                         PrepareParamGradient));
  }
  KILN_RETURN_IF_ERROR(cuda_graph::RegisterGraphKernel(
      registry, "BatchNorm", "any", "dnn_batchnorm", CheckBatchNorm, PrepareBatchNorm));
  for (const char* op : {"Scale", "Bias"}) {
    KILN_RETURN_IF_ERROR(cuda_graph::RegisterGraphKernel(registry, op, "any", "dnn_broadcast",
                                                         CheckAffine, PrepareAffine));
  }
  return absl::OkStatus();
}

}  // namespace kiln
