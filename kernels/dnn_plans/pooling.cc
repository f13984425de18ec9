#include "kernels/dnn_plans/pooling.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ops/pooling_params.h"
#include "ops/shape_util.h"

namespace kiln {
namespace dnn_plans {

absl::StatusOr<PoolingPlan> PlanPooling(const Node& node, const OperandTypes& types) {
  const TensorType& x = types.in[0];
  const bool backward = node.kind() == OpKind::kPoolingGradient;
  KILN_ASSIGN_OR_RETURN(PoolingParams params, PoolingParams::Create(node.attrs(), x));
  PoolingPlan p;
  KILN_ASSIGN_OR_RETURN(p.xd, DescriptorOf(x));
  KILN_ASSIGN_OR_RETURN(p.yd, DescriptorOf(backward ? types.in[1] : types.out[0]));
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
        absl::StrCat("Pooling: input ", x.ToString(), " has more than 3 spatial dims"));
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
    return absl::UnimplementedError(
        absl::StrCat("Pooling: the primitive pools ", p.xd.ToString(), " with ", p.pool.ToString(),
                     " to ", DimsToString(dims), ", the node wants ", DimsToString(p.yd.dims)));
  }
  if (backward) {
    // dx has x's shape: the unit dim x got, and the view x's clip read.
    KILN_ASSIGN_OR_RETURN(p.dxd, DescriptorOf(types.out[0]));
    if (p.dxd.rank() == 3) {
      KILN_ASSIGN_OR_RETURN(p.dxd, WithUnitDim(p.dxd, 2));
    }
    p.dx_view = p.dxd;
    p.dx_view.dims = p.xd.dims;
  }
  return p;
}

}  // namespace dnn_plans
}  // namespace kiln
