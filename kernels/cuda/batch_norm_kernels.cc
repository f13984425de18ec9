// BatchNorm and AffineBatchNorm, forward and backward, as graph kernels over the primitive library
// (kernels/cuda/normalization.h and the element-wise kernel behind kernels/cuda/tensor_ops.h).
//
// BatchNorm and BatchNormGradient: any dtype of f32/f16/bf16 data, any strides.
// Parameters. The primitives take BatchNorm's statistics as packed f32 (cuDNN's convention), and
// the compiler keeps them so in 16-bit plans, but a graph may hand them over in f16/bf16 or
// strided (a graph built in 16 bits, computed statistics). Those are converted into the
// workspace by one small transform each before the call: they are runtime inputs, so plan time
// cannot do it. Statistics that are constants (the compiler's inference plans) are not inputs
// at run time: their coefficients are computed once at plan time and each run is one pass of
// the affine kernel.
//
// Caffe's BatchNorm has no scale or bias of its own (a Scale layer follows it), but the batch
// norm primitive takes both: the identity ones (scale 1, bias 0) live in a small per-context
// device buffer made on the context's first run, which the executor runs step by step before
// any CUDA-graph capture, and kept in the context's resources.
//
// AffineBatchNorm (Caffe's training-mode BatchNorm and the Scale after it, fused) and its
// gradient, as graph kernels over the batch-norm primitives, which take a scale and a bias of
// their own: the forward is one statistics pass plus one normalize-and-scale pass, and the
// backward's gradient sums are dscale and dbias themselves, so the two parameter gradients cost
// nothing beyond what dx needs. The Caffe pair run apart costs a second element-wise pass forward
// and three more passes backward (Scale's dx, Σ x̂ dy, Σ dy), and keeps x̂ alive for backward.
//
// The scale, bias and statistics are read as packed f32 (the precision pass keeps these ports
// f32); another dtype or layout is converted into the workspace first.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

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

// ---- AffineBatchNorm and AffineBatchNormGradient ----

// A per-channel input or output, seen as the primitive wants it (packed f32 [1, C, 1...]) and as
// the graph holds it; `offset` is its staging place in the workspace when the two differ.
struct ChannelVector {
  dnn::TensorDescriptor graph, packed;
  bool staged = false;
  size_t offset = 0;
};

absl::StatusOr<ChannelVector> PlanChannelVector(const TensorType& type,
                                                const dnn::TensorDescriptor& packed,
                                                size_t& workspace) {
  ChannelVector v;
  v.packed = packed;
  // The graph's [C] as the primitive's [1, C, 1, ...] (same elements, same order when packed).
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor flat, DescriptorOf(type));
  v.graph = packed;
  v.graph.dtype = flat.dtype;
  v.graph.strides[1] = flat.strides[0];
  if (type.dtype() != DataType::kF32 || !type.IsContiguous()) {
    v.staged = true;
    v.offset = workspace;
    workspace += AlignUp(static_cast<size_t>(packed.ElementCount()) * sizeof(float));
  }
  return v;
}

// The packed f32 pointer for an input vector, converting into the workspace when staged.
absl::StatusOr<const void*> ReadVector(dnn::Handle& handle, const ChannelVector& v,
                                       const void* data, void* workspace) {
  if (!v.staged) return data;
  void* to = static_cast<char*>(workspace) + v.offset;
  KILN_RETURN_IF_ERROR(dnn::TransformTensor(handle, 1.0f, v.graph, data, 0.0f, v.packed, to));
  return to;
}

// Where the primitive writes an output vector; WriteBack converts it when staged.
void* WriteVector(const ChannelVector& v, void* data, void* workspace) {
  return v.staged ? static_cast<char*>(workspace) + v.offset : data;
}
absl::Status WriteBack(dnn::Handle& handle, const ChannelVector& v, void* data, void* workspace) {
  if (!v.staged) return absl::OkStatus();
  return dnn::TransformTensor(handle, 1.0f, v.packed, static_cast<char*>(workspace) + v.offset,
                              0.0f, v.graph, data);
}

absl::StatusOr<PreparedKernel> PrepareAffineBatchNorm(const Node& node, const KernelOptions&) {
  PreparedKernel k;
  if (node.output_types()[0].num_elements() == 0) {
    k.run = [](dnn::Handle&, const KernelArgs&) { return absl::OkStatus(); };
    k.description = "empty";
    return k;
  }
  KILN_ASSIGN_OR_RETURN(dnn_plans::AffineBatchNormPlan plan,
                        dnn_plans::PlanAffineBatchNorm(node, dnn_plans::OperandTypes::Of(node)));
  const dnn::TensorDescriptor xd = plan.xd, yd = plan.yd, pd = plan.pd;
  const size_t primitive = AlignUp(dnn::BatchNormWorkspaceSize(dnn::BatchNormMode::kSpatial, xd));
  size_t workspace = primitive;
  KILN_ASSIGN_OR_RETURN(ChannelVector scale,
                        PlanChannelVector(node.input(4).type(), pd, workspace));
  KILN_ASSIGN_OR_RETURN(ChannelVector bias, PlanChannelVector(node.input(5).type(), pd, workspace));
  const bool update = plan.update;
  std::vector<dnn::TensorDescriptor> stat_in(3), stat_out(3);
  // Running statistics that are packed f32 already (what the precision pass gives) are read
  // from the inputs by the update itself; others are first copied (converted) to the outputs,
  // then updated there in place.
  bool copy_stats = false;
  if (update) {
    for (int i = 0; i < 3; ++i) {
      const TensorType& in = node.input(i + 1).type();
      if (node.output_types()[i + 1].dtype() != DataType::kF32) {
        return absl::UnimplementedError("cuda AffineBatchNorm: running statistics must be f32");
      }
      copy_stats = copy_stats || in.dtype() != DataType::kF32 || !in.IsContiguous();
      KILN_ASSIGN_OR_RETURN(stat_in[i], DescriptorOf(in));
      KILN_ASSIGN_OR_RETURN(stat_out[i], DescriptorOf(node.output_types()[i + 1]));
    }
  }
  const int saved = node.num_outputs() - 2;
  const dnn::BatchNormTraining bn = plan.bn;
  const bool relu = bn.ops == dnn::BatchNormOps::kBatchNormActivation;
  k.workspace_bytes = workspace;
  k.description = absl::StrCat("batch statistics, scale and bias", relu ? ", ReLU" : "",
                               update ? ", running statistics updated" : "");
  k.run = [=](dnn::Handle& handle, const KernelArgs& a) -> absl::Status {
    KILN_ASSIGN_OR_RETURN(const void* s, ReadVector(handle, scale, a.inputs[4].data, a.workspace));
    KILN_ASSIGN_OR_RETURN(const void* b, ReadVector(handle, bias, a.inputs[5].data, a.workspace));
    // The statistics pass reads inputs 1..3 and writes the updated values to outputs 1..3.
    dnn::BatchNormRunningStats running;
    if (update) {
      running.mean = a.outputs[1].data;
      running.var = a.outputs[2].data;
      running.caffe_scale_factor = a.outputs[3].data;
      if (copy_stats) {
        for (int i = 0; i < 3; ++i) {
          KILN_RETURN_IF_ERROR(dnn::TransformTensor(handle, 1.0f, stat_in[i], a.inputs[i + 1].data,
                                                    0.0f, stat_out[i], a.outputs[i + 1].data));
        }
      } else {
        running.mean_in = a.inputs[1].data;
        running.var_in = a.inputs[2].data;
        running.caffe_scale_factor_in = a.inputs[3].data;
      }
    }
    return dnn::BatchNormForwardTraining(
        handle, bn, 1.0f, 0.0f, xd, a.inputs[0].data, yd, a.outputs[0].data, pd, s, b, running,
        a.outputs[saved].data, a.outputs[saved + 1].data, a.workspace, primitive);
  };
  return k;
}

// AffineBatchNormGradient(x, dy, scale, saved_mean, saved_inv_std[, y]) -> dx, dscale, dbias:
// the primitive's backward with the node's scale and the statistics the forward saved (f32 [C],
// the primitive's packed parameter layout), so x is read twice (sums, then dx) and never summed
// for its statistics again. With "relu" the forward's fused output y masks dy inside those same
// two passes.
absl::StatusOr<PreparedKernel> PrepareAffineBatchNormGradient(const Node& node,
                                                              const KernelOptions&) {
  PreparedKernel k;
  KILN_ASSIGN_OR_RETURN(dnn_plans::AffineBatchNormPlan plan,
                        dnn_plans::PlanAffineBatchNorm(node, dnn_plans::OperandTypes::Of(node)));
  const dnn::TensorDescriptor xd = plan.xd, yd = plan.yd, dyd = plan.dyd, dxd = plan.dxd,
                              pd = plan.pd;
  const size_t primitive = AlignUp(dnn::BatchNormWorkspaceSize(dnn::BatchNormMode::kSpatial, xd));
  size_t workspace = primitive;
  KILN_ASSIGN_OR_RETURN(ChannelVector scale,
                        PlanChannelVector(node.input(2).type(), pd, workspace));
  KILN_ASSIGN_OR_RETURN(ChannelVector dscale,
                        PlanChannelVector(node.output_types()[1], pd, workspace));
  KILN_ASSIGN_OR_RETURN(ChannelVector dbias,
                        PlanChannelVector(node.output_types()[2], pd, workspace));
  for (int i = 3; i < 5; ++i) {
    const TensorType& t = node.input(i).type();
    if (t.dtype() != DataType::kF32 || !t.IsContiguous()) {
      return absl::UnimplementedError(
          "cuda AffineBatchNormGradient: the saved statistics must be packed f32");
    }
  }
  const dnn::BatchNormTraining bn = plan.bn;
  const bool relu = bn.ops == dnn::BatchNormOps::kBatchNormActivation;
  k.workspace_bytes = workspace;
  k.description = absl::StrCat("batch statistics backward (saved statistics)",
                               relu ? " through the ReLU" : "", " with dscale and dbias");
  k.run = [=](dnn::Handle& handle, const KernelArgs& a) -> absl::Status {
    KILN_ASSIGN_OR_RETURN(const void* s, ReadVector(handle, scale, a.inputs[2].data, a.workspace));
    void* ds = WriteVector(dscale, a.outputs[1].data, a.workspace);
    void* db = WriteVector(dbias, a.outputs[2].data, a.workspace);
    const void* y = relu ? a.inputs[5].data : nullptr;
    KILN_RETURN_IF_ERROR(dnn::BatchNormBackward(handle, bn, 1.0f, 0.0f, 1.0f, 0.0f, xd,
                                                a.inputs[0].data, yd, y, dyd, a.inputs[1].data, dxd,
                                                a.outputs[0].data, pd, s, ds, db, a.inputs[3].data,
                                                a.inputs[4].data, a.workspace, primitive));
    KILN_RETURN_IF_ERROR(WriteBack(handle, dscale, a.outputs[1].data, a.workspace));
    return WriteBack(handle, dbias, a.outputs[2].data, a.workspace);
  };
  return k;
}

}  // namespace

absl::Status RegisterCudaBatchNormKernels(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(cuda_graph::RegisterGraphKernel(
      registry, "BatchNormGradient", "any", "dnn_batchnorm", nullptr, PrepareBatchNormGradient));
  KILN_RETURN_IF_ERROR(cuda_graph::RegisterGraphKernel(
      registry, "BatchNorm", "any", "dnn_batchnorm", CheckBatchNorm, PrepareBatchNorm));
  KILN_RETURN_IF_ERROR(cuda_graph::RegisterGraphKernel(
      registry, "AffineBatchNorm", "any", "dnn_batchnorm", nullptr, PrepareAffineBatchNorm));
  return cuda_graph::RegisterGraphKernel(registry, "AffineBatchNormGradient", "any",
                                         "dnn_batchnorm", nullptr, PrepareAffineBatchNormGradient);
}

}  // namespace kiln
