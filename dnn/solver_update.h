// Caffe's solver update rules (SGD, Nesterov, AdaGrad, RMSProp, AdaDelta, Adam) as primitives
// over one parameter blob: what Caffe's SGDSolver::ApplyUpdate does to one learnable blob at one
// iteration, from the scaled gradient to the new weights. The host version here is the reference
// (plain C++, f32 arithmetic in Caffe's order of operations); kernels/cuda/solver_update.h is the
// GPU version with the same contract. The formulas are Caffe's (src/caffe/solvers/*.cpp).
#ifndef KILN_DNN_SOLVER_UPDATE_H_
#define KILN_DNN_SOLVER_UPDATE_H_

#include <cstdint>

#include "absl/status/status.h"

namespace kiln {
namespace dnn {

// The update rule, named as in Caffe's SolverParameter.type.
enum class SolverType { kSgd, kNesterov, kAdaGrad, kRmsProp, kAdaDelta, kAdam };

// Caffe's regularization_type: "L2" adds decay * w to the gradient, "L1" adds decay * sign(w).
enum class Regularization { kNone, kL2, kL1 };

// Everything one parameter blob's update needs at one iteration (Caffe's ApplyUpdate for one
// blob). The trainer fills it from the SolverParameter, the learning-rate schedule and the
// parameter's lr_mult/decay_mult, so the primitive itself knows nothing about nets or schedules.
struct SolverStep {
  SolverType type = SolverType::kSgd;
  double local_rate = 0;     // base lr at this iteration * lr_mult
  double momentum = 0;       // SGD/Nesterov momentum, AdaDelta's decay, Adam's beta1
  double momentum2 = 0.999;  // Adam's beta2
  double delta = 1e-8;       // AdaGrad/RMSProp/AdaDelta/Adam epsilon
  double rms_decay = 0.99;   // RMSProp
  Regularization regularization = Regularization::kL2;
  double local_decay = 0;  // weight_decay * decay_mult (0: no regularization, as in Caffe)
  double grad_scale = 1;   // applied to the gradient first (1/iter_size, the clip_gradients factor)
  int64_t iter = 0;        // 0-based iteration (Adam's bias correction uses t = iter + 1)
};

// A readable name ("SGD", "Nesterov", "AdaGrad", "RMSProp", "AdaDelta", "Adam": Caffe's spelling
// of SolverParameter.type) for error messages and logs.
const char* SolverTypeName(SolverType type);

// Number of history buffers the solver keeps per parameter (1, or 2 for AdaDelta and Adam).
// Caffe stores the second histories of all parameters after all the first ones (see
// proto/solver_state.h), which is why the trainer needs this count up front.
int HistoryCount(SolverType type);

// Checks the hyper-parameters of `step` without touching any data, so the host and CUDA versions
// refuse the same things with the same message: InvalidArgument naming the field and the solver
// ("SolverUpdate (Adam): momentum2 (beta2) must be in [0, 1), got 1"). Refused: non-finite
// values, a negative iteration, momentum with AdaGrad or RMSProp (Caffe refuses it too),
// rms_decay outside [0, 1), AdaDelta's decay and Adam's betas outside [0, 1), and delta <= 0 for
// the adaptive rules (it guards a division that is 0 / 0 on the first step otherwise).
absl::Status CheckSolverStep(const SolverStep& step);

// CheckSolverStep plus the buffers: count >= 0, param/grad/history not null when count > 0, and
// history2 not null when HistoryCount(step.type) == 2. Shared by the host and CUDA entry points.
absl::Status CheckSolverUpdateCall(const SolverStep& step, int64_t count, const float* param,
                                   const float* grad, const float* history, const float* history2);

// Host: updates param in place; grad is overwritten with the applied update value (as Caffe's
// diff after ComputeUpdateValue), so param_new = param_old - grad_new. history (and history2
// for AdaDelta/Adam) carry the solver's state between iterations; history2 may be null unless
// HistoryCount == 2 and is neither read nor written otherwise. All arithmetic is f32 in Caffe's
// order: scale, regularize, compute the update value, subtract. Status error for bad
// hyper-parameters (see CheckSolverStep) before anything is written.
absl::Status SolverUpdateHost(const SolverStep& step, int64_t count, float* param, float* grad,
                              float* history, float* history2);

// Σ x² in double (for clip_gradients' global norm: the trainer sums this over every learnable
// blob, takes the square root and derives grad_scale). Sequential, so it is reproducible.
double SumOfSquaresHost(int64_t count, const float* x);

}  // namespace dnn
}  // namespace kiln

#endif  // KILN_DNN_SOLVER_UPDATE_H_
