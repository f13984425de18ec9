// The channels-last pooling kernels (dnn_pooling_channels_last.cu): the fast path for pooling
// of tensors whose channels are the contiguous dim (NHWC, NDHWC). The general launcher tries them
// after the row kernels.
#ifndef KILN_DNN_CUDA_POOLING_CHANNELS_LAST_H_
#define KILN_DNN_CUDA_POOLING_CHANNELS_LAST_H_

#include "dnn/cuda/primitive_launch.h"

namespace kiln {
namespace cuda {

// Returned when the call is not one the channels-last kernels take (a channel stride other than 1,
// more than 2^31 threads); nothing was launched.
constexpr int kPoolingChannelsLastNotApplicable = -1;

// Launches the forward or backward channels-last kernel for `call` and returns the launch's
// cudaError_t as an int, or kPoolingChannelsLastNotApplicable.
int LaunchPoolingChannelsLast(const PoolingCall& call, bool forward, void* stream);

}  // namespace cuda
}  // namespace kiln

#endif  // KILN_DNN_CUDA_POOLING_CHANNELS_LAST_H_
