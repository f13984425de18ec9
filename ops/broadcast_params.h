// How a Scale/Bias/PReLU-style parameter broadcasts over x: x viewed as [outer, channels, inner]
// with the parameter indexed by the channel coordinate.
#ifndef KILN_OPS_BROADCAST_PARAMS_H_
#define KILN_OPS_BROADCAST_PARAMS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "ir/tensor_type.h"

namespace kiln {

struct BroadcastParams {
  int64_t outer = 1, channels = 1, inner = 1;

  // InvalidArgument when `param` does not cover axes [axis, axis+num_axes) of `x` exactly.
  static absl::StatusOr<BroadcastParams> Create(const TensorType& x, const TensorType& param,
                                                int64_t axis, int64_t num_axes);
};

}  // namespace kiln

#endif  // KILN_OPS_BROADCAST_PARAMS_H_
