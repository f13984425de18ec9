// Helpers shared by the InferTypes functions of several op families (and by kernels that need
// the same expansion of per-dimension attributes).
#ifndef KILN_OPS_SHAPE_UTIL_H_
#define KILN_OPS_SHAPE_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/op_def.h"
#include "ir/tensor_type.h"

namespace kiln {

// Caffe's rule for pad/kernel/stride/dilation: one value for every spatial dim, or one per dim.
// `what` names the attribute in the error.
absl::StatusOr<std::vector<int64_t>> ExpandSpatial(const std::vector<int64_t>& values,
                                                   int num_spatial, const std::string& what);

// Maps a Python-style axis (negative counts from the end) into [0, rank); InvalidArgument when
// out of range.
absl::StatusOr<int> NormalizeAxis(int64_t axis, int rank, const std::string& what);

// A dense output with `dims`, in the same layout family as `like` (channels-last stays
// channels-last, everything else is row-major), with `like`'s dtype. InvalidArgument when the
// dims make no tensor (negative, or more elements or bytes than int64 holds).
absl::StatusOr<TensorType> OutputLike(const TensorType& like, const std::vector<int64_t>& dims);

// InvalidArgument unless `t` is f32, f16 or bf16.
// The fused-activation attributes a pass may give an op ("activation": "none" or "relu",
// "negative_slope" only with "relu"); OK when the op declares none.
absl::Status CheckFusedActivation(const InferContext& ctx);

absl::Status RequireFloat(const TensorType& t, const std::string& what);

// InvalidArgument unless `t` has exactly `dims`.
absl::Status RequireDims(const TensorType& t, const std::vector<int64_t>& dims,
                         const std::string& what);

// Product of dims[begin, end).
int64_t ProductOfDims(const std::vector<int64_t>& dims, int begin, int end);

}  // namespace kiln

#endif  // KILN_OPS_SHAPE_UTIL_H_
