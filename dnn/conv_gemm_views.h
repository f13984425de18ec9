// The three directions of a convolution as GemmViews (see gemm_view.h):
//   forward:         m = output pixels (n, o, p, q), n = K/groups, k = C/groups x taps
//   backward data:   m = input pixels (n, d, h, w),  n = C/groups, k = K/groups x taps
//   backward filter: m = K/groups, n = C/groups x taps, k = output pixels
// `channels_innermost` orders the channel-by-taps index with the channel as its fastest digit
// (t, r, s, c), which makes k contiguous in memory for NHWC tensors and KRSC filters; otherwise
// the order is (c, t, r, s), matching NCHW/KCRS.
#ifndef KILN_DNN_CONV_GEMM_VIEWS_H_
#define KILN_DNN_CONV_GEMM_VIEWS_H_

#include "dnn/conv_problem.h"
#include "dnn/gemm_view.h"

namespace kiln {
namespace dnn {

GemmView ForwardGemmView(const ConvProblem& p, bool channels_innermost);
GemmView BackwardDataGemmView(const ConvProblem& p, bool channels_innermost);
GemmView BackwardFilterGemmView(const ConvProblem& p, bool channels_innermost);

// True when `width` consecutive k of `op` are always adjacent in memory and start at a multiple
// of `width` elements (given a base pointer aligned to width elements), so a kernel may load
// them as one vector.
bool InnerVectorizable(const GatherOperand& op, int width);

// True when consecutive k are adjacent in memory (a kernel's lanes should then run along k),
// false when consecutive outer indices are (lanes along m or n).
bool InnerIsContiguous(const GatherOperand& op);

}  // namespace dnn
}  // namespace kiln

#endif  // KILN_DNN_CONV_GEMM_VIEWS_H_
