// The graph op's own CUDA kernels around the CTC primitive's launcher (kernels/cuda/ctc_kernels.cu,
// used by kernels/cuda/ctc_kernels.cc). The primitive's API builds its per-sample records and
// label tables on the host from host arrays; a graph op's labels and lengths are device tensors
// and a captured plan may not copy them back, so these build the same records and tables on the
// device, in a padded layout fixed at plan time (sample n's tables at n L, its alpha and beta at
// n T (2 L + 1)), and validate every value there. Each launcher returns the launch's
// cudaError_t as an int (0 is success).
#ifndef KILN_KERNELS_CUDA_CTC_LAUNCH_H_
#define KILN_KERNELS_CUDA_CTC_LAUNCH_H_

#include <cstdint>

#include "dnn/cuda/ctc/ctc_loss_launch.h"

namespace kiln {
namespace cuda {

struct CtcGraphTables {
  const float* labels = nullptr;         // [N, L], padded: row n's first label_length values
  const float* input_lengths = nullptr;  // [N]
  const float* label_lengths = nullptr;  // [N]
  int64_t max_time = 0, batch = 0, classes = 0, padded_length = 0;  // T, N, C, L
  int32_t blank = 0;
  int reduction = kCtcReduceMean;  // kCtcReduceSum or kCtcReduceMean
  float grad_scale = 1.0f;         // the loss weight
  // Written: N records, 5 N L int32 (labels, sorted positions, distinct classes, their begin
  // and end, each region N L long), and N flags (1: the sample's values were refused, and its
  // record was made empty so the primitive reads nothing out of range).
  CtcSample* samples = nullptr;
  int32_t* tables = nullptr;
  int32_t* invalid = nullptr;
};

// Fills the records, tables and flags: a block per sample. A sample is refused when a length
// is not an integer in [0, T] (input) or [0, L] (label), or one of its labels is not an integer
// in [0, C) or is the blank.
int LaunchCtcGraphTables(const CtcGraphTables& t, void* stream);

// After LaunchCtcLoss: when `loss_out` is set, writes the f32 `loss` there in `loss_type`, NaN
// when any sample was refused; when `grad` is set ([T, N, C] of `grad_type`), fills the rows of
// refused samples with NaN.
int LaunchCtcGraphFinish(const float* loss, const int32_t* invalid, int64_t max_time, int64_t batch,
                         int64_t classes, void* loss_out, Storage loss_type, void* grad,
                         Storage grad_type, void* stream);

}  // namespace cuda
}  // namespace kiln

#endif  // KILN_KERNELS_CUDA_CTC_LAUNCH_H_
