// Pooling window arithmetic, shared by the CPU reference and the CUDA kernels: which inputs an
// output's window covers along one spatial axis, its divisor contribution, and which outputs
// cover a given input (for gather-style, deterministic backward passes).
#ifndef KILN_DNN_POOLING_MATH_H_
#define KILN_DNN_POOLING_MATH_H_

#include <cstdint>

#include "dnn/host_device.h"

namespace kiln {
namespace dnn {

// One spatial axis of a pooling; `I` is int64_t on the host and int or int64_t on the GPU (32-bit
// arithmetic is several times cheaper there when the sizes allow it).
template <typename I>
struct PoolAxisOf {
  I in = 1, out = 1, window = 1, stride = 1, pad = 0;
};
using PoolAxis = PoolAxisOf<int64_t>;

// Output `o` covers inputs [*begin, *end); `*padded` is the window's length clipped to the padded
// input [-pad, in + pad) (the divisor factor of average pooling including padding, Caffe's rule).
template <typename I>
KILN_HD void PoolWindow(const PoolAxisOf<I>& a, I o, I* begin, I* end, I* padded) {
  const I start = o * a.stride - a.pad;
  const I stop = start + a.window < a.in + a.pad ? start + a.window : a.in + a.pad;
  *padded = stop - start;
  *begin = start > 0 ? start : 0;
  *end = stop < a.in ? stop : a.in;
}

// The outputs whose windows cover input `i`: [*first, *last], empty when first > last.
template <typename I>
KILN_HD void PoolCoveringOutputs(const PoolAxisOf<I>& a, I i, I* first, I* last) {
  const I lo = i + a.pad - a.window + 1;  // start must be > i - window
  I f = lo <= 0 ? 0 : (lo + a.stride - 1) / a.stride;
  I l = (i + a.pad) / a.stride;
  if (l > a.out - 1) l = a.out - 1;
  *first = f;
  *last = l;
}

}  // namespace dnn
}  // namespace kiln

#endif  // KILN_DNN_POOLING_MATH_H_
