// AffineBatchNorm (Caffe's training-mode BatchNorm and the Scale after it, fused) and its
// gradient, as graph kernels over the batch-norm primitives, which take a scale and a bias of
// their own: the forward is one statistics pass plus one normalize-and-scale pass, and the
// backward's gradient sums are dscale and dbias themselves, so the two parameter gradients cost
// nothing beyond what dx needs. The Caffe pair run apart costs a second element-wise pass forward
// and three more passes backward (Scale's dx, Σ x̂ dy, Σ dy), and keeps x̂ alive for backward.
//
// The scale, bias and statistics are read as packed f32 (the precision pass keeps these ports
// f32); another dtype or layout is converted into the workspace first.
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "dnn/cuda/normalization.h"
#include "dnn/cuda/tensor_ops.h"
#include "dnn/primitive_descriptors.h"
#include "kernels/cuda/graph_kernel.h"
#include "kernels/cuda/graph_kernels.h"
#include "kernels/dnn_plans/batch_norm.h"
#include "ops/shape_util.h"

namespace kiln {

namespace {

using cuda_graph::DescriptorOf;
using cuda_graph::PreparedKernel;

size_t AlignUp(size_t bytes) { return (bytes + 255) / 256 * 256; }

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

absl::Status RegisterCudaAffineBatchNormKernels(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(cuda_graph::RegisterGraphKernel(
      registry, "AffineBatchNorm", "any", "dnn_batchnorm", nullptr, PrepareAffineBatchNorm));
  return cuda_graph::RegisterGraphKernel(registry, "AffineBatchNormGradient", "any",
                                         "dnn_batchnorm", nullptr, PrepareAffineBatchNormGradient);
}

}  // namespace kiln
