#include "dnn/solver_update.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace kiln {
namespace dnn {
namespace {

absl::Status Refuse(const SolverStep& step, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("SolverUpdate (", SolverTypeName(step.type), "): ", what));
}

// "<field> must be <rule>, got <value>".
absl::Status RefuseValue(const SolverStep& step, absl::string_view field, absl::string_view rule,
                         double value) {
  return Refuse(step, absl::StrCat(field, " must be ", rule, ", got ", value));
}

bool InUnitInterval(double v) { return v >= 0 && v < 1; }

// The regularized gradient of one element: Caffe's Normalize (and clip) scaling, then
// Regularize, both in f32. Caffe skips regularization entirely when the local decay is 0.
inline float RegularizedGradient(float g, float w, float scale, Regularization reg, float decay) {
  g *= scale;
  if (decay == 0.0f) return g;
  if (reg == Regularization::kL2) return decay * w + g;
  if (reg == Regularization::kL1) {
    const float sign = static_cast<float>((0.0f < w) - (w < 0.0f));  // caffe_cpu_sign: sign(0) = 0
    return decay * sign + g;
  }
  return g;
}

}  // namespace

const char* SolverTypeName(SolverType type) {
  switch (type) {
    case SolverType::kSgd:
      return "SGD";
    case SolverType::kNesterov:
      return "Nesterov";
    case SolverType::kAdaGrad:
      return "AdaGrad";
    case SolverType::kRmsProp:
      return "RMSProp";
    case SolverType::kAdaDelta:
      return "AdaDelta";
    case SolverType::kAdam:
      return "Adam";
  }
  return "unknown solver";
}

int HistoryCount(SolverType type) {
  return type == SolverType::kAdaDelta || type == SolverType::kAdam ? 2 : 1;
}

absl::Status CheckSolverStep(const SolverStep& step) {
  switch (step.type) {
    case SolverType::kSgd:
    case SolverType::kNesterov:
    case SolverType::kAdaGrad:
    case SolverType::kRmsProp:
    case SolverType::kAdaDelta:
    case SolverType::kAdam:
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("SolverUpdate: unknown solver type ", static_cast<int>(step.type)));
  }
  if (step.regularization != Regularization::kNone && step.regularization != Regularization::kL2 &&
      step.regularization != Regularization::kL1) {
    return Refuse(step,
                  absl::StrCat("unknown regularization ", static_cast<int>(step.regularization)));
  }
  const struct {
    const char* name;
    double value;
  } fields[] = {{"local_rate", step.local_rate}, {"momentum", step.momentum},
                {"momentum2", step.momentum2},   {"delta", step.delta},
                {"rms_decay", step.rms_decay},   {"local_decay", step.local_decay},
                {"grad_scale", step.grad_scale}};
  for (const auto& f : fields) {
    if (!std::isfinite(f.value)) return RefuseValue(step, f.name, "finite", f.value);
  }
  if (step.iter < 0) {
    return Refuse(step, absl::StrCat("iter must be >= 0, got ", step.iter));
  }
  const bool adaptive = step.type != SolverType::kSgd && step.type != SolverType::kNesterov;
  if (adaptive && !(step.delta > 0)) {
    return RefuseValue(step, "delta", "positive (it guards a division)", step.delta);
  }
  switch (step.type) {
    case SolverType::kAdaGrad:
    case SolverType::kRmsProp:
      // Caffe's constructors refuse momentum with these two rules.
      if (step.momentum != 0) {
        return RefuseValue(step, "momentum", "0 (Caffe does not use momentum with this solver)",
                           step.momentum);
      }
      if (step.type == SolverType::kRmsProp && !InUnitInterval(step.rms_decay)) {
        return RefuseValue(step, "rms_decay", "in [0, 1)", step.rms_decay);
      }
      break;
    case SolverType::kAdaDelta:
      if (!InUnitInterval(step.momentum)) {
        return RefuseValue(step, "momentum (the decay)", "in [0, 1)", step.momentum);
      }
      break;
    case SolverType::kAdam:
      if (!InUnitInterval(step.momentum)) {
        return RefuseValue(step, "momentum (beta1)", "in [0, 1)", step.momentum);
      }
      if (!InUnitInterval(step.momentum2)) {
        return RefuseValue(step, "momentum2 (beta2)", "in [0, 1)", step.momentum2);
      }
      break;
    default:
      break;
  }
  return absl::OkStatus();
}

absl::Status CheckSolverUpdateCall(const SolverStep& step, int64_t count, const float* param,
                                   const float* grad, const float* history, const float* history2) {
  if (absl::Status s = CheckSolverStep(step); !s.ok()) return s;
  if (count < 0) return Refuse(step, absl::StrCat("count must be >= 0, got ", count));
  if (count == 0) return absl::OkStatus();
  if (param == nullptr) return Refuse(step, "param is null");
  if (grad == nullptr) return Refuse(step, "grad is null");
  if (history == nullptr) return Refuse(step, "history is null");
  if (HistoryCount(step.type) == 2 && history2 == nullptr) {
    return Refuse(step, "history2 is null (this solver keeps two histories per parameter)");
  }
  return absl::OkStatus();
}

absl::Status SolverUpdateHost(const SolverStep& step, int64_t count, float* param, float* grad,
                              float* history, float* history2) {
  if (absl::Status s = CheckSolverUpdateCall(step, count, param, grad, history, history2);
      !s.ok()) {
    return s;
  }
  // Caffe holds every hyper-parameter as the blob's Dtype (f32) and derives 1 - momentum there.
  const float rate = static_cast<float>(step.local_rate);
  const float momentum = static_cast<float>(step.momentum);
  const float delta = static_cast<float>(step.delta);
  const float scale = static_cast<float>(step.grad_scale);
  const float decay = static_cast<float>(step.local_decay);
  const Regularization reg = step.regularization;
  float* h = history;
  float* h2 = history2;
  switch (step.type) {
    case SolverType::kSgd:
      // h = rate g + momentum h; the update is h.
      for (int64_t i = 0; i < count; ++i) {
        const float g = RegularizedGradient(grad[i], param[i], scale, reg, decay);
        h[i] = rate * g + momentum * h[i];
        grad[i] = h[i];
      }
      break;
    case SolverType::kNesterov:
      // The update looks ahead: (1 + momentum) h_new - momentum h_old.
      for (int64_t i = 0; i < count; ++i) {
        const float g = RegularizedGradient(grad[i], param[i], scale, reg, decay);
        const float previous = h[i];
        h[i] = rate * g + momentum * h[i];
        grad[i] = (1.0f + momentum) * h[i] + (-momentum) * previous;
      }
      break;
    case SolverType::kAdaGrad:
      // h accumulates g²; the update is rate g / (sqrt(h) + delta).
      for (int64_t i = 0; i < count; ++i) {
        const float g = RegularizedGradient(grad[i], param[i], scale, reg, decay);
        h[i] = g * g + h[i];
        grad[i] = rate * (g / (std::sqrt(h[i]) + delta));
      }
      break;
    case SolverType::kRmsProp: {
      const float rms_decay = static_cast<float>(step.rms_decay);
      const float keep = 1.0f - rms_decay;
      for (int64_t i = 0; i < count; ++i) {
        const float g = RegularizedGradient(grad[i], param[i], scale, reg, decay);
        h[i] = keep * (g * g) + rms_decay * h[i];
        grad[i] = rate * (g / (std::sqrt(h[i]) + delta));
      }
      break;
    }
    case SolverType::kAdaDelta: {
      // h = E[g²], h2 = E[update²]; the update is g sqrt((h2 + delta) / (h + delta)) with h
      // already refreshed and h2 not yet, h2 learns the update before the rate scales it.
      const float keep = 1.0f - momentum;
      for (int64_t i = 0; i < count; ++i) {
        const float g = RegularizedGradient(grad[i], param[i], scale, reg, decay);
        h[i] = keep * (g * g) + momentum * h[i];
        const float update = g * std::sqrt((h2[i] + delta) / (h[i] + delta));
        h2[i] = keep * (update * update) + momentum * h2[i];
        grad[i] = rate * update;
      }
      break;
    }
    case SolverType::kAdam: {
      // h = m (first moment), h2 = v (second moment). Caffe computes the bias correction
      // sqrt(1 - beta2^t) / (1 - beta1^t) in double from the f32 betas, then keeps it as f32.
      const float beta1 = momentum;
      const float beta2 = static_cast<float>(step.momentum2);
      const double t = static_cast<double>(step.iter) + 1;
      const float correction =
          static_cast<float>(std::sqrt(1.0 - std::pow(static_cast<double>(beta2), t)) /
                             (1.0 - std::pow(static_cast<double>(beta1), t)));
      const float corrected_rate = rate * correction;
      const float keep1 = 1.0f - beta1, keep2 = 1.0f - beta2;
      for (int64_t i = 0; i < count; ++i) {
        const float g = RegularizedGradient(grad[i], param[i], scale, reg, decay);
        h[i] = keep1 * g + beta1 * h[i];
        h2[i] = keep2 * (g * g) + beta2 * h2[i];
        grad[i] = corrected_rate * (h[i] / (std::sqrt(h2[i]) + delta));
      }
      break;
    }
  }
  // Caffe's Net::Update: data -= diff.
  for (int64_t i = 0; i < count; ++i) param[i] -= grad[i];
  return absl::OkStatus();
}

double SumOfSquaresHost(int64_t count, const float* x) {
  double sum = 0;
  for (int64_t i = 0; i < count; ++i) {
    const double v = x[i];
    sum += v * v;
  }
  return sum;
}

}  // namespace dnn
}  // namespace kiln
