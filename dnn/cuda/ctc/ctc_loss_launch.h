// Plain C++ declarations of the CTC loss kernels' launcher (ctc_loss_kernels.cu). The primitive
// API (ctc_loss.h) validates a call, builds the per-sample tables on the host, copies them into
// the workspace and fills a CtcCall; the launcher enqueues every kernel on `stream` and returns
// the first launch's cudaError_t as an int (0 is success).
#ifndef KILN_DNN_CUDA_CTC_CTC_LOSS_LAUNCH_H_
#define KILN_DNN_CUDA_CTC_CTC_LOSS_LAUNCH_H_

#include <cstdint>

#include "dnn/cuda/primitive_launch.h"

namespace kiln {
namespace cuda {

// One sample's record in the workspace (kCtcSampleRecordBytes in dnn/ctc/ctc_loss.h).
struct CtcSample {
  int64_t ab_offset = 0;     // its alpha and beta, input_length x (2 L + 1) floats from here
  int32_t label_offset = 0;  // its labels and sorted positions in the tables
  int32_t label_length = 0;
  int32_t input_length = 0;
  int32_t unique_offset = 0;  // its distinct classes in the tables
  int32_t unique_count = 0;
  float grad_scale = 0;  // the gradient's multiplier (reduction and grad_scale)
};
static_assert(sizeof(CtcSample) == 32, "CtcSample must match kCtcSampleRecordBytes");

// The reductions, numbered as dnn::CtcReduction.
constexpr int kCtcReduceNone = 0, kCtcReduceSum = 1, kCtcReduceMean = 2;

struct CtcCall {
  Storage type = Storage::kF32;  // activations and grad
  int64_t max_time = 0, batch = 0, classes = 0;
  int32_t blank = 0;
  bool log_probs = false;  // activations are log-probabilities: no log_softmax
  bool zero_infinity = false;
  int reduction = kCtcReduceNone;
  int32_t max_states = 1;  // max over samples of 2 L + 1
  int32_t max_unique = 0;  // max over samples of the distinct classes in its label

  const void* activations = nullptr;  // [T, N, C]
  void* grad = nullptr;               // [T, N, C], or nullptr
  float* losses = nullptr;            // N or 1 values

  // Workspace (see dnn/ctc/ctc_loss.h, CtcWorkspaceLayout).
  const CtcSample* samples = nullptr;
  const int32_t* labels = nullptr;        // concatenated, at label_offset
  const int32_t* sorted_pos = nullptr;    // label positions sorted by class, at label_offset
  const int32_t* unique_class = nullptr;  // ascending distinct classes, at unique_offset
  const int32_t* unique_begin = nullptr;  // their [begin, end) in sorted_pos (sample-relative)
  const int32_t* unique_end = nullptr;
  float* lse = nullptr;  // [T, N] (logit inputs)
  float* alpha = nullptr;
  float* beta = nullptr;
  double* sample_loss = nullptr;  // [N]
};

int LaunchCtcLoss(const CtcCall& call, void* stream);

}  // namespace cuda
}  // namespace kiln

#endif  // KILN_DNN_CUDA_CTC_CTC_LOSS_LAUNCH_H_
