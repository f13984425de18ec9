// Softmax (or log-softmax) over one axis, and its gradient, as graph kernels over the softmax
// primitive, which computes in f32 whatever the storage type.
#include "base/status_macros.h"
#include "dnn/cuda/softmax.h"
#include "dnn/primitive_descriptors.h"
#include "kernels/cuda/graph_kernel.h"
#include "kernels/cuda/graph_kernels.h"
#include "kernels/dnn_plans/softmax.h"

namespace kiln {

namespace {

absl::StatusOr<cuda_graph::PreparedKernel> PrepareSoftmax(const Node& node, const KernelOptions&) {
  const TensorType& x = node.input(0).type();
  KILN_ASSIGN_OR_RETURN(dnn::SoftmaxDescriptor softmax, dnn_plans::SoftmaxOf(node, x.rank()));
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor xd, cuda_graph::DescriptorOf(x));
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor yd, cuda_graph::DescriptorOf(node.output_types()[0]));
  cuda_graph::PreparedKernel k;
  k.run = [softmax, xd, yd](dnn::Handle& handle, const KernelArgs& a) {
    if (xd.ElementCount() == 0) return absl::OkStatus();
    return dnn::SoftmaxForward(handle, softmax, 1.0f, xd, a.inputs[0].data, 0.0f, yd,
                               a.outputs[0].data);
  };
  return k;
}

// SoftmaxGradient(y, dy) -> dx.
absl::StatusOr<cuda_graph::PreparedKernel> PrepareSoftmaxGradient(const Node& node,
                                                                  const KernelOptions&) {
  const TensorType& y = node.input(0).type();
  KILN_ASSIGN_OR_RETURN(dnn::SoftmaxDescriptor softmax, dnn_plans::SoftmaxOf(node, y.rank()));
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor yd, cuda_graph::DescriptorOf(y));
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor dyd, cuda_graph::DescriptorOf(node.input(1).type()));
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor dxd,
                        cuda_graph::DescriptorOf(node.output_types()[0]));
  cuda_graph::PreparedKernel k;
  k.run = [softmax, yd, dyd, dxd](dnn::Handle& handle, const KernelArgs& a) {
    if (yd.ElementCount() == 0) return absl::OkStatus();
    return dnn::SoftmaxBackward(handle, softmax, 1.0f, yd, a.inputs[0].data, dyd, a.inputs[1].data,
                                0.0f, dxd, a.outputs[0].data);
  };
  return k;
}

}  // namespace

absl::Status RegisterCudaSoftmaxKernels(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(cuda_graph::RegisterGraphKernel(
      registry, "SoftmaxGradient", "any", "dnn_softmax", nullptr, PrepareSoftmaxGradient));
  return cuda_graph::RegisterGraphKernel(registry, "Softmax", "any", "dnn_softmax", nullptr,
                                         PrepareSoftmax);
}

}  // namespace kiln
