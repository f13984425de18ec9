// Pooling window arithmetic, shared by the CPU reference and the CUDA kernels: which inputs an
// output's window covers along one spatial axis, its divisor contribution, and which outputs
// cover a given input (for gather-style, deterministic backward passes).
#ifndef KILN_KERNELS_DNN_POOLING_MATH_H_
#define KILN_KERNELS_DNN_POOLING_MATH_H_

#include <cstdint>

#include "kernels/dnn/host_device.h"

namespace kiln {
namespace dnn {

struct PoolAxis {
  int64_t in = 1, out = 1, window = 1, stride = 1, pad = 0;
};

// Output `o` covers inputs [*begin, *end); `*padded` is the window's length clipped to the padded
// input [-pad, in + pad) (the divisor factor of average pooling including padding, Caffe's rule).
KILN_HD void PoolWindow(const PoolAxis& a, int64_t o, int64_t* begin, int64_t* end,
                        int64_t* padded) {
  const int64_t start = o * a.stride - a.pad;
  const int64_t stop = start + a.window < a.in + a.pad ? start + a.window : a.in + a.pad;
  *padded = stop - start;
  *begin = start > 0 ? start : 0;
  *end = stop < a.in ? stop : a.in;
}

// The outputs whose windows cover input `i`: [*first, *last], empty when first > last.
KILN_HD void PoolCoveringOutputs(const PoolAxis& a, int64_t i, int64_t* first, int64_t* last) {
  const int64_t lo = i + a.pad - a.window + 1;  // start must be > i - window
  int64_t f = lo <= 0 ? 0 : (lo + a.stride - 1) / a.stride;
  int64_t l = (i + a.pad) / a.stride;
  if (l > a.out - 1) l = a.out - 1;
  *first = f;
  *last = l;
}

}  // namespace dnn
}  // namespace kiln

#endif  // KILN_KERNELS_DNN_POOLING_MATH_H_
