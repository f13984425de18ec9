// The patch matrix of a 2-d convolution, shared by the CPU GEMM kernels of both directions:
// row (c, r, s) of `col` ([C*R*S, P*Q]) holds the input value each output pixel sees through
// tap (r, s) of channel c (0 in the padding). Col2im is its transpose: it adds every entry of
// `col` back onto the input position it came from.
#ifndef KILN_KERNELS_CPU_IM2COL_H_
#define KILN_KERNELS_CPU_IM2COL_H_

#include <cstdint>

#include "ops/convolution_params.h"

namespace kiln {

struct Im2colShape {
  int64_t channels, h, w;  // one image (or group) of the input
  int64_t r, s;            // filter taps
  int64_t p, q;            // output plane
  int64_t stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w;

  static Im2colShape Of(const ConvolutionParams& params, int64_t channels, int64_t h, int64_t w,
                        int64_t r, int64_t s, int64_t p, int64_t q) {
    return {channels,
            h,
            w,
            r,
            s,
            p,
            q,
            params.stride[0],
            params.stride[1],
            params.pad[0],
            params.pad[1],
            params.dilation[0],
            params.dilation[1]};
  }
};

void Im2col(const Im2colShape& shape, const float* x, float* col);
// x (channels*h*w, already initialised) += the entries of col at their input positions.
void Col2imAdd(const Im2colShape& shape, const float* col, float* x);

}  // namespace kiln

#endif  // KILN_KERNELS_CPU_IM2COL_H_
