// Element-wise activations, PReLU and Dropout as graph kernels over the primitive library's
// element-wise kernel (16-byte accesses on dense operands, any strides otherwise).
#include "absl/strings/str_cat.h"
#include "engine/status_macros.h"
#include "kernels/cuda/activation.h"
#include "kernels/cuda/graph/graph_kernel.h"
#include "kernels/cuda/graph/graph_kernels.h"
#include "kernels/cuda/tensor_ops.h"
#include "kernels/dnn/primitive_descriptors.h"

namespace kiln {

namespace {

using cuda_graph::DescriptorOf;
using cuda_graph::PreparedKernel;

absl::StatusOr<dnn::ActivationDescriptor> ActivationOf(const Node& node) {
  const std::string& op = node.op();
  if (op == "ReLU") {
    return dnn::ActivationDescriptor::Create(dnn::ActivationMode::kRelu,
                                             node.GetFloat("negative_slope"));
  }
  if (op == "Sigmoid") return dnn::ActivationDescriptor::Create(dnn::ActivationMode::kSigmoid);
  if (op == "TanH") return dnn::ActivationDescriptor::Create(dnn::ActivationMode::kTanh);
  if (op == "ELU") {
    return dnn::ActivationDescriptor::Create(dnn::ActivationMode::kElu, node.GetFloat("alpha"));
  }
  if (op == "ClippedReLU") {
    return dnn::ActivationDescriptor::Create(dnn::ActivationMode::kClippedRelu,
                                             node.GetFloat("ceiling"));
  }
  if (op == "AbsVal") return dnn::ActivationDescriptor::Create(dnn::ActivationMode::kAbs);
  if (op == "Power") {
    return dnn::ActivationDescriptor::CreatePower(node.GetFloat("power"), node.GetFloat("scale"),
                                                  node.GetFloat("shift"));
  }
  return absl::InternalError(absl::StrCat("no activation for op ", op));
}

absl::StatusOr<PreparedKernel> PrepareActivation(const Node& node, const KernelOptions&) {
  KILN_ASSIGN_OR_RETURN(dnn::ActivationDescriptor act, ActivationOf(node));
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor xd, DescriptorOf(node.input(0).type()));
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor yd, DescriptorOf(node.output_types()[0]));
  PreparedKernel k;
  k.run = [act, xd, yd](dnn::Handle& handle, const KernelArgs& a) {
    if (xd.ElementCount() == 0) return absl::OkStatus();
    return dnn::ActivationForward(handle, act, 1.0f, xd, a.inputs[0].data, 0.0f, yd,
                                  a.outputs[0].data);
  };
  return k;
}

// The slope as a tensor of x's rank broadcast over it: per channel (1, C, 1, ...) or one value.
absl::StatusOr<dnn::TensorDescriptor> SlopeDescriptor(const Node& node) {
  const TensorType& x = node.input(0).type();
  const TensorType& slope = node.input(1).type();
  std::vector<int64_t> dims(x.rank(), 1), strides(x.rank(), 1);
  if (!node.GetBool("channel_shared") && x.rank() > 1) dims[1] = x.dim(1);
  if (slope.num_elements() != dims[x.rank() > 1 ? 1 : 0]) {
    return absl::InvalidArgumentError(
        absl::StrCat("PReLU slope ", slope.ToString(), " does not match input ", x.ToString()));
  }
  return dnn::TensorDescriptor::Create(slope.dtype(), dims, strides);
}

absl::Status CheckPRelu(const Node& node) {
  if (node.input(1).type().dtype() != DataType::kF32) {
    return absl::UnimplementedError("the PReLU slope must be f32 (the primitive's parameter type)");
  }
  return SlopeDescriptor(node).status();
}

absl::StatusOr<PreparedKernel> PreparePRelu(const Node& node, const KernelOptions&) {
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor xd, DescriptorOf(node.input(0).type()));
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor yd, DescriptorOf(node.output_types()[0]));
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor sd, SlopeDescriptor(node));
  PreparedKernel k;
  k.run = [xd, yd, sd](dnn::Handle& handle, const KernelArgs& a) {
    if (xd.ElementCount() == 0) return absl::OkStatus();
    return dnn::PReluForward(handle, xd, a.inputs[0].data, sd, a.inputs[1].data, 1.0f, 0.0f, yd,
                             a.outputs[0].data);
  };
  return k;
}

// Dropout: Caffe's training-time scaling by 1/(1-ratio) with the counter-based mask; at test
// time the identity, which is a view when the types agree (no copy at all) and a copy otherwise.
absl::StatusOr<PreparedKernel> PrepareDropout(const Node& node, const KernelOptions&) {
  const TensorType& x = node.input(0).type();
  const TensorType& y = node.output_types()[0];
  PreparedKernel k;
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor xd, DescriptorOf(x));
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor yd, DescriptorOf(y));
  if (!node.GetBool("training")) {
    if (x == y) {
      k.aliased_input = 0;
      k.description = "view";
      return k;
    }
    k.run = [xd, yd](dnn::Handle& handle, const KernelArgs& a) {
      return dnn::TransformTensor(handle, 1.0f, xd, a.inputs[0].data, 0.0f, yd, a.outputs[0].data);
    };
    return k;
  }
  KILN_ASSIGN_OR_RETURN(dnn::DropoutDescriptor d,
                        dnn::DropoutDescriptor::Create(node.GetFloat("ratio"),
                                                       static_cast<uint64_t>(node.GetInt("seed"))));
  k.run = [d, xd, yd](dnn::Handle& handle, const KernelArgs& a) {
    if (xd.ElementCount() == 0) return absl::OkStatus();
    return dnn::DropoutForward(handle, d, 1.0f, xd, a.inputs[0].data, 0.0f, yd, a.outputs[0].data);
  };
  return k;
}

}  // namespace

absl::Status RegisterCudaActivationKernels(KernelRegistry& registry) {
  for (const char* op : {"ReLU", "Sigmoid", "TanH", "ELU", "ClippedReLU", "AbsVal", "Power"}) {
    KILN_RETURN_IF_ERROR(cuda_graph::RegisterGraphKernel(registry, op, "any", "dnn_activation",
                                                         nullptr, PrepareActivation));
  }
  KILN_RETURN_IF_ERROR(cuda_graph::RegisterGraphKernel(registry, "PReLU", "any", "dnn_prelu",
                                                       CheckPRelu, PreparePRelu));
  return cuda_graph::RegisterGraphKernel(registry, "Dropout", "any", "dnn_dropout", nullptr,
                                         PrepareDropout);
}

}  // namespace kiln
