// Softmax (accurate and log, over any axes) and SoftmaxWithLoss on the GPU, forward and
// backward, any strides, f32/f16/bf16 storage with f32 math.
#ifndef KILN_DNN_CUDA_SOFTMAX_H_
#define KILN_DNN_CUDA_SOFTMAX_H_

#include <cstddef>

#include "absl/status/status.h"
#include "dnn/cuda/dnn_handle.h"
#include "dnn/descriptors.h"
#include "dnn/primitive_descriptors.h"

namespace kiln {
namespace dnn {

absl::Status SoftmaxForward(Handle& handle, const SoftmaxDescriptor& softmax, float alpha,
                            const TensorDescriptor& xd, const void* x, float beta,
                            const TensorDescriptor& yd, void* y);
absl::Status SoftmaxBackward(Handle& handle, const SoftmaxDescriptor& softmax, float alpha,
                             const TensorDescriptor& yd, const void* y, const TensorDescriptor& dyd,
                             const void* dy, float beta, const TensorDescriptor& dxd, void* dx);

// SoftmaxWithLoss: writes prob (softmax over loss.axis) and the normalized loss, one f32 in
// device memory. Labels are class numbers stored in any float dtype, laid out as x with the class
// dim 1. The kernel cannot return a status: a label outside [0, C) that is not the ignore label
// makes the loss NaN (and backward that position's gradient NaN), never a wrong finite number.
absl::Status SoftmaxLossForward(Handle& handle, const SoftmaxLossDescriptor& loss,
                                const TensorDescriptor& xd, const void* x,
                                const TensorDescriptor& labeld, const void* labels,
                                const TensorDescriptor& probd, void* prob, void* loss_value);
// dx = alpha loss_weight / normalizer (prob - onehot) + beta dx; the workspace holds one f32.
constexpr size_t kSoftmaxLossWorkspaceBytes = 256;
absl::Status SoftmaxLossBackward(Handle& handle, const SoftmaxLossDescriptor& loss,
                                 const TensorDescriptor& probd, const void* prob,
                                 const TensorDescriptor& labeld, const void* labels, float alpha,
                                 float beta, const TensorDescriptor& dxd, void* dx, void* workspace,
                                 size_t workspace_bytes);

}  // namespace dnn
}  // namespace kiln

#endif  // KILN_DNN_CUDA_SOFTMAX_H_
