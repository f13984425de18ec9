// CTC loss on the GPU (cuDNN's cudnnCTCLoss, PyTorch's nn.CTCLoss): the operands, reductions and
// gradient conventions are those of dnn/ctc/ctc_loss.h, whose reference this matches.
// Activations and grad are device [T, N, C] arrays of in.dtype (f32, f16 or bf16; f32 math),
// losses a device f32 array of CtcLossOutputCount values; labels and lengths are on the host.
#ifndef KILN_DNN_CUDA_CTC_CTC_LOSS_H_
#define KILN_DNN_CUDA_CTC_CTC_LOSS_H_

#include <cstddef>

#include "absl/status/status.h"
#include "dnn/ctc/ctc_loss.h"
#include "dnn/cuda/dnn_handle.h"

namespace kiln {
namespace dnn {

// Enqueues the loss (and, when grad is not null, its gradient) on handle.stream(). `workspace`
// (device) holds at least CtcLossWorkspaceBytes(desc, in) bytes and must not be used by anything
// else until the stream has passed the call. The host arrays in `in` are copied into the
// workspace before this returns (from pageable memory, so the call cannot be captured into a
// CUDA graph). Deterministic: the same call gives the same bits.
// InvalidArgument for bad arguments (CheckCtcLoss, null activations or losses), ResourceExhausted
// for a small workspace, Internal for a CUDA error.
absl::Status CtcLoss(Handle& handle, const CtcLossDescriptor& desc, const CtcLossInputs& in,
                     const void* activations, float* losses, void* grad, void* workspace,
                     size_t workspace_bytes);

}  // namespace dnn
}  // namespace kiln

#endif  // KILN_DNN_CUDA_CTC_CTC_LOSS_H_
