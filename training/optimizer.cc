#include "training/optimizer.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace kiln {

int LearningRateSchedule::StepsPassed(int64_t iter) const {
  int passed = 0;
  while (passed < static_cast<int>(step_values.size()) && iter >= step_values[passed]) ++passed;
  return passed;
}

double LearningRateSchedule::At(int64_t iter) const {
  const double it = static_cast<double>(iter);
  switch (policy) {
    case LrPolicy::kFixed:
      return base_lr;
    case LrPolicy::kStep:
      return base_lr * std::pow(gamma, std::floor(it / static_cast<double>(step_size)));
    case LrPolicy::kExp:
      return base_lr * std::pow(gamma, it);
    case LrPolicy::kInv:
      return base_lr * std::pow(1.0 + gamma * it, -power);
    case LrPolicy::kMultiStep:
      return base_lr * std::pow(gamma, StepsPassed(iter));
    case LrPolicy::kPoly:
      return base_lr * std::pow(1.0 - it / static_cast<double>(max_iter), power);
    case LrPolicy::kSigmoid:
      return base_lr / (1.0 + std::exp(-gamma * (it - static_cast<double>(step_size))));
  }
  return base_lr;
}

absl::Status CheckOptimizerConfig(const OptimizerConfig& config) {
  const LearningRateSchedule& lr = config.learning_rate;
  if (!std::isfinite(lr.base_lr)) {
    return absl::InvalidArgumentError(absl::StrCat("optimizer: base_lr is ", lr.base_lr));
  }
  if ((lr.policy == LrPolicy::kStep || lr.policy == LrPolicy::kSigmoid) && lr.step_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer: this lr policy needs a step size > 0, got ", lr.step_size));
  }
  if (lr.policy == LrPolicy::kPoly && lr.max_iter <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer: the poly lr policy needs max_iter > 0, got ", lr.max_iter));
  }
  for (size_t i = 1; i < lr.step_values.size(); ++i) {
    if (lr.step_values[i] <= lr.step_values[i - 1]) {
      return absl::InvalidArgumentError("optimizer: step values must increase");
    }
  }
  if (config.iter_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer: iter_size must be >= 1, got ", config.iter_size));
  }
  if (config.average_loss < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer: average_loss must be >= 1, got ", config.average_loss));
  }
  return absl::OkStatus();
}

}  // namespace kiln
