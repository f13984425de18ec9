// The row-tiled pooling kernels (dnn_pooling_rows.cu): the fast path for 2-d pooling of inputs
// whose rows are contiguous. The general launcher tries them first.
#ifndef KILN_DNN_CUDA_POOLING_ROWS_H_
#define KILN_DNN_CUDA_POOLING_ROWS_H_

#include "dnn/cuda/primitive_launch.h"

namespace kiln {
namespace cuda {

// Returned when the call is not one the row kernels take (3-d, x's W stride not 1, offsets past
// 32 bits, or a single row too wide for a tile); nothing was launched.
constexpr int kPoolingRowsNotApplicable = -1;

// Launches the forward or backward row kernel for `call` and returns the launch's cudaError_t as
// an int, or kPoolingRowsNotApplicable.
int LaunchPoolingRows(const PoolingCall& call, bool forward, void* stream);

}  // namespace cuda
}  // namespace kiln

#endif  // KILN_DNN_CUDA_POOLING_ROWS_H_
