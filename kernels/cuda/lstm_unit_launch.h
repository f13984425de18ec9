// The CUDA kernels of LSTMUnit and LSTMUnitGradient (kernels/cuda/lstm_unit_kernels.cc; the op:
// ops/lstm_unit_ops.cc). Packed tensors: c_prev, c, h [rows, width], x [rows, 4 width] (gates i,
// f, o, g), cont [rows]. Data are f32, f16 or bf16 (`storage`), cont any of them on its own
// (`cont_storage`); arithmetic is f32. Each launcher returns the launch's cudaError_t as an int
// (0 is success).
#ifndef KILN_KERNELS_CUDA_LSTM_UNIT_LAUNCH_H_
#define KILN_KERNELS_CUDA_LSTM_UNIT_LAUNCH_H_

#include <cstdint>

#include "dnn/cuda/primitive_launch.h"

namespace kiln {
namespace cuda {

struct LstmUnitLaunch {
  int64_t rows = 0, width = 0;
  Storage storage = Storage::kF32;
  Storage cont_storage = Storage::kF32;
  const void* c_prev = nullptr;
  const void* x = nullptr;
  const void* cont = nullptr;
  // Forward outputs.
  void* c = nullptr;
  void* h = nullptr;
  // Backward: the output gradients (either may be null: no gradient reached that output) and
  // the input gradients.
  const void* dc = nullptr;
  const void* dh = nullptr;
  void* dc_prev = nullptr;
  void* dx = nullptr;
};

// c = f c_prev + i g with f = cont sigmoid(x_f) (exactly 0 where cont is 0), h = o tanh(c).
int LaunchLstmUnitForward(const LstmUnitLaunch& p, void* stream);
// dc_prev and dx from dc and/or dh, the gates recomputed from x.
int LaunchLstmUnitBackward(const LstmUnitLaunch& p, void* stream);

}  // namespace cuda
}  // namespace kiln

#endif  // KILN_KERNELS_CUDA_LSTM_UNIT_LAUNCH_H_
