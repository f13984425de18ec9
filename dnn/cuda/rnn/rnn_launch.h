// Plain C++ declarations of the CUDA kernels behind the RNN primitives (rnn.h): the per-step
// cell kernels (gates and state update in one pass, forward and backward) and the data movers
// around them. Each launcher enqueues on `stream` and returns the launch's cudaError_t as an int
// (0 is success).
#ifndef KILN_DNN_CUDA_RNN_RNN_LAUNCH_H_
#define KILN_DNN_CUDA_RNN_RNN_LAUNCH_H_

#include <cstdint>

#include "dnn/cuda/primitive_launch.h"

namespace kiln {
namespace cuda {

enum class RnnCellKind : int { kRelu, kTanh, kLstm, kGru };

// One time step of one (layer, direction) for every sequence of the batch. Step s of sequence n
// is active when s < length[n]; its time is s (forward) or length[n] - 1 - s (reverse). Buffers:
//   gates   f32 [T, N, gate_stride], time order: on entry W_ih x (the input projection without
//           bias), on return the activated gates (RNN: h'; LSTM: i f g o; GRU: r z n and hn)
//   rec     f32 [N, gates * H]: W_hh h_prev (the step's recurrent GEMM, no bias)
//   h_prev / h_next  [N, H] of `storage`: the states before and after the step
//   c_prev / c_next  f32 [N, H] (LSTM)
//   out     [T, N, out_stride] of `storage`, this direction's H columns at out_offset
// Inactive sequences carry their states and write zeros to out at time s.
struct RnnStepForward {
  RnnCellKind cell = RnnCellKind::kLstm;
  Storage storage = Storage::kF32;
  int64_t batch = 0, hidden = 0, step = 0, max_length = 0;
  bool reverse = false;
  int g_block = 2, o_block = 3;      // LSTM: the blocks of gates g and o (Caffe's order: 3, 2)
  const int32_t* lengths = nullptr;  // device, N values; null: every sequence max_length long
  const void* cont = nullptr;        // device [T, N] of `storage`, or null
  float* gates = nullptr;
  int64_t gate_stride = 0;
  const float* rec = nullptr;
  const void* b_ih = nullptr;  // [gates * H] of `storage`, or null
  const void* b_hh = nullptr;
  const void* h_prev = nullptr;
  void* h_next = nullptr;
  const float* c_prev = nullptr;
  float* c_next = nullptr;
  void* out = nullptr;
  int64_t out_stride = 0, out_offset = 0;
};
int LaunchRnnStepForward(const RnnStepForward& call, void* stream);

// The backward of one step, s going down from T - 1. dh_in f32 [N, H] is the gradient reaching
// h_next from later steps; the kernel adds the output's gradient dout [T, N, out_stride] (at
// out_offset), writes the pre-activation gradients to dgates [T, N, dgate_stride] (time order;
// GRU adds dn r as a fourth block, the gradient of b_hn) and, scaled by cont, to drec [N, gates *
// H] (the recurrent GEMM's input), updates dc (f32 [N, H], LSTM) in place to the previous cell
// state's gradient, and writes to dh_out the part of the previous h's gradient that does not go
// through W_hh (GRU's z h term; the carried gradient of an inactive step; zero otherwise).
struct RnnStepBackward {
  RnnCellKind cell = RnnCellKind::kLstm;
  Storage storage = Storage::kF32;
  int64_t batch = 0, hidden = 0, step = 0, max_length = 0;
  bool reverse = false;
  int g_block = 2, o_block = 3;
  const int32_t* lengths = nullptr;
  const void* cont = nullptr;
  const float* gates = nullptr;  // the forward's activated gates
  int64_t gate_stride = 0;
  const void* h_prev = nullptr;   // the forward's state before the step (GRU)
  const float* c_prev = nullptr;  // LSTM: cell states before and after the step
  const float* c_next = nullptr;
  const void* dout = nullptr;
  int64_t out_stride = 0, out_offset = 0;
  const float* dh_in = nullptr;
  float* dh_out = nullptr;
  float* dc = nullptr;
  void* dgates = nullptr;
  int64_t dgate_stride = 0;
  void* drec = nullptr;
};
int LaunchRnnStepBackward(const RnnStepBackward& call, void* stream);

// dst[b][a][f] = src[a][b][f]: sequence-major <-> batch-major, `bytes_per_row` bytes a row.
int LaunchRnnTranspose(const void* src, void* dst, int64_t a, int64_t b, int64_t bytes_per_row,
                       void* stream);
// Dropout in place over `count` elements of `storage`: element e kept (scaled by 1 / (1 - ratio))
// when DropoutKeep(seed, e, ratio).
int LaunchRnnDropout(void* data, Storage storage, int64_t count, uint64_t seed, float ratio,
                     void* stream);
// Converts `count` elements between storages (f32 <-> storage); a null src writes zeros.
int LaunchRnnConvert(const void* src, Storage src_storage, void* dst, Storage dst_storage,
                     int64_t count, void* stream);
// Fills `count` elements of `storage` with 1 (the ones vector of the bias-gradient GEMMs).
int LaunchRnnOnes(void* dst, Storage storage, int64_t count, void* stream);

}  // namespace cuda
}  // namespace kiln

#endif  // KILN_DNN_CUDA_RNN_RNN_LAUNCH_H_
