// Tile and TileGradient as graph kernels over the tensor primitives: the forward is a broadcast
// add (x seen as [outer, 1, inner] into y's [outer, tiles, inner]), the backward the sum over
// the broadcast dim (f32, deterministic), converted to dy's dtype when it is 16-bit.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "dnn/cuda/tensor_ops.h"
#include "kernels/cuda/graph_kernel.h"
#include "kernels/cuda/graph_kernels.h"
#include "ops/shape_util.h"

namespace kiln {

namespace {

using cuda_graph::AlignedBytes;

// [outer, tiles, inner] of y (packed) and [outer, 1, inner] of x, in `dtype`.
struct TileViews {
  dnn::TensorDescriptor tiled, single;
};

absl::StatusOr<TileViews> ViewsOf(const Node& node, const std::vector<int64_t>& x_dims,
                                  DataType tiled_dtype, DataType single_dtype) {
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(node.GetInt("axis"), x_dims.size(), "axis"));
  const int64_t outer = ProductOfDims(x_dims, 0, axis), tiles = node.GetInt("tiles");
  const int64_t inner = ProductOfDims(x_dims, axis, x_dims.size());
  TileViews v;
  KILN_ASSIGN_OR_RETURN(v.tiled, dnn::TensorDescriptor::Create(tiled_dtype, {outer, tiles, inner},
                                                               {tiles * inner, inner, 1}));
  KILN_ASSIGN_OR_RETURN(
      v.single, dnn::TensorDescriptor::Create(single_dtype, {outer, 1, inner}, {inner, inner, 1}));
  return v;
}

absl::StatusOr<cuda_graph::PreparedKernel> PrepareTile(const Node& node, const KernelOptions&) {
  const TensorType& x = node.input(0).type();
  KILN_ASSIGN_OR_RETURN(TileViews v, ViewsOf(node, x.dims(), x.dtype(), x.dtype()));
  cuda_graph::PreparedKernel k;
  k.description = "broadcast";
  k.run = [=](dnn::Handle& handle, const KernelArgs& a) -> absl::Status {
    return dnn::AddTensor(handle, 1.0f, v.single, a.inputs[0].data, 0.0f, v.tiled,
                          a.outputs[0].data);
  };
  return k;
}

absl::StatusOr<cuda_graph::PreparedKernel> PrepareTileGradient(const Node& node,
                                                               const KernelOptions&) {
  const TensorType& dx = node.output_types()[0];
  KILN_ASSIGN_OR_RETURN(TileViews v, ViewsOf(node, dx.dims(), dx.dtype(), DataType::kF32));
  KILN_ASSIGN_OR_RETURN(TileViews out, ViewsOf(node, dx.dims(), dx.dtype(), dx.dtype()));
  const bool convert = dx.dtype() != DataType::kF32;
  const size_t sum_bytes = convert ? AlignedBytes(dx.num_elements() * sizeof(float)) : 0;
  const size_t reduce_bytes = dnn::ReduceTensorSumWorkspaceSize(v.tiled, v.single);
  cuda_graph::PreparedKernel k;
  k.workspace_bytes = sum_bytes + reduce_bytes;
  k.description = "sum of the copies";
  k.run = [=](dnn::Handle& handle, const KernelArgs& a) -> absl::Status {
    char* ws = static_cast<char*>(a.workspace);
    void* sum = convert ? static_cast<void*>(ws) : a.outputs[0].data;
    KILN_RETURN_IF_ERROR(dnn::ReduceTensorSum(handle, 1.0f, v.tiled, a.inputs[0].data, 0.0f,
                                              v.single, sum, ws + sum_bytes, reduce_bytes));
    if (!convert) return absl::OkStatus();
    return dnn::TransformTensor(handle, 1.0f, v.single, sum, 0.0f, out.single, a.outputs[0].data);
  };
  return k;
}

}  // namespace

absl::Status RegisterCudaTileKernels(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(cuda_graph::RegisterGraphKernel(registry, "Tile", "any", "dnn_broadcast",
                                                       cuda_graph::RequirePacked, PrepareTile));
  return cuda_graph::RegisterGraphKernel(registry, "TileGradient", "any", "dnn_reduce",
                                         cuda_graph::RequirePacked, PrepareTileGradient);
}

}  // namespace kiln
