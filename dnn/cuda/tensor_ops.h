// Tensor operations on the GPU, any strides, f32/f16/bf16 (converting between them where a call
// has two dtypes): layout transform (NCHW <-> NHWC or any stride to any stride), add with
// broadcasting (bias), scale, the sum-to-broadcast-shape that is their gradient (bias gradients),
// Caffe's Eltwise (sum with coefficients, product, max) and Concat/Slice along any axis.
#ifndef KILN_DNN_CUDA_TENSOR_OPS_H_
#define KILN_DNN_CUDA_TENSOR_OPS_H_

#include <cstddef>
#include <vector>

#include "absl/status/status.h"
#include "dnn/cuda/dnn_handle.h"
#include "dnn/descriptors.h"
#include "dnn/primitive_descriptors.h"

namespace kiln {
namespace dnn {

// y = alpha x + beta y; x and y have the same dims, any strides and dtypes.
absl::Status TransformTensor(Handle& handle, float alpha, const TensorDescriptor& xd, const void* x,
                             float beta, const TensorDescriptor& yd, void* y);
// y = alpha b + beta y with b broadcast (each of b's dims is 1 or y's).
absl::Status AddTensor(Handle& handle, float alpha, const TensorDescriptor& bd, const void* b,
                       float beta, const TensorDescriptor& yd, void* y);
// y = alpha y.
absl::Status ScaleTensor(Handle& handle, const TensorDescriptor& yd, void* y, float alpha);
// db = alpha Σ dy over the dims where db has 1 + beta db (db f32). Deterministic.
size_t ReduceTensorSumWorkspaceSize(const TensorDescriptor& dyd, const TensorDescriptor& dbd);
absl::Status ReduceTensorSum(Handle& handle, float alpha, const TensorDescriptor& dyd,
                             const void* dy, float beta, const TensorDescriptor& dbd, void* db,
                             void* workspace, size_t workspace_bytes);
// db = alpha Σ a b over the dims where db has 1 + beta db (a and b of one shape and dtype, db
// f32): a scale parameter's gradient Σ x dy in one pass, with no product tensor. Deterministic.
size_t ReduceTensorDotWorkspaceSize(const TensorDescriptor& ad, const TensorDescriptor& dbd);
absl::Status ReduceTensorDot(Handle& handle, float alpha, const TensorDescriptor& ad, const void* a,
                             const TensorDescriptor& bd, const void* b, float beta,
                             const TensorDescriptor& dbd, void* db, void* workspace,
                             size_t workspace_bytes);

// Eltwise over 1..8 inputs of y's shape; coefficients only for kSum (empty: all 1). With
// `then_activation`, the activation is applied to the result before the blend (a residual sum
// and its ReLU in one pass).
absl::Status EltwiseForward(Handle& handle, EltwiseOp op, const std::vector<double>& coefficients,
                            float alpha, const std::vector<TensorDescriptor>& xds,
                            const std::vector<const void*>& xs, float beta,
                            const TensorDescriptor& yd, void* y,
                            const ActivationDescriptor* then_activation = nullptr);
// The gradient of input `which` (the max gradient goes to the first input holding the maximum).
absl::Status EltwiseBackward(Handle& handle, EltwiseOp op, const std::vector<double>& coefficients,
                             int which, float alpha, const std::vector<TensorDescriptor>& xds,
                             const std::vector<const void*>& xs, const TensorDescriptor& dyd,
                             const void* dy, float beta, const TensorDescriptor& dxd, void* dx);

// Concat forward: the parts side by side along `axis` in y. Its backward is SliceForward of dy.
absl::Status ConcatForward(Handle& handle, int axis, const std::vector<TensorDescriptor>& parts,
                           const std::vector<const void*>& part_data, const TensorDescriptor& yd,
                           void* y);
// Slice forward: x cut along `axis` into the parts (their dims say where). Its backward is
// ConcatForward of the part gradients.
absl::Status SliceForward(Handle& handle, int axis, const TensorDescriptor& xd, const void* x,
                          const std::vector<TensorDescriptor>& parts,
                          const std::vector<void*>& part_data);

}  // namespace dnn
}  // namespace kiln

#endif  // KILN_DNN_CUDA_TENSOR_OPS_H_
