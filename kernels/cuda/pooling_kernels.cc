// Pooling and LRN, forward and backward, as graph kernels over the primitive library
// (kernels/cuda/pooling.h, kernels/cuda/normalization.h): any dtype of f32/f16/bf16 and any
// strides.
//
// The ops allow a little more than the primitives take, so the plan functions below reshape the
// problem (never the data) where that gives the same result: 1-d pooling runs as 2-d pooling
// under a unit dim, LRN across channels on [N, C] runs on [N, C, 1] and folds spatial dims past
// three, and Caffe's pooled-size clip, which Caffe applies to every dim as soon as any dim is
// padded while the primitive applies it per padded dim, is met by pooling a shorter view of x.
// The check runs the same plan function, so what cannot be served is refused at kernel
// selection with the reason.
//
// LRN semantics: the op (ops/normalization_ops.cc), the reference kernel and the primitive
// (kernels/dnn/primitive_descriptors.h) agree. Across channels y = x (k + alpha/n Σ x^2)^-beta
// over the n channels centred on c (outside ones count as 0). Within channel Caffe pools x^2
// with AVE over an n x n window, pad (n-1)/2, stride 1; that window never overhangs the padded
// extent, so its divisor is always n^2, and Caffe's power layer adds 1, not k:
// y = x (1 + alpha/n^2 Σ x^2)^-beta, the sum over the zero-padded window, which is the
// primitive's within-channel formula.
#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "dnn/cuda/cuda_status.h"
#include "dnn/cuda/normalization.h"
#include "dnn/cuda/pooling.h"
#include "dnn/primitive_descriptors.h"
#include "kernels/cuda/graph_kernel.h"
#include "kernels/cuda/graph_kernels.h"
#include "ops/pooling_params.h"

namespace kiln {

namespace {

using cuda_graph::DescriptorOf;
using cuda_graph::PreparedKernel;

bool OutputIsEmpty(const Node& node) { return node.output_types()[0].num_elements() == 0; }

// The primitive descriptors refuse zero-sized dims, and an empty output needs no work.
PreparedKernel NothingToDo() {
  PreparedKernel k;
  k.run = [](dnn::Handle&, const KernelArgs&) { return absl::OkStatus(); };
  k.description = "empty";
  return k;
}

// `d` with a dim of size 1 inserted before dim `at`; its stride is the dense one (it is never
// stepped along, but keeps the descriptor's strides ordered).
absl::StatusOr<dnn::TensorDescriptor> WithUnitDim(const dnn::TensorDescriptor& d, int at) {
  std::vector<int64_t> dims = d.dims, strides = d.strides;
  const int64_t stride = at < d.rank() ? d.strides[at] * d.dims[at] : 1;
  dims.insert(dims.begin() + at, 1);
  strides.insert(strides.begin() + at, stride);
  return dnn::TensorDescriptor::Create(d.dtype, std::move(dims), std::move(strides));
}

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

// ---- LRN ----

struct LrnPlan {
  dnn::LrnDescriptor lrn;
  dnn::TensorDescriptor xd, yd;
};

// Folds adjacent spatial dims of x and y (the same fold for both) until the rank is at most
// `max_rank`; across-channel LRN treats every spatial position alike, so the fold changes
// nothing but the count of dims. Unimplemented when the strides do not allow it.
absl::Status FoldSpatialDims(dnn::TensorDescriptor& xd, dnn::TensorDescriptor& yd, int max_rank) {
  auto foldable = [](const dnn::TensorDescriptor& d, int i) {
    return d.strides[i] == d.strides[i + 1] * d.dims[i + 1];
  };
  for (int i = xd.rank() - 2; i >= 2 && xd.rank() > max_rank; --i) {
    if (!foldable(xd, i) || !foldable(yd, i)) continue;
    for (dnn::TensorDescriptor* d : {&xd, &yd}) {
      d->dims[i] *= d->dims[i + 1];
      d->strides[i] = d->strides[i + 1];
      d->dims.erase(d->dims.begin() + i + 1);
      d->strides.erase(d->strides.begin() + i + 1);
    }
  }
  if (xd.rank() <= max_rank) return absl::OkStatus();
  return absl::UnimplementedError(absl::StrCat(
      "cuda LRN: ", xd.ToString(), " has more than 3 spatial dims that its strides cannot fold"));
}

// LRN of x to y (LRN: input 0 to the output; LRNGradient: input 0 to dy, input 1, of y's shape).
absl::StatusOr<LrnPlan> PlanLrn(const Node& node) {
  const std::string& region = node.GetString("region");
  if (region != "across_channels" && region != "within_channel") {
    return absl::InvalidArgumentError(absl::StrCat("cuda LRN: region '", region, "'"));
  }
  const bool across = region == "across_channels";
  LrnPlan p;
  absl::StatusOr<dnn::LrnDescriptor> lrn = dnn::LrnDescriptor::Create(
      across ? dnn::LrnMode::kAcrossChannels : dnn::LrnMode::kWithinChannel,
      node.GetInt("local_size"), node.GetFloat("alpha"), node.GetFloat("beta"), node.GetFloat("k"));
  if (!lrn.ok()) {
    // The op allows what the primitive refuses (windows past 63, a scale that may reach 0).
    return absl::UnimplementedError(absl::StrCat("cuda LRN: ", lrn.status().message()));
  }
  p.lrn = *lrn;
  KILN_ASSIGN_OR_RETURN(p.xd, DescriptorOf(node.input(0).type()));
  KILN_ASSIGN_OR_RETURN(p.yd,
                        DescriptorOf(node.kind() == OpKind::kLRNGradient ? node.input(1).type()
                                                                         : node.output_types()[0]));
  if (across && p.xd.rank() == 2) {
    // The primitive wants a spatial dim; [N, C] is [N, C, 1].
    KILN_ASSIGN_OR_RETURN(p.xd, WithUnitDim(p.xd, 2));
    KILN_ASSIGN_OR_RETURN(p.yd, WithUnitDim(p.yd, 2));
  }
  if (across) KILN_RETURN_IF_ERROR(FoldSpatialDims(p.xd, p.yd, 5));
  if (p.xd.rank() < 3 || p.xd.rank() > 5) {
    return absl::UnimplementedError(absl::StrCat(
        "cuda LRN: ", region, " needs 1 to 3 spatial dims, input is ", p.xd.ToString()));
  }
  return p;
}

absl::Status CheckLrn(const Node& node) {
  if (OutputIsEmpty(node)) return absl::OkStatus();
  return PlanLrn(node).status();
}

absl::StatusOr<PreparedKernel> PrepareLrn(const Node& node, const KernelOptions&) {
  if (OutputIsEmpty(node)) return NothingToDo();
  KILN_ASSIGN_OR_RETURN(LrnPlan p, PlanLrn(node));
  PreparedKernel k;
  k.description = p.lrn.ToString();
  k.run = [p](dnn::Handle& handle, const KernelArgs& a) {
    return dnn::LrnForward(handle, p.lrn, 1.0f, p.xd, a.inputs[0].data, 0.0f, p.yd,
                           a.outputs[0].data);
  };
  return k;
}

// ---- PoolingGradient(x, y, dy) -> dx, LRNGradient(x, dy) -> dx ----

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

absl::StatusOr<PreparedKernel> PrepareLrnGradient(const Node& node, const KernelOptions&) {
  if (OutputIsEmpty(node)) return NothingToDo();
  KILN_ASSIGN_OR_RETURN(LrnPlan p, PlanLrn(node));
  // dx has x's shape: [N, C] gets the unit dim x got.
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor dxd, DescriptorOf(node.output_types()[0]));
  if (dxd.rank() == 2) {
    KILN_ASSIGN_OR_RETURN(dxd, WithUnitDim(dxd, 2));
  }
  if (dxd.rank() != p.xd.rank()) {
    return absl::UnimplementedError(absl::StrCat(
        "cuda LRNGradient: ", node.input(0).type().ToString(), " has more than 3 spatial dims"));
  }
  PreparedKernel k;
  k.description = p.lrn.ToString();
  // y's values are recomputed from x by the primitive: dy stands in for it (same shape).
  k.run = [p, dxd](dnn::Handle& handle, const KernelArgs& a) {
    return dnn::LrnBackward(handle, p.lrn, 1.0f, p.yd, a.inputs[1].data, p.yd, a.inputs[1].data,
                            p.xd, a.inputs[0].data, 0.0f, dxd, a.outputs[0].data);
  };
  return k;
}

}  // namespace

absl::Status RegisterCudaPoolingKernels(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(cuda_graph::RegisterGraphKernel(
      registry, "PoolingGradient", "any", "dnn_pooling", CheckPooling, PreparePoolingGradient));
  KILN_RETURN_IF_ERROR(cuda_graph::RegisterGraphKernel(registry, "LRNGradient", "any", "dnn_lrn",
                                                       CheckLrn, PrepareLrnGradient));
  KILN_RETURN_IF_ERROR(cuda_graph::RegisterGraphKernel(registry, "Pooling", "any", "dnn_pooling",
                                                       CheckPooling, PreparePooling));
  return cuda_graph::RegisterGraphKernel(registry, "LRN", "any", "dnn_lrn", CheckLrn, PrepareLrn);
}

}  // namespace kiln
