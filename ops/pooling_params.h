// The validated, per-dimension parameters of a Pooling node (shared by InferTypes and kernels).
#ifndef KILN_OPS_POOLING_PARAMS_H_
#define KILN_OPS_POOLING_PARAMS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/attribute.h"
#include "ir/tensor_type.h"

namespace kiln {

enum class PoolingMode {
  kMax,
  // Average whose divisor is the window clipped to the padded extent (zero padding counts, the
  // ceil-mode overhang past the padding does not): Caffe's AVE and cuDNN's
  // CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING.
  kAverageIncludePad,
  // Average over the in-image elements only (cuDNN's ..._EXCLUDE_PADDING).
  kAverageExcludePad,
};

struct PoolingParams {
  PoolingMode mode = PoolingMode::kMax;
  std::vector<int64_t> kernel, stride, pad;  // One per spatial dim, global pooling resolved.
  std::vector<int64_t> output;               // Output spatial sizes.

  // From normalized attributes and the input type; InvalidArgument on bad values.
  static absl::StatusOr<PoolingParams> Create(const AttrMap& attrs, const TensorType& input);
};

// Output size of one pooled dim: Caffe's ceil or floor rounding, then Caffe's clip rule (when any
// pad is non-zero, a last window starting inside the padding is dropped). Needs
// in + 2 pad >= kernel; InvalidArgument when the sizes overflow int64.
absl::StatusOr<int64_t> PooledSize(int64_t in, int64_t kernel, int64_t stride, int64_t pad,
                                   bool ceil_rounding, bool any_pad);

}  // namespace kiln

#endif  // KILN_OPS_POOLING_PARAMS_H_
