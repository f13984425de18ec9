// Pooling on the GPU: max, average including / excluding padding, global; 2-d and 3-d; floor or
// Caffe's ceil rounding; any strides; f32/f16/bf16 storage. Backward is deterministic (a gather,
// no atomics). As with cuDNN, max backward needs y as PoolingForward wrote it with alpha 1 and
// beta 0: the gradient goes to the first element of each window that equals y.
#ifndef KILN_DNN_CUDA_POOLING_H_
#define KILN_DNN_CUDA_POOLING_H_

#include "absl/status/status.h"
#include "dnn/cuda/dnn_handle.h"
#include "dnn/descriptors.h"
#include "dnn/primitive_descriptors.h"

namespace kiln {
namespace dnn {

absl::Status PoolingForward(Handle& handle, const PoolingDescriptor& pool, float alpha,
                            const TensorDescriptor& xd, const void* x, float beta,
                            const TensorDescriptor& yd, void* y);
absl::Status PoolingBackward(Handle& handle, const PoolingDescriptor& pool, float alpha,
                             const TensorDescriptor& yd, const void* y, const TensorDescriptor& dyd,
                             const void* dy, const TensorDescriptor& xd, const void* x, float beta,
                             const TensorDescriptor& dxd, void* dx);

}  // namespace dnn
}  // namespace kiln

#endif  // KILN_DNN_CUDA_POOLING_H_
