// Eltwise (sum with coefficients, product, max) as a graph kernel over the primitive, which
// takes up to 8 inputs in one pass; more are folded in chunks, each pass adding the next inputs
// to the running result (sum and max associate; product too).
#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "dnn/cuda/tensor_ops.h"
#include "kernels/cuda/graph_kernel.h"
#include "kernels/cuda/graph_kernels.h"

namespace kiln {

namespace {

constexpr int kMaxPerPass = 8;

absl::StatusOr<cuda_graph::PreparedKernel> PrepareEltwise(const Node& node, const KernelOptions&) {
  const std::string& operation = node.GetString("operation");
  dnn::EltwiseOp op;
  if (operation == "sum") {
    op = dnn::EltwiseOp::kSum;
  } else if (operation == "prod") {
    op = dnn::EltwiseOp::kProd;
  } else if (operation == "max") {
    op = dnn::EltwiseOp::kMax;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("Eltwise operation '", operation, "'"));
  }
  std::vector<double> coeffs = node.GetFloats("coeffs");
  if (op == dnn::EltwiseOp::kSum && coeffs.empty()) coeffs.assign(node.num_inputs(), 1.0);
  std::vector<dnn::TensorDescriptor> xds;
  for (const Value& v : node.inputs()) {
    KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor d, cuda_graph::DescriptorOf(v.type()));
    xds.push_back(d);
  }
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor yd, cuda_graph::DescriptorOf(node.output_types()[0]));
  // A fused ReLU (passes/fuse_eltwise_relu.cc) is applied by the last pass.
  std::optional<dnn::ActivationDescriptor> relu;
  if (node.GetString("activation") == "relu") {
    KILN_ASSIGN_OR_RETURN(relu, dnn::ActivationDescriptor::Create(dnn::ActivationMode::kRelu,
                                                                  node.GetFloat("negative_slope")));
  }
  cuda_graph::PreparedKernel k;
  k.in_place_input = 0;  // element-wise; later chunks read y, which is then input 0's bytes
  if (relu.has_value()) k.description = "then " + relu->ToString();
  k.run = [op, coeffs, xds, yd, relu](dnn::Handle& handle, const KernelArgs& a) -> absl::Status {
    if (yd.ElementCount() == 0) return absl::OkStatus();
    const int n = static_cast<int>(xds.size());
    for (int first = 0; first < n;) {
      // Later passes read the running result (y) as their first input.
      const bool chained = first > 0;
      const int take = std::min(n - first, kMaxPerPass - (chained ? 1 : 0));
      std::vector<dnn::TensorDescriptor> d;
      std::vector<const void*> p;
      std::vector<double> c;
      if (chained) {
        d.push_back(yd);
        p.push_back(a.outputs[0].data);
        c.push_back(1.0);
      }
      for (int i = first; i < first + take; ++i) {
        d.push_back(xds[i]);
        p.push_back(a.inputs[i].data);
        if (op == dnn::EltwiseOp::kSum) c.push_back(coeffs[i]);
      }
      if (op != dnn::EltwiseOp::kSum) c.clear();
      const bool last = first + take == n;
      KILN_RETURN_IF_ERROR(dnn::EltwiseForward(handle, op, c, 1.0f, d, p, 0.0f, yd,
                                               a.outputs[0].data,
                                               last && relu.has_value() ? &*relu : nullptr));
      first += take;
    }
    return absl::OkStatus();
  };
  return k;
}

// EltwiseMaxGradient(x_0..x_{n-1}, dy) -> dx_which: dy where input `which` holds the first
// maximum (the primitive's max backward, which decides as the forward pass does).
absl::StatusOr<cuda_graph::PreparedKernel> PrepareEltwiseMaxGradient(const Node& node,
                                                                     const KernelOptions&) {
  const int n = node.num_inputs() - 1;
  if (n > kMaxPerPass) {
    return absl::UnimplementedError(
        absl::StrCat("cuda EltwiseMaxGradient: ", n, " inputs (at most ", kMaxPerPass, ")"));
  }
  const int which = static_cast<int>(node.GetInt("which"));
  std::vector<dnn::TensorDescriptor> xds;
  for (int i = 0; i < n; ++i) {
    KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor d, cuda_graph::DescriptorOf(node.input(i).type()));
    xds.push_back(d);
  }
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor dyd, cuda_graph::DescriptorOf(node.input(n).type()));
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor dxd,
                        cuda_graph::DescriptorOf(node.output_types()[0]));
  cuda_graph::PreparedKernel k;
  k.run = [n, which, xds, dyd, dxd](dnn::Handle& handle, const KernelArgs& a) -> absl::Status {
    if (dxd.ElementCount() == 0) return absl::OkStatus();
    std::vector<const void*> xs;
    for (int i = 0; i < n; ++i) xs.push_back(a.inputs[i].data);
    return dnn::EltwiseBackward(handle, dnn::EltwiseOp::kMax, {}, which, 1.0f, xds, xs, dyd,
                                a.inputs[n].data, 0.0f, dxd, a.outputs[0].data);
  };
  return k;
}

}  // namespace

absl::Status RegisterCudaEltwiseKernels(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(cuda_graph::RegisterGraphKernel(
      registry, "EltwiseMaxGradient", "any", "dnn_eltwise", nullptr, PrepareEltwiseMaxGradient));
  return cuda_graph::RegisterGraphKernel(registry, "Eltwise", "any", "dnn_eltwise", nullptr,
                                         PrepareEltwise);
}

}  // namespace kiln
