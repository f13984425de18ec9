// The CUDA kernel of ArgMax (kernels/cuda/argmax_kernels.cc; the op: ops/argmax_ops.cc). x is
// f32, f16 or bf16 with any strides; the output is f32, packed, in Caffe's top layout. The
// launcher returns the launch's cudaError_t as an int (0 is success).
#ifndef KILN_KERNELS_CUDA_ARGMAX_LAUNCH_H_
#define KILN_KERNELS_CUDA_ARGMAX_LAUNCH_H_

#include <cstdint>

#include "dnn/cuda/primitive_launch.h"

namespace kiln {
namespace cuda {

struct ArgMaxLaunch {
  const void* x = nullptr;
  Storage storage = Storage::kF32;
  // x's logical dims and element strides.
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t strides[kMaxRank] = {};
  // The rows (ops/argmax_params.h): x as [outer, dim, inner], along `axis`, or each item's
  // elements (has_axis false: dims[0] items of dim elements, inner 1).
  bool has_axis = false;
  int axis = -1;
  int64_t outer = 0, dim = 0, inner = 1, top_k = 1;
  bool out_max_val = false;
  float* y = nullptr;
};

// Each row's top_k entries, best first (value descending, NaN first, equal values by the higher
// index first), written as indices (or values) where ops/argmax_params.h says.
int LaunchArgMax(const ArgMaxLaunch& p, void* stream);

}  // namespace cuda
}  // namespace kiln

#endif  // KILN_KERNELS_CUDA_ARGMAX_LAUNCH_H_
