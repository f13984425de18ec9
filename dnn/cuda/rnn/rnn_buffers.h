// Where the RNN primitives keep their intermediate tensors (internal to rnn.cc): byte offsets
// into the reserve (what backward needs from a training forward) and the workspace (one call's
// scratch). The reserve puts the forward's tensors first, so an inference forward can keep
// them in the workspace after its own scratch.
#ifndef KILN_DNN_CUDA_RNN_RNN_BUFFERS_H_
#define KILN_DNN_CUDA_RNN_RNN_BUFFERS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "dnn/cuda/rnn/rnn.h"

namespace kiln {
namespace dnn {

constexpr size_t kRnnNoBuffer = ~size_t{0};

// One (layer, direction)'s tensors in the reserve.
struct RnnCellBuffers {
  size_t gates = 0;     // f32 [T, N, gate_stride], time order
  size_t h_states = 0;  // dtype [T + 1, N, H], step order (h_states[0] = the initial state)
  size_t c_states = kRnnNoBuffer;  // LSTM: f32 [T + 1, N, H], step order
  size_t dgates = 0;               // dtype [T, N, dgate_stride], time order (backward)
  size_t drec = 0;                 // dtype [T, N, gates * H], step order (backward)
};

struct RnnBufferPlan {
  int64_t gate_stride = 0;   // gates * H, or 4 H for GRU (r, z, n and hn)
  int64_t dgate_stride = 0;  // the same widths for the gate gradients (GRU: dn r fourth)
  // Reserve.
  size_t x_seq = kRnnNoBuffer;        // batch-major x, transposed to sequence-major
  std::vector<size_t> layer_out;      // layers 0..L-2: dtype [T, N, D H], after dropout
  std::vector<RnnCellBuffers> cells;  // index layer * D + direction
  size_t reserve_forward = 0;         // bytes of the forward's part
  size_t reserve = 0;
  // Workspace.
  size_t lengths = kRnnNoBuffer;  // int32 [N]
  size_t rec = 0;                 // f32 [N, gates * H]: W_hh h of one step
  size_t y_seq = kRnnNoBuffer;    // batch-major: the last layer's output, sequence-major
  size_t dy_seq = kRnnNoBuffer;   // batch-major: dy transposed
  size_t dx_seq = kRnnNoBuffer;   // batch-major: dx before its transpose
  size_t din[2] = {0, 0};         // dtype [T, N, max(D H, I)]: a layer's input gradient
  size_t dh[2] = {0, 0};          // f32 [N, H]: the h gradient going back a step
  size_t dc = 0;                  // f32 [N, H]
  size_t ones = 0;                // dtype [T N]: ones for the bias-gradient GEMMs
  size_t scratch = 0;             // bytes of the above
  size_t workspace = 0;           // scratch + the reserve's forward part (inference)
};

absl::StatusOr<RnnBufferPlan> PlanRnnBuffers(const RnnProblem& problem);

}  // namespace dnn
}  // namespace kiln

#endif  // KILN_DNN_CUDA_RNN_RNN_BUFFERS_H_
