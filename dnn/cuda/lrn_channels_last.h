// The channels-last LRN kernels (dnn_lrn_channels_last.cu): the fast path for LRN on tensors
// whose channels are the contiguous dim (NHWC, NDHWC). The general launcher tries them first.
#ifndef KILN_DNN_CUDA_LRN_CHANNELS_LAST_H_
#define KILN_DNN_CUDA_LRN_CHANNELS_LAST_H_

#include "dnn/cuda/primitive_launch.h"

namespace kiln {
namespace cuda {

// Returned when the call is not one the channels-last kernels take (a channel stride other than
// 1, a window wider than they unroll, more than 2^31 threads); nothing was launched.
constexpr int kLrnChannelsLastNotApplicable = -1;

// Launches the forward or backward channels-last kernel for `call` and returns the launch's
// cudaError_t as an int, or kLrnChannelsLastNotApplicable.
int LaunchLrnChannelsLast(const LrnCall& call, bool forward, void* stream);

}  // namespace cuda
}  // namespace kiln

#endif  // KILN_DNN_CUDA_LRN_CHANNELS_LAST_H_
