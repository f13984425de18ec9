// Element-wise activations and PReLU, forward and backward, as graph kernels over the
// primitive library's activation calls (kernels/cuda/activation.h): one element-wise pass each, any
// dtype of f32/f16/bf16 and any strides (16-byte accesses when every operand is dense).
//
// Everything the node decides is turned into descriptors by one Plan* function per op
// (kernels/dnn_plans/activation.h, shared with the reference kernels), which the check runs too: a
// node the kernel cannot serve is refused at kernel selection with the reason, never when the plan
// is created or run.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "dnn/cuda/activation.h"
#include "dnn/cuda/primitive_call.h"
#include "dnn/cuda/primitive_launch.h"
#include "dnn/cuda/tensor_ops.h"
#include "dnn/primitive_descriptors.h"
#include "kernels/cuda/graph_kernel.h"
#include "kernels/cuda/graph_kernels.h"
#include "kernels/dnn_plans/activation.h"

namespace kiln {

namespace {

using cuda_graph::DescriptorOf;
using cuda_graph::PreparedKernel;
using dnn_plans::ActivationOf;
using dnn_plans::ActivationPlan;
using dnn_plans::PReluPlan;

using cuda_graph::NothingToDo;
using cuda_graph::OutputIsEmpty;

// ---- ReLU, Sigmoid, TanH, ELU, ClippedReLU, Power, AbsVal ----

absl::StatusOr<ActivationPlan> PlanActivation(const Node& node) {
  return dnn_plans::PlanActivation(node, dnn_plans::OperandTypes::Of(node));
}

absl::Status CheckActivation(const Node& node) {
  if (OutputIsEmpty(node)) return absl::OkStatus();
  return PlanActivation(node).status();
}

absl::StatusOr<PreparedKernel> PrepareActivation(const Node& node, const KernelOptions&) {
  if (OutputIsEmpty(node)) return NothingToDo();
  KILN_ASSIGN_OR_RETURN(ActivationPlan p, PlanActivation(node));
  PreparedKernel k;
  k.description = p.act.ToString();
  k.in_place_input = 0;
  k.run = [p](dnn::Handle& handle, const KernelArgs& a) {
    return dnn::ActivationForward(handle, p.act, 1.0f, p.xd, a.inputs[0].data, 0.0f, p.yd,
                                  a.outputs[0].data);
  };
  return k;
}

// ---- PReLU ----

absl::StatusOr<PReluPlan> PlanPRelu(const Node& node) {
  return dnn_plans::PlanPRelu(node, dnn_plans::OperandTypes::Of(node));
}

absl::Status CheckPRelu(const Node& node) {
  if (OutputIsEmpty(node)) return absl::OkStatus();
  return PlanPRelu(node).status();
}

absl::StatusOr<PreparedKernel> PreparePRelu(const Node& node, const KernelOptions&) {
  if (OutputIsEmpty(node)) return NothingToDo();
  KILN_ASSIGN_OR_RETURN(PReluPlan p, PlanPRelu(node));
  PreparedKernel k;
  k.description = absl::StrCat("slope ", DataTypeName(p.slope.dtype));
  k.in_place_input = 0;
  if (p.slope.dtype == DataType::kF32) {
    k.run = [p](dnn::Handle& handle, const KernelArgs& a) {
      return dnn::PReluForward(handle, p.xd, a.inputs[0].data, p.slope, a.inputs[1].data, 1.0f,
                               0.0f, p.yd, a.outputs[0].data);
    };
    return k;
  }
  // The primitive's API fixes the slope to f32 (cuDNN's parameter convention), but its
  // element-wise kernel reads any storage type: a 16-bit slope (a graph built in f16, or a
  // computed slope) goes to the same call directly instead of through a converted copy.
  k.run = [p](dnn::Handle& handle, const KernelArgs& a) {
    namespace in = dnn::internal;
    cuda::ElementwiseCall c =
        in::ElementwiseOver(cuda::ElementwiseOp::kPRelu, p.yd, a.outputs[0].data, 1.0f, 0.0f);
    in::AddInput(c, in::OperandOf(p.xd, a.inputs[0].data));
    in::AddInput(c, in::BroadcastOperandOf(p.slope, a.inputs[1].data, p.xd));
    return in::LaunchStatus(cuda::LaunchElementwise(c, handle.stream()), "cuda PReLU");
  };
  return k;
}

// ---- ActivationGradient(saved, dy), PReLUGradient(x, slope, dy) ----

// The saved tensor (the forward input or output, whichever the formula reads: ops/gradients/
// pointwise_gradients.cc) is passed as both x and y. Several dy inputs (a gradient sum folded in
// by passes/fuse_gradient_sum_activation.cc) are added inside the same pass.
absl::Status CheckActivationGradient(const Node& node) {
  if (OutputIsEmpty(node)) return absl::OkStatus();
  const int dys = node.num_inputs() - 1;
  if (dys > cuda::kMaxOperands - 1) {
    return absl::UnimplementedError(absl::StrCat(
        "cuda ActivationGradient: ", dys, " dy inputs (at most ", cuda::kMaxOperands - 1, ")"));
  }
  return ActivationOf(node).status();
}

absl::StatusOr<PreparedKernel> PrepareActivationGradient(const Node& node, const KernelOptions&) {
  if (OutputIsEmpty(node)) return NothingToDo();
  KILN_RETURN_IF_ERROR(CheckActivationGradient(node));
  KILN_ASSIGN_OR_RETURN(dnn::ActivationDescriptor act, ActivationOf(node));
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor sd, DescriptorOf(node.input(0).type()));
  std::vector<dnn::TensorDescriptor> dyds;
  for (int i = 1; i < node.num_inputs(); ++i) {
    KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor d, DescriptorOf(node.input(i).type()));
    dyds.push_back(d);
  }
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor dxd, DescriptorOf(node.output_types()[0]));
  PreparedKernel k;
  k.description = act.ToString() + " backward";
  k.in_place_input = 1;  // dx may take dy's bytes: element-wise.
  if (dyds.size() == 1) {
    const dnn::TensorDescriptor dyd = dyds[0];
    k.run = [act, sd, dyd, dxd](dnn::Handle& handle, const KernelArgs& a) {
      return dnn::ActivationBackward(handle, act, 1.0f, sd, a.inputs[0].data, dyd, a.inputs[1].data,
                                     sd, a.inputs[0].data, 0.0f, dxd, a.outputs[0].data);
    };
    return k;
  }
  absl::StrAppend(&k.description, " of the sum of ", dyds.size(), " gradients");
  k.run = [act, sd, dyds, dxd](dnn::Handle& handle, const KernelArgs& a) {
    std::vector<const void*> dys;
    for (size_t i = 1; i < a.inputs.size(); ++i) dys.push_back(a.inputs[i].data);
    return dnn::ActivationBackwardOfSum(handle, act, 1.0f, sd, a.inputs[0].data, dyds, dys, 0.0f,
                                        dxd, a.outputs[0].data);
  };
  return k;
}

absl::StatusOr<PreparedKernel> PreparePReluGradient(const Node& node, const KernelOptions&) {
  if (OutputIsEmpty(node)) return NothingToDo();
  KILN_ASSIGN_OR_RETURN(PReluPlan p, PlanPRelu(node));
  if (p.slope.dtype != DataType::kF32 || node.output_types()[1].dtype() != DataType::kF32) {
    return absl::UnimplementedError("cuda PReLUGradient: the slope and its gradient must be f32");
  }
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor dyd, DescriptorOf(node.input(2).type()));
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor dxd, DescriptorOf(node.output_types()[0]));
  PreparedKernel k;
  k.workspace_bytes = dnn::PReluBackwardWorkspaceSize(p.xd, p.slope);
  k.description = "prelu backward";
  dnn::TensorDescriptor dslope = p.slope;
  dslope.strides = std::vector<int64_t>(dslope.rank(), 1);  // the gradient is packed
  k.run = [p, dyd, dxd, dslope](dnn::Handle& handle, const KernelArgs& a) {
    return dnn::PReluBackward(handle, p.xd, a.inputs[0].data, dyd, a.inputs[2].data, p.slope,
                              a.inputs[1].data, 1.0f, 0.0f, dxd, a.outputs[0].data, 1.0f, 0.0f,
                              a.outputs[1].data, a.workspace, a.workspace_bytes);
  };
  return k;
}

absl::Status CheckPReluGradient(const Node& node) {
  if (OutputIsEmpty(node)) return absl::OkStatus();
  return PlanPRelu(node).status();
}

}  // namespace

absl::Status RegisterCudaActivationKernels(KernelRegistry& registry) {
  using cuda_graph::RegisterGraphKernel;
  KILN_RETURN_IF_ERROR(RegisterGraphKernel(registry, "ActivationGradient", "any", "dnn_activation",
                                           CheckActivationGradient, PrepareActivationGradient));
  KILN_RETURN_IF_ERROR(RegisterGraphKernel(registry, "PReLUGradient", "any", "dnn_prelu",
                                           CheckPReluGradient, PreparePReluGradient));
  for (const char* op : {"ReLU", "Sigmoid", "TanH", "ELU", "ClippedReLU", "AbsVal", "Power"}) {
    KILN_RETURN_IF_ERROR(cuda_graph::RegisterGraphKernel(registry, op, "any", "dnn_activation",
                                                         CheckActivation, PrepareActivation));
  }
  return cuda_graph::RegisterGraphKernel(registry, "PReLU", "any", "dnn_prelu", CheckPRelu,
                                         PreparePRelu);
}

}  // namespace kiln
