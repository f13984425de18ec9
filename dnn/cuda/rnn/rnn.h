// The RNN primitives on the GPU, cuDNN-style: forward (inference or training), backward data and
// backward weights of a stack of RNN / LSTM / GRU layers (dnn/rnn/rnn_descriptor.h says the
// equations, the layouts and the weight order). x, y, states and weights share one dtype (f32,
// f16 or bf16); arithmetic is f32, with f32 inputs on TF32 tensor cores when `math` is kTf32.
//
// How it runs: per layer and direction, the input projection of every time step is one GEMM
// (W_ih x for all T x N rows); then each step is one GEMM of the previous h by W_hh and one
// fused kernel that adds the biases, applies the gates and updates h and c (and writes y).
// Backward runs the steps in reverse with the same split, then forms dx, dW_ih, dW_hh and the
// bias gradients as whole-sequence GEMMs over the saved gate gradients.
//
// Buffers: `workspace` is scratch for one call; `reserve` (training) carries what backward needs
// from the forward to the two backward calls, which must receive the same reserve, inputs and
// weights. Ragged lengths are copied to the device inside the call (through the workspace).
#ifndef KILN_DNN_CUDA_RNN_RNN_H_
#define KILN_DNN_CUDA_RNN_RNN_H_

#include <cstddef>

#include "absl/status/statusor.h"
#include "base/dtype.h"
#include "dnn/cuda/dnn_handle.h"
#include "dnn/descriptors.h"
#include "dnn/rnn/rnn_descriptor.h"

namespace kiln {
namespace dnn {

// One call's problem: the stack, the data type and math, and the input and output sequences.
struct RnnProblem {
  RnnDescriptor rnn;
  DataType dtype = DataType::kF32;
  MathMode math = MathMode::kFp32;
  RnnSequences x, y;
};

struct RnnBufferSizes {
  size_t workspace = 0;  // bytes, any call on this problem
  size_t reserve = 0;    // bytes, training forward and the backward calls
};
// InvalidArgument for an inconsistent problem (CheckRnnCall) or a dtype other than f32, f16,
// bf16.
absl::StatusOr<RnnBufferSizes> RnnGetBufferSizes(const RnnProblem& problem);

// One (layer, direction)'s parameters at addresses of their own (a graph's separate weight
// tensors) instead of at RnnLayerWeights' offsets in the packed w; the biases as the bias mode
// has them. RnnLayerGrads is the same for the gradients.
struct RnnLayerParams {
  const void* w_ih = nullptr;
  const void* w_hh = nullptr;
  const void* b_ih = nullptr;
  const void* b_hh = nullptr;
};
struct RnnLayerGrads {
  void* w_ih = nullptr;
  void* w_hh = nullptr;
  void* b_ih = nullptr;
  void* b_hh = nullptr;
};

// The device tensors of one call. Null hx / cx are zero states; null hy / cy, dhx / dcx are not
// written; null dhy / dcy are zero; cont ([T, N] of the dtype, unidirectional only) may be null.
struct RnnTensors {
  const void* x = nullptr;
  void* y = nullptr;
  const void* hx = nullptr;
  const void* cx = nullptr;
  void* hy = nullptr;
  void* cy = nullptr;
  const void* w = nullptr;
  const RnnLayerParams* params = nullptr;  // layers * directions entries, used instead of w
  const void* cont = nullptr;              // [T, N] of the problem's dtype
  // Backward.
  const void* dy = nullptr;
  const void* dhy = nullptr;
  const void* dcy = nullptr;
  void* dx = nullptr;
  void* dhx = nullptr;
  void* dcx = nullptr;
  void* dw = nullptr;
  const RnnLayerGrads* grads = nullptr;  // layers * directions entries, used instead of dw
  // Scratch.
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  void* reserve = nullptr;
  size_t reserve_bytes = 0;
};

enum class RnnForwardMode { kInference, kTraining };

// y, hy, cy from x, hx, cx, w (cont). Training also applies the dropout between layers and fills
// the reserve.
absl::Status RnnForward(Handle& handle, const RnnProblem& problem, RnnForwardMode mode,
                        const RnnTensors& t);
// dx, dhx, dcx from dy, dhy, dcy, after a training forward with the same tensors (reads w,
// cont and the reserve, which it extends with the gate gradients).
absl::Status RnnBackwardData(Handle& handle, const RnnProblem& problem, const RnnTensors& t);
// dw += the weights' gradient (cuDNN's add mode), after RnnBackwardData (reads x, hx and the
// reserve).
absl::Status RnnBackwardWeights(Handle& handle, const RnnProblem& problem, const RnnTensors& t);

}  // namespace dnn
}  // namespace kiln

#endif  // KILN_DNN_CUDA_RNN_RNN_H_
