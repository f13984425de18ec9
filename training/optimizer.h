// How a trainer updates its parameters, as plain values: the update rule (Caffe's six solvers,
// dnn/solver_update.h), the learning-rate schedule (Caffe's lr policies), regularization,
// gradient clipping and accumulation. A builder-made graph is trained with these directly; the
// Caffe frontend fills them from a solver file (frontends/caffe/solver.h).
#ifndef KILN_TRAINING_OPTIMIZER_H_
#define KILN_TRAINING_OPTIMIZER_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "dnn/solver_update.h"

namespace kiln {

// Caffe's lr_policy values.
enum class LrPolicy { kFixed, kStep, kExp, kInv, kMultiStep, kPoly, kSigmoid };

// The learning rate as a function of the 0-based iteration, with Caffe's formulas.
struct LearningRateSchedule {
  LrPolicy policy = LrPolicy::kFixed;
  double base_lr = 0.01;
  double gamma = 0;
  double power = 0;
  int64_t step_size = 0;             // kStep, kSigmoid
  std::vector<int64_t> step_values;  // kMultiStep: ascending iterations
  int64_t max_iter = 0;              // kPoly
  double At(int64_t iter) const;
  // How many of step_values `iter` has passed (a .solverstate's current_step).
  int StepsPassed(int64_t iter) const;
};

struct OptimizerConfig {
  dnn::SolverType type = dnn::SolverType::kSgd;
  LearningRateSchedule learning_rate;
  double momentum = 0;       // SGD/Nesterov momentum, AdaDelta's decay, Adam's beta1
  double momentum2 = 0.999;  // Adam's beta2
  double delta = 1e-8;       // AdaGrad/RMSProp/AdaDelta/Adam epsilon
  double rms_decay = 0.99;   // RMSProp
  double weight_decay = 0;
  dnn::Regularization regularization = dnn::Regularization::kL2;
  // Gradients are scaled down so their global L2 norm is at most this; <= 0: no clipping.
  double clip_gradients = -1;
  // Passes whose gradients are summed before one update (a larger effective batch).
  int iter_size = 1;
  // The trainer's smoothed loss averages this many iterations.
  int average_loss = 1;
};

// InvalidArgument naming the field when the config cannot train (a schedule that needs a
// step size or max_iter without one, iter_size < 1, ...). The update rule's own limits are
// checked by dnn::CheckSolverStep when the first update runs.
absl::Status CheckOptimizerConfig(const OptimizerConfig& config);

}  // namespace kiln

#endif  // KILN_TRAINING_OPTIMIZER_H_
