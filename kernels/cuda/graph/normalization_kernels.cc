// BatchNorm, Scale and Bias as graph kernels over the primitive library.
//
// Caffe's BatchNorm has no scale or bias of its own (a Scale layer follows it), but the batch
// norm primitive takes both: the identity ones (scale 1, bias 0) live in a small per-context
// device buffer made on the first run (before any CUDA-graph capture) and kept in the context's
// resources. Scale and Bias are broadcast element-wise products and sums; their parameters may
// be f32 beside 16-bit data (the compiler keeps weights of these ports in f32).
#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "engine/status_macros.h"
#include "kernels/cuda/graph/graph_kernel.h"
#include "kernels/cuda/graph/graph_kernels.h"
#include "kernels/cuda/normalization.h"
#include "kernels/cuda/primitive_call.h"
#include "kernels/cuda/tensor_ops.h"
#include "kernels/dnn/primitive_descriptors.h"
#include "ops/broadcast_params.h"

namespace kiln {

namespace {

using cuda_graph::DescriptorOf;
using cuda_graph::PreparedKernel;

// `count` f32 ones followed by `count` zeros in device memory, owned by one context.
class IdentityParams {
 public:
  static absl::StatusOr<std::unique_ptr<IdentityParams>> Create(int64_t count) {
    std::vector<float> host(2 * count, 0.0f);
    std::fill(host.begin(), host.begin() + count, 1.0f);
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, host.size() * sizeof(float));
    if (e == cudaSuccess) {
      e = cudaMemcpy(p, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice);
    }
    if (e != cudaSuccess) {
      cudaGetLastError();
      if (p != nullptr) cudaFree(p);
      return absl::ResourceExhaustedError(
          absl::StrCat("cuda BatchNorm: identity parameters: ", cudaGetErrorString(e)));
    }
    return std::unique_ptr<IdentityParams>(new IdentityParams(static_cast<float*>(p), count));
  }
  ~IdentityParams() { cudaFree(data_); }
  const float* ones() const { return data_; }
  const float* zeros() const { return data_ + count_; }

 private:
  IdentityParams(float* data, int64_t count) : data_(data), count_(count) {}
  float* data_;
  int64_t count_;
};

absl::StatusOr<const IdentityParams*> IdentityFor(const KernelArgs& a, int64_t count) {
  if (a.resources == nullptr) return absl::FailedPreconditionError("no context resources");
  return a.resources->GetOrCreate<IdentityParams>(
      absl::StrCat("batchnorm.identity.", count),
      [count]() { return IdentityParams::Create(count); });
}

// A statistics tensor ([C] or [C, H, W]) seen with x's rank, as the primitive wants it.
absl::StatusOr<dnn::TensorDescriptor> ParamDescriptor(const TensorType& x, bool per_activation) {
  std::vector<int64_t> dims(x.rank(), 1);
  dims[1] = x.dim(1);
  if (per_activation) {
    for (int i = 2; i < x.rank(); ++i) dims[i] = x.dim(i);
  }
  return dnn::TensorDescriptor::Create(DataType::kF32, dims, RowMajorStrides(dims));
}

absl::Status CheckBatchNorm(const Node& node) {
  for (int i = 1; i < node.num_inputs(); ++i) {
    if (node.input(i).type().dtype() != DataType::kF32) {
      return absl::UnimplementedError(
          absl::StrCat("BatchNorm statistics must be f32 (the primitive's parameter type), input ",
                       i, " is ", node.input(i).type().ToString()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<PreparedKernel> PrepareBatchNorm(const Node& node, const KernelOptions&) {
  const TensorType& x = node.input(0).type();
  const bool per_activation = node.GetString("mode") == "per_activation";
  const dnn::BatchNormMode mode =
      per_activation ? dnn::BatchNormMode::kPerActivation : dnn::BatchNormMode::kSpatial;
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor xd, DescriptorOf(x));
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor yd, DescriptorOf(node.output_types()[0]));
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor pd, ParamDescriptor(x, per_activation));
  const int64_t features = pd.ElementCount();
  const double eps = node.GetFloat("eps");
  const bool global = node.GetBool("use_global_stats");
  const bool has_factor = node.num_inputs() > 3;
  PreparedKernel k;
  k.workspace_bytes = dnn::BatchNormWorkspaceSize(mode, xd);
  k.description = global ? "stored statistics" : "batch statistics";
  k.run = [=](dnn::Handle& handle, const KernelArgs& a) -> absl::Status {
    if (xd.ElementCount() == 0) return absl::OkStatus();
    KILN_ASSIGN_OR_RETURN(const IdentityParams* id, IdentityFor(a, features));
    if (global) {
      return dnn::BatchNormForwardInference(
          handle, mode, 1.0f, 0.0f, xd, a.inputs[0].data, yd, a.outputs[0].data, pd, id->ones(),
          id->zeros(), a.inputs[1].data, a.inputs[2].data, eps,
          has_factor ? a.inputs[3].data : nullptr, a.workspace, a.workspace_bytes);
    }
    // Training mode normalizes with the batch's own (biased) statistics; updating the running
    // statistics is the training plan's job.
    dnn::BatchNormTraining bn;
    bn.mode = mode;
    bn.epsilon = eps;
    return dnn::BatchNormForwardTraining(
        handle, bn, 1.0f, 0.0f, xd, a.inputs[0].data, yd, a.outputs[0].data, pd, id->ones(),
        id->zeros(), nullptr, nullptr, nullptr, nullptr, nullptr, a.workspace, a.workspace_bytes);
  };
  return k;
}

// A Scale/Bias parameter seen with x's rank: its dims on the axes it covers, 1 elsewhere, so the
// element-wise kernel broadcasts it (zero strides) over the rest.
absl::StatusOr<dnn::TensorDescriptor> BroadcastDescriptor(const Node& node, int input) {
  const TensorType& x = node.input(0).type();
  const TensorType& p = node.input(input).type();
  KILN_RETURN_IF_ERROR(
      BroadcastParams::Create(x, p, node.GetInt("axis"), node.GetInt("num_axes")).status());
  const int64_t axis =
      node.GetInt("axis") < 0 ? node.GetInt("axis") + x.rank() : node.GetInt("axis");
  std::vector<int64_t> dims(x.rank(), 1);
  for (int i = 0; i < p.rank(); ++i) dims[axis + i] = p.dim(i);
  if (!p.IsContiguous()) {
    return absl::UnimplementedError(
        absl::StrCat("the parameter must be packed, got ", p.ToString()));
  }
  return dnn::TensorDescriptor::Create(p.dtype(), dims, RowMajorStrides(dims));
}

// y = x * scale (+ bias) or y = x + bias in one element-wise pass. With f32 parameters (always,
// in the compiler's plans) it is the element-wise kernel's per-feature affine form, the one
// batch norm applies with: dense operands move 16 bytes at a time and each feature's
// coefficients are read once per run of it. A 16-bit or computed scale input is broadcast as an
// operand instead (slower: no vector accesses).
absl::StatusOr<PreparedKernel> PrepareScaleOrBias(const Node& node, const KernelOptions&) {
  const bool is_bias = node.op() == "Bias";
  const TensorType& x = node.input(0).type();
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor xd, DescriptorOf(x));
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor yd, DescriptorOf(node.output_types()[0]));
  std::vector<dnn::TensorDescriptor> params;
  bool all_f32 = true;
  for (int i = 1; i < node.num_inputs(); ++i) {
    KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor d, BroadcastDescriptor(node, i));
    params.push_back(d);
    all_f32 = all_f32 && d.dtype == DataType::kF32;
  }
  // The feature index of an element: its position in the parameter (0 stride off its axes).
  const int64_t features = params[0].ElementCount();
  std::vector<int64_t> feature_strides(x.rank(), 0);
  for (int d = 0; d < x.rank(); ++d) {
    if (params[0].dims[d] > 1) feature_strides[d] = params[0].strides[d];
  }
  PreparedKernel k;
  k.description = all_f32 ? "affine" : "broadcast";
  k.run = [=](dnn::Handle& handle, const KernelArgs& a) -> absl::Status {
    if (xd.ElementCount() == 0) return absl::OkStatus();
    namespace in = dnn::internal;
    if (all_f32) {
      KILN_ASSIGN_OR_RETURN(const IdentityParams* id, IdentityFor(a, features));
      cuda::ElementwiseCall c =
          in::ElementwiseOver(cuda::ElementwiseOp::kAffine, yd, a.outputs[0].data, 1, 0);
      in::AddInput(c, in::OperandOf(xd, a.inputs[0].data));
      for (int d = 0; d < xd.rank(); ++d) c.feature_strides[d] = feature_strides[d];
      const bool has_bias = is_bias || a.inputs.size() > 2;
      c.params[0] = is_bias ? id->ones() : static_cast<const float*>(a.inputs[1].data);
      c.params[1] = id->zeros();
      c.params[2] = has_bias ? static_cast<const float*>(a.inputs.back().data) : id->zeros();
      c.params[3] = id->zeros();
      return in::LaunchStatus(cuda::LaunchElementwise(c, handle.stream()),
                              is_bias ? "cuda Bias" : "cuda Scale");
    }
    if (!is_bias) {
      cuda::ElementwiseCall mul =
          in::ElementwiseOver(cuda::ElementwiseOp::kEltwiseProd, yd, a.outputs[0].data, 1, 0);
      in::AddInput(mul, in::OperandOf(xd, a.inputs[0].data));
      in::AddInput(mul, in::BroadcastOperandOf(params[0], a.inputs[1].data, xd));
      KILN_RETURN_IF_ERROR(
          in::LaunchStatus(cuda::LaunchElementwise(mul, handle.stream()), "cuda Scale"));
      if (params.size() < 2) return absl::OkStatus();
    }
    const void* source = is_bias ? a.inputs[0].data : a.outputs[0].data;
    cuda::ElementwiseCall add =
        in::ElementwiseOver(cuda::ElementwiseOp::kEltwiseSum, yd, a.outputs[0].data, 1, 0);
    in::AddInput(add, in::OperandOf(is_bias ? xd : yd, source));
    in::AddInput(add, in::BroadcastOperandOf(params.back(), a.inputs.back().data, xd));
    add.coef[0] = add.coef[1] = 1.0f;
    return in::LaunchStatus(cuda::LaunchElementwise(add, handle.stream()),
                            is_bias ? "cuda Bias" : "cuda Scale bias");
  };
  return k;
}

}  // namespace

absl::Status RegisterCudaNormalizationKernels(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(cuda_graph::RegisterGraphKernel(
      registry, "BatchNorm", "any", "dnn_batchnorm", CheckBatchNorm, PrepareBatchNorm));
  for (const char* op : {"Scale", "Bias"}) {
    KILN_RETURN_IF_ERROR(cuda_graph::RegisterGraphKernel(registry, op, "any", "dnn_broadcast",
                                                         nullptr, PrepareScaleOrBias));
  }
  return absl::OkStatus();
}

}  // namespace kiln
