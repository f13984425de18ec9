// Caffe's solver update rules on the GPU: the same contract as the host reference
// (kernels/dnn/solver_update.h), one fused element-wise kernel per call, so a parameter's
// gradient scaling, regularization, history update, update value and weight step cost one pass
// over its buffers instead of Caffe's chain of BLAS-like calls. The kernel keeps the host's f32
// order of operations and never contracts a multiply and an add into an FMA, so both agree to
// the last bit on IEEE hardware (the test allows a few ulps).
#ifndef KILN_DNN_CUDA_SOLVER_UPDATE_H_
#define KILN_DNN_CUDA_SOLVER_UPDATE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "dnn/solver_update.h"

namespace kiln {
namespace dnn {

// Device version of SolverUpdateHost: param, grad, history and history2 are device pointers
// (history2 may be null unless HistoryCount(step.type) == 2), enqueued on `stream` (a
// cudaStream_t; null is the legacy default stream). Hyper-parameters and buffers are checked as
// on the host (CheckSolverUpdateCall) before anything is launched; a launch failure is Internal
// naming the call and CUDA's message. Never allocates, copies or synchronizes, so it can be
// captured in a CUDA graph. Any alignment works; 16-byte aligned buffers (or buffers that share
// one misalignment) take the float4 path.
absl::Status SolverUpdateCuda(const SolverStep& step, int64_t count, float* param, float* grad,
                              float* history, float* history2, void* stream /*cudaStream_t*/);

// Adds Σ x² (double) of `count` floats into *device_sum (device memory, caller zeroes it), so
// the trainer can accumulate clip_gradients' global norm over every parameter blob with one
// zeroing and one copy back. Each block's partial sum is reproducible; the blocks' partials are
// combined with a double atomicAdd, whose order can move the total by a few double ulps
// (~1e-16 relative), far below the f32 precision of the clip factor derived from it.
absl::Status SumOfSquaresCuda(int64_t count, const float* x, double* device_sum, void* stream);

}  // namespace dnn
}  // namespace kiln

#endif  // KILN_DNN_CUDA_SOLVER_UPDATE_H_
