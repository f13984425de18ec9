// Element-wise primitives on the GPU: activations, PReLU and dropout, forward and backward, any
// strides, f32/f16/bf16 storage with f32 math. Every call blends out = alpha op + beta out (out is
// not read when beta == 0) and validates exactly as the CPU reference (primitive_reference.h).
#ifndef KILN_DNN_CUDA_ACTIVATION_H_
#define KILN_DNN_CUDA_ACTIVATION_H_

#include <cstddef>
#include <vector>

#include "absl/status/status.h"
#include "dnn/cuda/dnn_handle.h"
#include "dnn/descriptors.h"
#include "dnn/primitive_descriptors.h"

namespace kiln {
namespace dnn {

absl::Status ActivationForward(Handle& handle, const ActivationDescriptor& act, float alpha,
                               const TensorDescriptor& xd, const void* x, float beta,
                               const TensorDescriptor& yd, void* y);
// dx from y, dy and x (as cuDNN; each activation uses the ones its formula needs).
absl::Status ActivationBackward(Handle& handle, const ActivationDescriptor& act, float alpha,
                                const TensorDescriptor& yd, const void* y,
                                const TensorDescriptor& dyd, const void* dy,
                                const TensorDescriptor& xd, const void* x, float beta,
                                const TensorDescriptor& dxd, void* dx);
// The same with dy the sum of dys[0..k) (1 <= k <= 8, added in order in f32), in one pass: the
// backward of an activation whose output has several readers, whose gradients would otherwise be
// summed into a tensor first. `saved` stands for both y and x, so the activation must be one
// whose gradient reads them alike (ReLU with a slope >= 0, sigmoid, tanh, clipped ReLU, ELU)
// when saved is its output.
absl::Status ActivationBackwardOfSum(Handle& handle, const ActivationDescriptor& act, float alpha,
                                     const TensorDescriptor& sd, const void* saved,
                                     const std::vector<TensorDescriptor>& dyds,
                                     const std::vector<const void*>& dys, float beta,
                                     const TensorDescriptor& dxd, void* dx);

// PReLU with an f32 slope tensor broadcast onto x (per channel: dims 1, C, 1...; shared: all 1).
absl::Status PReluForward(Handle& handle, const TensorDescriptor& xd, const void* x,
                          const TensorDescriptor& slope_d, const void* slope, float alpha,
                          float beta, const TensorDescriptor& yd, void* y);
size_t PReluBackwardWorkspaceSize(const TensorDescriptor& xd, const TensorDescriptor& slope_d);
// dx blended with (alpha, beta); dslope = Σ dy x [x <= 0] with (alpha_param, beta_param).
absl::Status PReluBackward(Handle& handle, const TensorDescriptor& xd, const void* x,
                           const TensorDescriptor& dyd, const void* dy,
                           const TensorDescriptor& slope_d, const void* slope, float alpha,
                           float beta, const TensorDescriptor& dxd, void* dx, float alpha_param,
                           float beta_param, void* dslope, void* workspace, size_t workspace_bytes);

// Dropout with the counter-based mask of DropoutDescriptor. Backward is the same call on dy
// (the mask is regenerated from the seed, so nothing is stored between the two).
// `seed_offset`, when given, is one float in device memory added to the seed when the kernel
// runs (a training plan's per-iteration offset).
absl::Status DropoutForward(Handle& handle, const DropoutDescriptor& dropout, float alpha,
                            const TensorDescriptor& xd, const void* x, float beta,
                            const TensorDescriptor& yd, void* y,
                            const float* seed_offset = nullptr);
absl::Status DropoutBackward(Handle& handle, const DropoutDescriptor& dropout, float alpha,
                             const TensorDescriptor& dyd, const void* dy, float beta,
                             const TensorDescriptor& dxd, void* dx,
                             const float* seed_offset = nullptr);

}  // namespace dnn
}  // namespace kiln

#endif  // KILN_DNN_CUDA_ACTIVATION_H_
