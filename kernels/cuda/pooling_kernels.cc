// Pooling, forward and backward, as a graph kernel over the primitive library
// (dnn/cuda/pooling.h): any dtype of f32/f16/bf16 and any strides.
//
// The op allows a little more than the primitive takes, so the plan functions below reshape the
// problem (never the data) where that gives the same result: 1-d pooling runs as 2-d pooling
// under a unit dim, and Caffe's pooled-size clip, which Caffe applies to every dim as soon as any
// dim is padded while the primitive applies it per padded dim, is met by pooling a shorter view
// of x. The check runs the same plan function, so what cannot be served is refused at kernel
// selection with the reason.
#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "dnn/cuda/cuda_status.h"
#include "dnn/cuda/pooling.h"
#include "dnn/primitive_descriptors.h"
#include "kernels/cuda/graph_kernel.h"
#include "kernels/cuda/graph_kernels.h"
#include "ops/pooling_params.h"

namespace kiln {

namespace {

using cuda_graph::DescriptorOf;
using cuda_graph::PreparedKernel;

using cuda_graph::NothingToDo;
using cuda_graph::OutputIsEmpty;
using cuda_graph::WithUnitDim;

// ---- Pooling ----

struct PoolingPlan {
  dnn::PoolingDescriptor pool;
  dnn::TensorDescriptor xd, yd;
  std::string note;  // how the problem was reshaped, for plan dumps
};

// The pooling of x to y (Pooling: input 0 to the output; PoolingGradient: input 0 to input 1).
absl::StatusOr<PoolingPlan> PlanPooling(const Node& node) {
  const TensorType& x = node.input(0).type();
  const bool backward = node.kind() == OpKind::kPoolingGradient;
  KILN_ASSIGN_OR_RETURN(PoolingParams params, PoolingParams::Create(node.attrs(), x));
  PoolingPlan p;
  KILN_ASSIGN_OR_RETURN(p.xd, DescriptorOf(x));
  KILN_ASSIGN_OR_RETURN(p.yd,
                        DescriptorOf(backward ? node.input(1).type() : node.output_types()[0]));
  std::vector<int64_t> window = params.kernel, stride = params.stride, pad = params.pad;
  if (p.xd.rank() == 3) {
    // The primitive pools 2 or 3 spatial dims; a unit dim with a unit window in front of the
    // one spatial dim gives exactly the 1-d windows.
    KILN_ASSIGN_OR_RETURN(p.xd, WithUnitDim(p.xd, 2));
    KILN_ASSIGN_OR_RETURN(p.yd, WithUnitDim(p.yd, 2));
    window.insert(window.begin(), 1);
    stride.insert(stride.begin(), 1);
    pad.insert(pad.begin(), 0);
    p.note = " (1-d as 2-d)";
  }
  if (p.xd.rank() != 4 && p.xd.rank() != 5) {
    return absl::UnimplementedError(
        absl::StrCat("cuda Pooling: input ", x.ToString(), " has more than 3 spatial dims"));
  }
  dnn::PoolingMode mode = dnn::PoolingMode::kMax;
  if (params.mode == PoolingMode::kAverageIncludePad) {
    mode = dnn::PoolingMode::kAverageIncludePadding;
  } else if (params.mode == PoolingMode::kAverageExcludePad) {
    mode = dnn::PoolingMode::kAverageExcludePadding;
  }
  if (node.GetBool("global")) {
    p.pool = dnn::PoolingDescriptor::Global(mode, p.xd.rank() - 2);
  } else {
    const dnn::PoolingRounding rounding = node.GetString("rounding") == "ceil"
                                              ? dnn::PoolingRounding::kCeil
                                              : dnn::PoolingRounding::kFloor;
    KILN_ASSIGN_OR_RETURN(p.pool,
                          dnn::PoolingDescriptor::Create(mode, window, pad, stride, rounding));
  }
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> dims, dnn::PoolingOutputDims(p.pool, p.xd));
  // Caffe clips the ceil-rounded size of an unpadded dim too when another dim is padded (the
  // last window would start past the input); the primitive clips padded dims only. Such a
  // dim's last window then lies wholly outside x, and the windows before it end at or before
  // (out - 1) stride + window: x cut there has the same windows and the clipped size.
  for (int i = 0; i < p.pool.spatial_rank(); ++i) {
    const int d = 2 + i;
    if (dims[d] == p.yd.dims[d] || pad[i] != 0) continue;
    const int64_t used = (p.yd.dims[d] - 1) * stride[i] + window[i];
    if (used < p.xd.dims[d]) {
      p.xd.dims[d] = used;
      absl::StrAppend(&p.note, " (dim ", d, " read to ", used, ": Caffe's clip)");
    }
  }
  KILN_ASSIGN_OR_RETURN(dims, dnn::PoolingOutputDims(p.pool, p.xd));
  if (dims != p.yd.dims) {
    return absl::UnimplementedError(absl::StrCat(
        "cuda Pooling: the primitive pools ", p.xd.ToString(), " with ", p.pool.ToString(), " to ",
        DimsToString(dims), ", the node wants ", DimsToString(p.yd.dims)));
  }
  return p;
}

absl::Status CheckPooling(const Node& node) {
  if (OutputIsEmpty(node)) return absl::OkStatus();
  return PlanPooling(node).status();
}

absl::StatusOr<PreparedKernel> PreparePooling(const Node& node, const KernelOptions&) {
  if (OutputIsEmpty(node)) return NothingToDo();
  KILN_ASSIGN_OR_RETURN(PoolingPlan p, PlanPooling(node));
  PreparedKernel k;
  k.description = p.pool.ToString() + p.note;
  k.run = [p](dnn::Handle& handle, const KernelArgs& a) {
    return dnn::PoolingForward(handle, p.pool, 1.0f, p.xd, a.inputs[0].data, 0.0f, p.yd,
                               a.outputs[0].data);
  };
  return k;
}

// ---- PoolingGradient(x, y, dy) -> dx ----

absl::StatusOr<PreparedKernel> PreparePoolingGradient(const Node& node, const KernelOptions&) {
  if (OutputIsEmpty(node)) return NothingToDo();
  KILN_ASSIGN_OR_RETURN(PoolingPlan p, PlanPooling(node));
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor dxd, DescriptorOf(node.output_types()[0]));
  // Caffe's clip pools a shorter view of x (PlanPooling): the rows past it get no gradient, so
  // the whole of dx is zeroed first and the view's gradient written into it.
  const bool view = p.xd.dims != dxd.dims;
  dnn::TensorDescriptor dx_view = dxd;
  dx_view.dims = p.xd.dims;
  const size_t dx_bytes = static_cast<size_t>(node.output_types()[0].span_bytes());
  PreparedKernel k;
  k.description = p.pool.ToString() + p.note;
  k.run = [p, dx_view, view, dx_bytes](dnn::Handle& handle, const KernelArgs& a) {
    if (view) {
      KILN_CUDA_RETURN_IF_ERROR(
          cudaMemsetAsync(a.outputs[0].data, 0, dx_bytes, static_cast<cudaStream_t>(a.stream)));
    }
    return dnn::PoolingBackward(handle, p.pool, 1.0f, p.yd, a.inputs[1].data, p.yd,
                                a.inputs[2].data, p.xd, a.inputs[0].data, 0.0f, dx_view,
                                a.outputs[0].data);
  };
  return k;
}

}  // namespace

absl::Status RegisterCudaPoolingKernels(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(cuda_graph::RegisterGraphKernel(
      registry, "PoolingGradient", "any", "dnn_pooling", CheckPooling, PreparePoolingGradient));
  return cuda_graph::RegisterGraphKernel(registry, "Pooling", "any", "dnn_pooling", CheckPooling,
                                         PreparePooling);
}

}  // namespace kiln
