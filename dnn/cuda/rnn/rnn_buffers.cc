#include "dnn/cuda/rnn/rnn_buffers.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace kiln {
namespace dnn {

namespace {

// Hands out 256-byte aligned ranges of one buffer.
class Carver {
 public:
  size_t Take(int64_t elements, size_t element_bytes) {
    const size_t at = used_;
    used_ += (static_cast<size_t>(elements) * element_bytes + 255) / 256 * 256;
    return at;
  }
  size_t used() const { return used_; }

 private:
  size_t used_ = 0;
};

}  // namespace

absl::StatusOr<RnnBufferPlan> PlanRnnBuffers(const RnnProblem& p) {
  const char* where = "RNN buffers";
  KILN_RETURN_IF_ERROR(CheckRnnCall(p.rnn, p.x, p.y, /*has_cont=*/false, where));
  if (p.dtype != DataType::kF32 && p.dtype != DataType::kF16 && p.dtype != DataType::kBF16) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": dtype ", DataTypeName(p.dtype), " (use f32, f16 or bf16)"));
  }
  const int64_t T = p.x.max_length, N = p.x.batch, H = p.rnn.hidden_size;
  const int64_t D = p.rnn.directions(), G = p.rnn.gates(), L = p.rnn.layers;
  const size_t e = DataTypeSize(p.dtype);
  const bool lstm = p.rnn.cell == RnnCell::kLstm, gru = p.rnn.cell == RnnCell::kGru;
  const bool batch_major = p.x.layout == RnnLayout::kBatchMajor;
  RnnBufferPlan plan;
  plan.gate_stride = gru ? 4 * H : G * H;
  plan.dgate_stride = plan.gate_stride;

  Carver reserve;
  if (batch_major) plan.x_seq = reserve.Take(T * N * p.x.features, e);
  for (int64_t l = 0; l + 1 < L; ++l) plan.layer_out.push_back(reserve.Take(T * N * D * H, e));
  plan.cells.resize(L * D);
  for (RnnCellBuffers& c : plan.cells) {
    c.gates = reserve.Take(T * N * plan.gate_stride, 4);
    c.h_states = reserve.Take((T + 1) * N * H, e);
    if (lstm) c.c_states = reserve.Take((T + 1) * N * H, 4);
  }
  plan.reserve_forward = reserve.used();
  for (RnnCellBuffers& c : plan.cells) {
    c.dgates = reserve.Take(T * N * plan.dgate_stride, e);
    c.drec = reserve.Take(T * N * G * H, e);
  }
  plan.reserve = reserve.used();

  Carver ws;
  if (!p.x.lengths.empty()) plan.lengths = ws.Take(N, 4);
  plan.rec = ws.Take(N * G * H, 4);
  if (batch_major) {
    plan.y_seq = ws.Take(T * N * D * H, e);
    plan.dy_seq = ws.Take(T * N * D * H, e);
    plan.dx_seq = ws.Take(T * N * p.x.features, e);
  }
  const int64_t widest = std::max(D * H, p.x.features);
  plan.din[0] = ws.Take(T * N * widest, e);
  plan.din[1] = ws.Take(T * N * widest, e);
  plan.dh[0] = ws.Take(N * H, 4);
  plan.dh[1] = ws.Take(N * H, 4);
  plan.dc = ws.Take(N * H, 4);
  plan.ones = ws.Take(T * N, e);
  plan.scratch = ws.used();
  plan.workspace = plan.scratch + plan.reserve_forward;
  return plan;
}

}  // namespace dnn
}  // namespace kiln
