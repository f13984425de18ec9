// The CPU oracle for the convolution primitives: forward, backward data, backward filter and
// backward bias over any ConvProblem (3-d, groups, dilation, strides, true convolution, any
// tensor strides), accumulating in double. Values are floats whatever the problem's dtype (f16
// and bf16 tests convert at the boundary). Blending follows cuDNN: out = alpha op + beta out, and
// out is not read when beta == 0 (so NaN poison there is overwritten).
#ifndef KILN_DNN_CONV_REFERENCE_H_
#define KILN_DNN_CONV_REFERENCE_H_

#include "dnn/conv_problem.h"

namespace kiln {
namespace dnn {

// y = alpha conv(x, w) + beta y.
void ReferenceConvolutionForward(const ConvProblem& p, const float* x, const float* w, float* y,
                                 double alpha = 1, double beta = 0);
// dx = alpha conv_backward_data(dy, w) + beta dx.
void ReferenceConvolutionBackwardData(const ConvProblem& p, const float* dy, const float* w,
                                      float* dx, double alpha = 1, double beta = 0);
// dw = alpha conv_backward_filter(x, dy) + beta dw.
void ReferenceConvolutionBackwardFilter(const ConvProblem& p, const float* x, const float* dy,
                                        float* dw, double alpha = 1, double beta = 0);
// db[k] = alpha sum over n and space of dy[n, k, ...] + beta db[k]; db is dense with K elements.
void ReferenceConvolutionBackwardBias(const ConvProblem& p, const float* dy, float* db,
                                      double alpha = 1, double beta = 0);

}  // namespace dnn
}  // namespace kiln

#endif  // KILN_DNN_CONV_REFERENCE_H_
