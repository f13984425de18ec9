// InnerProduct, forward and backward, as graph kernels over the cuBLAS-backed primitive (any axis,
// optional transpose, f32 in FP32 or TF32 math, f16/bf16 with f32 accumulation).
//
// cuBLAS needs x's rows packed in Caffe's order (the dims from `axis` on, row-major). An input
// in another order (an NHWC activation reaching a classifier) is first transformed into a
// row-major copy in the workspace: one pass over x, far cheaper than the product.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "dnn/cuda/inner_product.h"
#include "dnn/cuda/tensor_ops.h"
#include "kernels/cuda/graph_kernel.h"
#include "kernels/cuda/graph_kernels.h"
#include "ops/shape_util.h"

namespace kiln {

namespace {

constexpr size_t kAlign = 256;

absl::Status CheckInnerProduct(const Node& node) {
  const TensorType& w = node.input(1).type();
  if (!w.IsContiguous()) {
    return absl::UnimplementedError(absl::StrCat("the weight must be packed, got ", w.ToString()));
  }
  if (!node.output_types()[0].IsContiguous()) {
    return absl::UnimplementedError("the output must be packed row-major");
  }
  return absl::OkStatus();
}

absl::StatusOr<cuda_graph::PreparedKernel> PrepareInnerProduct(const Node& node,
                                                               const KernelOptions& options) {
  const TensorType& x = node.input(0).type();
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(node.GetInt("axis"), x.rank(), "axis"));
  const bool transposed = node.GetBool("transpose");
  const bool bias = node.num_inputs() > 2;
  const dnn::MathMode math = options.allow_tf32 && x.dtype() == DataType::kF32
                                 ? dnn::MathMode::kTf32
                                 : dnn::MathMode::kFp32;
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor xd, cuda_graph::DescriptorOf(x));
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor packed_xd, cuda_graph::DescriptorOf(x.Contiguous()));
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor wd, cuda_graph::DescriptorOf(node.input(1).type()));
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor yd, cuda_graph::DescriptorOf(node.output_types()[0]));
  const bool repack = !x.IsContiguous();
  cuda_graph::PreparedKernel k;
  if (repack) {
    k.workspace_bytes =
        (static_cast<size_t>(x.Contiguous().span_bytes()) + kAlign - 1) / kAlign * kAlign;
  }
  k.description = absl::StrCat(math == dnn::MathMode::kTf32 ? "tf32" : "",
                               repack ? (math == dnn::MathMode::kTf32 ? " repack" : "repack") : "");
  k.run = [=](dnn::Handle& handle, const KernelArgs& a) -> absl::Status {
    const void* rows = a.inputs[0].data;
    if (repack) {
      KILN_RETURN_IF_ERROR(
          dnn::TransformTensor(handle, 1.0f, xd, a.inputs[0].data, 0.0f, packed_xd, a.workspace));
      rows = a.workspace;
    }
    return dnn::InnerProductForward(handle, axis, transposed, math, 1.0f, packed_xd, rows, wd,
                                    a.inputs[1].data, bias ? a.inputs[2].data : nullptr, 0.0f, yd,
                                    a.outputs[0].data);
  };
  return k;
}

// InnerProductBackwardData(dy, weight) -> dx and InnerProductBackwardFilter(x, dy) -> dweight:
// the primitive's two backward products; x in another order than Caffe's is repacked first, as
// in the forward pass.
absl::StatusOr<cuda_graph::PreparedKernel> PrepareInnerProductBackward(
    const Node& node, const KernelOptions& options) {
  const bool data = node.kind() == OpKind::kInnerProductBackwardData;
  const TensorType& x = data ? node.output_types()[0] : node.input(0).type();
  const TensorType& dy = node.input(data ? 0 : 1).type();
  const TensorType& w = data ? node.input(1).type() : node.output_types()[0];
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(node.GetInt("axis"), x.rank(), "axis"));
  const bool transposed = node.GetBool("transpose");
  const dnn::MathMode math = options.allow_tf32 && x.dtype() == DataType::kF32
                                 ? dnn::MathMode::kTf32
                                 : dnn::MathMode::kFp32;
  if (!w.IsContiguous() || !dy.IsContiguous() || (data && !x.IsContiguous())) {
    return absl::UnimplementedError(absl::StrCat("cuda ", node.op(), ": weight ", w.ToString(),
                                                 ", dy ", dy.ToString(), " and dx ", x.ToString(),
                                                 " must be packed"));
  }
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor xd, cuda_graph::DescriptorOf(x));
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor packed_xd, cuda_graph::DescriptorOf(x.Contiguous()));
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor wd, cuda_graph::DescriptorOf(w));
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor dyd, cuda_graph::DescriptorOf(dy));
  const bool repack = !data && !x.IsContiguous();
  cuda_graph::PreparedKernel k;
  if (repack) {
    k.workspace_bytes =
        (static_cast<size_t>(x.Contiguous().span_bytes()) + kAlign - 1) / kAlign * kAlign;
  }
  k.description =
      absl::StrCat(data ? "backward data" : "backward filter",
                   math == dnn::MathMode::kTf32 ? " tf32" : "", repack ? " repack" : "");
  k.run = [=](dnn::Handle& handle, const KernelArgs& a) -> absl::Status {
    if (data) {
      return dnn::InnerProductBackwardData(handle, axis, transposed, math, 1.0f, dyd,
                                           a.inputs[0].data, wd, a.inputs[1].data, 0.0f, packed_xd,
                                           a.outputs[0].data);
    }
    const void* rows = a.inputs[0].data;
    if (repack) {
      KILN_RETURN_IF_ERROR(
          dnn::TransformTensor(handle, 1.0f, xd, a.inputs[0].data, 0.0f, packed_xd, a.workspace));
      rows = a.workspace;
    }
    return dnn::InnerProductBackwardFilter(handle, axis, transposed, math, 1.0f, packed_xd, rows,
                                           dyd, a.inputs[1].data, 0.0f, wd, a.outputs[0].data);
  };
  return k;
}

}  // namespace

absl::Status RegisterCudaInnerProductKernels(KernelRegistry& registry) {
  for (const char* op : {"InnerProductBackwardData", "InnerProductBackwardFilter"}) {
    KILN_RETURN_IF_ERROR(cuda_graph::RegisterGraphKernel(registry, op, "any", "dnn_cublas", nullptr,
                                                         PrepareInnerProductBackward));
  }
  return cuda_graph::RegisterGraphKernel(registry, "InnerProduct", "any", "dnn_cublas",
                                         CheckInnerProduct, PrepareInnerProduct);
}

}  // namespace kiln
