// Dropout and DropoutGradient as graph kernels over the primitive library's dropout calls: one
// element-wise pass each, any dtype of f32/f16/bf16 and any strides, the mask counter-based on
// (seed, logical index) as in the reference kernels.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "dnn/cuda/activation.h"
#include "dnn/cuda/primitive_call.h"
#include "dnn/cuda/primitive_launch.h"
#include "dnn/cuda/tensor_ops.h"
#include "dnn/primitive_descriptors.h"
#include "kernels/cuda/graph_kernel.h"
#include "kernels/cuda/graph_kernels.h"

namespace kiln {

namespace {

using cuda_graph::DescriptorOf;
using cuda_graph::NothingToDo;
using cuda_graph::OutputIsEmpty;
using cuda_graph::PreparedKernel;

struct DropoutPlan {
  bool training = false;
  dnn::DropoutDescriptor dropout;
  dnn::TensorDescriptor xd, yd;
};

absl::StatusOr<DropoutPlan> PlanDropout(const Node& node) {
  DropoutPlan p;
  p.training = node.GetBool("training");
  if (p.training) {
    KILN_ASSIGN_OR_RETURN(
        p.dropout, dnn::DropoutDescriptor::Create(node.GetFloat("ratio"),
                                                  static_cast<uint64_t>(node.GetInt("seed"))));
  }
  KILN_ASSIGN_OR_RETURN(p.xd, DescriptorOf(node.input(0).type()));
  KILN_ASSIGN_OR_RETURN(p.yd, DescriptorOf(node.output_types()[0]));
  return p;
}

absl::Status CheckDropout(const Node& node) {
  if (OutputIsEmpty(node)) return absl::OkStatus();
  return PlanDropout(node).status();
}

// Training: Caffe's inverted dropout (kept elements scaled by 1/(1-ratio)) with the counter-based
// mask of (seed, logical index), the one the reference and backward use. Inference: the
// identity, which is a view of the input when the two types are identical (the planner gives the
// output the input's bytes and nothing runs) and a copy otherwise (a strided input, whose output
// is dense).
absl::StatusOr<PreparedKernel> PrepareDropout(const Node& node, const KernelOptions&) {
  if (OutputIsEmpty(node)) return NothingToDo();
  KILN_ASSIGN_OR_RETURN(DropoutPlan p, PlanDropout(node));
  PreparedKernel k;
  if (!p.training) {
    if (node.input(0).type() == node.output_types()[0]) {
      k.aliased_input = 0;
      k.description = "view";
      return k;
    }
    k.description = "copy";
    k.run = [p](dnn::Handle& handle, const KernelArgs& a) {
      return dnn::TransformTensor(handle, 1.0f, p.xd, a.inputs[0].data, 0.0f, p.yd,
                                  a.outputs[0].data);
    };
    return k;
  }
  k.description = absl::StrCat("ratio ", p.dropout.ratio, " seed ", p.dropout.seed);
  const bool offset = node.num_inputs() > 1;
  if (offset) absl::StrAppend(&k.description, " + offset per run");
  k.run = [p, offset](dnn::Handle& handle, const KernelArgs& a) {
    return dnn::DropoutForward(handle, p.dropout, 1.0f, p.xd, a.inputs[0].data, 0.0f, p.yd,
                               a.outputs[0].data,
                               offset ? static_cast<const float*>(a.inputs[1].data) : nullptr);
  };
  return k;
}

// ---- DropoutGradient(dy[, seed offset]) ----

absl::StatusOr<PreparedKernel> PrepareDropoutGradient(const Node& node, const KernelOptions&) {
  if (OutputIsEmpty(node)) return NothingToDo();
  const bool offset = node.num_inputs() > 1;
  if (offset && node.input(1).type().dtype() != DataType::kF32) {
    return absl::UnimplementedError("cuda DropoutGradient: the seed offset must be f32");
  }
  KILN_ASSIGN_OR_RETURN(dnn::DropoutDescriptor dropout,
                        dnn::DropoutDescriptor::Create(node.GetFloat("ratio"),
                                                       static_cast<uint64_t>(node.GetInt("seed"))));
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor dyd, DescriptorOf(node.input(0).type()));
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor dxd, DescriptorOf(node.output_types()[0]));
  PreparedKernel k;
  k.description = absl::StrCat("ratio ", dropout.ratio, " seed ", dropout.seed, " backward");
  k.in_place_input = 0;
  k.run = [dropout, dyd, dxd, offset](dnn::Handle& handle, const KernelArgs& a) {
    return dnn::DropoutBackward(handle, dropout, 1.0f, dyd, a.inputs[0].data, 0.0f, dxd,
                                a.outputs[0].data,
                                offset ? static_cast<const float*>(a.inputs[1].data) : nullptr);
  };
  return k;
}

}  // namespace

absl::Status RegisterCudaDropoutKernels(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(cuda_graph::RegisterGraphKernel(
      registry, "DropoutGradient", "any", "dnn_dropout", nullptr, PrepareDropoutGradient));
  return cuda_graph::RegisterGraphKernel(registry, "Dropout", "any", "dnn_dropout", CheckDropout,
                                         PrepareDropout);
}

}  // namespace kiln
