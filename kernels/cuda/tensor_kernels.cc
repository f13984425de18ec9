// The data-movement ops as graph kernels: Concat and Slice on the primitives, Split and Crop as
// transforms (Crop reads a strided sub-region view of x), Convert as one transform between any
// dtypes and orders, and Flatten/Reshape as views when the input is dense row-major (the planner
// then gives the output the input's bytes and nothing runs) or as one transform otherwise.
#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "dnn/cuda/cuda_status.h"
#include "dnn/cuda/tensor_ops.h"
#include "kernels/cuda/graph_kernel.h"
#include "kernels/cuda/graph_kernels.h"
#include "ops/shape_util.h"

namespace kiln {

namespace {

using cuda_graph::DescriptorOf;
using cuda_graph::PreparedKernel;

absl::StatusOr<PreparedKernel> PrepareConcat(const Node& node, const KernelOptions&) {
  const TensorType& y = node.output_types()[0];
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(node.GetInt("axis"), y.rank(), "axis"));
  std::vector<dnn::TensorDescriptor> parts;
  for (const Value& v : node.inputs()) {
    KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor d, DescriptorOf(v.type()));
    parts.push_back(d);
  }
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor yd, DescriptorOf(y));
  PreparedKernel k;
  k.run = [axis, parts, yd](dnn::Handle& handle, const KernelArgs& a) {
    std::vector<const void*> data;
    for (const TensorView& v : a.inputs) data.push_back(v.data);
    return dnn::ConcatForward(handle, axis, parts, data, yd, a.outputs[0].data);
  };
  return k;
}

absl::StatusOr<PreparedKernel> PrepareSlice(const Node& node, const KernelOptions&) {
  const TensorType& x = node.input(0).type();
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(node.GetInt("axis"), x.rank(), "axis"));
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor xd, DescriptorOf(x));
  std::vector<dnn::TensorDescriptor> parts;
  for (const TensorType& t : node.output_types()) {
    KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor d, DescriptorOf(t));
    parts.push_back(d);
  }
  PreparedKernel k;
  k.run = [axis, xd, parts](dnn::Handle& handle, const KernelArgs& a) {
    std::vector<void*> data;
    for (const TensorView& v : a.outputs) data.push_back(v.data);
    return dnn::SliceForward(handle, axis, xd, a.inputs[0].data, parts, data);
  };
  return k;
}

// Split: every output a copy of x (Caffe's fan-out; the graph could share one buffer, but the
// outputs are distinct values that later in-place passes may overwrite).
absl::StatusOr<PreparedKernel> PrepareSplit(const Node& node, const KernelOptions&) {
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor xd, DescriptorOf(node.input(0).type()));
  std::vector<dnn::TensorDescriptor> outs;
  for (const TensorType& t : node.output_types()) {
    KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor d, DescriptorOf(t));
    outs.push_back(d);
  }
  PreparedKernel k;
  k.run = [xd, outs](dnn::Handle& handle, const KernelArgs& a) -> absl::Status {
    if (xd.ElementCount() == 0) return absl::OkStatus();
    for (size_t i = 0; i < outs.size(); ++i) {
      KILN_RETURN_IF_ERROR(dnn::TransformTensor(handle, 1.0f, xd, a.inputs[0].data, 0.0f, outs[i],
                                                a.outputs[i].data));
    }
    return absl::OkStatus();
  };
  return k;
}

// Crop: the output's dims read from x at the offsets, i.e. a transform from a view of x that
// starts at the offset element and keeps x's strides.
absl::StatusOr<PreparedKernel> PrepareCrop(const Node& node, const KernelOptions&) {
  const TensorType& x = node.input(0).type();
  const TensorType& y = node.output_types()[0];
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(node.GetInt("axis"), x.rank(), "axis"));
  const std::vector<int64_t>& offsets = node.GetInts("offset");
  int64_t start = 0;
  for (int d = axis; d < x.rank(); ++d) {
    const int64_t off = offsets.empty() ? 0 : offsets.size() == 1 ? offsets[0] : offsets[d - axis];
    start += off * x.stride(d);
  }
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor view,
                        dnn::TensorDescriptor::Create(x.dtype(), y.dims(), x.strides()));
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor yd, DescriptorOf(y));
  const int64_t start_bytes = start * static_cast<int64_t>(DataTypeSize(x.dtype()));
  PreparedKernel k;
  k.run = [view, yd, start_bytes](dnn::Handle& handle, const KernelArgs& a) {
    if (yd.ElementCount() == 0) return absl::OkStatus();
    const char* base = static_cast<const char*>(a.inputs[0].data) + start_bytes;
    return dnn::TransformTensor(handle, 1.0f, view, base, 0.0f, yd, a.outputs[0].data);
  };
  return k;
}

// CropGradient(dy) -> dx: dx zeroed, then dy copied into the region the crop read (a view of
// dx with its own strides, starting at the offsets).
absl::StatusOr<PreparedKernel> PrepareCropGradient(const Node& node, const KernelOptions&) {
  const TensorType& dy = node.input(0).type();
  const TensorType& dx = node.output_types()[0];
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(node.GetInt("axis"), dx.rank(), "axis"));
  const std::vector<int64_t>& offsets = node.GetInts("offset");
  int64_t start = 0;
  for (int d = axis; d < dx.rank(); ++d) {
    const int64_t off = offsets.empty() ? 0 : offsets.size() == 1 ? offsets[0] : offsets[d - axis];
    if (off < 0 || off + dy.dim(d) > dx.dim(d)) {
      return absl::InvalidArgumentError(
          absl::StrCat("cuda CropGradient: offset ", off, " on axis ", d, " runs past the input"));
    }
    start += off * dx.stride(d);
  }
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor view,
                        dnn::TensorDescriptor::Create(dx.dtype(), dy.dims(), dx.strides()));
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor dyd, DescriptorOf(dy));
  const int64_t start_bytes = start * static_cast<int64_t>(DataTypeSize(dx.dtype()));
  const size_t dx_bytes = static_cast<size_t>(dx.span_bytes());
  PreparedKernel k;
  k.run = [view, dyd, start_bytes, dx_bytes](dnn::Handle& handle, const KernelArgs& a) {
    if (dx_bytes == 0) return absl::OkStatus();
    KILN_CUDA_RETURN_IF_ERROR(
        cudaMemsetAsync(a.outputs[0].data, 0, dx_bytes, static_cast<cudaStream_t>(a.stream)));
    if (dyd.ElementCount() == 0) return absl::OkStatus();
    char* base = static_cast<char*>(a.outputs[0].data) + start_bytes;
    return dnn::TransformTensor(handle, 1.0f, dyd, a.inputs[0].data, 0.0f, view, base);
  };
  return k;
}

// Flatten, Reshape and Convert: a view when only the dims change over dense row-major bytes;
// otherwise one transform. For Flatten/Reshape the row-major element order is what is kept: x
// (any strides) is transformed into a row-major tensor of x's dims written over the output's
// bytes, which is the output read with its own dims.
absl::StatusOr<PreparedKernel> PrepareReshapeLike(const Node& node, const KernelOptions&) {
  const TensorType& x = node.input(0).type();
  const TensorType& y = node.output_types()[0];
  const bool convert = node.kind() == OpKind::kConvert;
  PreparedKernel k;
  const bool same_bytes = x.dtype() == y.dtype() && x.IsContiguous() && y.IsContiguous();
  if (same_bytes && (!convert || x == y)) {
    k.aliased_input = 0;
    k.description = "view";
    return k;
  }
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor xd, DescriptorOf(x));
  dnn::TensorDescriptor yd;
  if (convert) {
    KILN_ASSIGN_OR_RETURN(yd, DescriptorOf(y));
  } else {
    if (!y.IsContiguous()) {
      return absl::UnimplementedError(
          absl::StrCat("the output of ", node.op(), " must be row-major, got ", y.ToString()));
    }
    KILN_ASSIGN_OR_RETURN(
        yd, dnn::TensorDescriptor::Create(y.dtype(), x.dims(), RowMajorStrides(x.dims())));
  }
  k.description =
      convert ? absl::StrCat(DataTypeName(x.dtype()), "->", DataTypeName(y.dtype())) : "copy";
  k.run = [xd, yd](dnn::Handle& handle, const KernelArgs& a) {
    if (xd.ElementCount() == 0) return absl::OkStatus();
    return dnn::TransformTensor(handle, 1.0f, xd, a.inputs[0].data, 0.0f, yd, a.outputs[0].data);
  };
  return k;
}

}  // namespace

absl::Status RegisterCudaTensorKernels(KernelRegistry& registry) {
  using cuda_graph::RegisterGraphKernel;
  KILN_RETURN_IF_ERROR(
      RegisterGraphKernel(registry, "Concat", "any", "dnn_concat", nullptr, PrepareConcat));
  KILN_RETURN_IF_ERROR(
      RegisterGraphKernel(registry, "Slice", "any", "dnn_slice", nullptr, PrepareSlice));
  KILN_RETURN_IF_ERROR(
      RegisterGraphKernel(registry, "Split", "any", "dnn_transform", nullptr, PrepareSplit));
  KILN_RETURN_IF_ERROR(
      RegisterGraphKernel(registry, "Crop", "any", "dnn_transform", nullptr, PrepareCrop));
  KILN_RETURN_IF_ERROR(RegisterGraphKernel(registry, "CropGradient", "any", "dnn_transform",
                                           nullptr, PrepareCropGradient));
  for (const char* op : {"Flatten", "Reshape", "Convert"}) {
    KILN_RETURN_IF_ERROR(
        RegisterGraphKernel(registry, op, "any", "view_or_transform", nullptr, PrepareReshapeLike));
  }
  return absl::OkStatus();
}

}  // namespace kiln
