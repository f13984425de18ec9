#include "dnn/ctc/ctc_loss.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/checked_int.h"

namespace kiln {
namespace dnn {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

absl::Status Bad(const char* where, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", what));
}

// log(exp(a) + exp(b)), exact at -inf (where a - b would be NaN).
double LogAdd(double a, double b) {
  if (a == kNegInf) return b;
  if (b == kNegInf) return a;
  const double m = std::max(a, b);
  return m + std::log(std::exp(a - m) + std::exp(b - m));
}

size_t AlignUp(size_t v) { return (v + 255) / 256 * 256; }

}  // namespace

absl::Status CheckCtcLoss(const CtcLossDescriptor& desc, const CtcLossInputs& in,
                          const char* where) {
  if (in.max_time < 1)
    return Bad(where, absl::StrCat("max_time (T) must be >= 1, got ", in.max_time));
  if (in.batch < 1) return Bad(where, absl::StrCat("batch (N) must be >= 1, got ", in.batch));
  if (in.classes < 1) return Bad(where, absl::StrCat("classes (C) must be >= 1, got ", in.classes));
  // The GPU indexes rows and workspace offsets with int64 and labels with int32.
  const std::optional<int64_t> rows = CheckedMul(in.max_time, in.batch);
  const std::optional<int64_t> elements = rows ? CheckedMul(*rows, in.classes) : std::nullopt;
  if (!elements || *elements > (int64_t{1} << 48) || in.classes > INT32_MAX) {
    return Bad(where, absl::StrCat("activations [", in.max_time, ", ", in.batch, ", ", in.classes,
                                   "] have too many elements"));
  }
  if (in.dtype != DataType::kF32 && in.dtype != DataType::kF16 && in.dtype != DataType::kBF16) {
    return Bad(where, absl::StrCat("dtype must be f32, f16 or bf16, got ", DataTypeName(in.dtype)));
  }
  if (desc.blank < 0 || desc.blank >= in.classes) {
    return Bad(where, absl::StrCat("blank ", desc.blank, " is outside [0, ", in.classes, ")"));
  }
  const int reduction = static_cast<int>(desc.reduction);
  if (reduction < 0 || reduction > static_cast<int>(CtcReduction::kMeanByTargetLength)) {
    return Bad(where, absl::StrCat("reduction ", reduction, " is not a CtcReduction"));
  }
  if (!std::isfinite(desc.grad_scale)) {
    return Bad(where, absl::StrCat("grad_scale must be finite, got ", desc.grad_scale));
  }
  if (static_cast<int64_t>(in.label_lengths.size()) != in.batch) {
    return Bad(where, absl::StrCat("label_lengths has ", in.label_lengths.size(),
                                   " values, batch (N) is ", in.batch));
  }
  if (static_cast<int64_t>(in.input_lengths.size()) != in.batch) {
    return Bad(where, absl::StrCat("input_lengths has ", in.input_lengths.size(),
                                   " values, batch (N) is ", in.batch));
  }
  int64_t total = 0;
  for (int64_t n = 0; n < in.batch; ++n) {
    const int32_t tn = in.input_lengths[n], ln = in.label_lengths[n];
    if (tn < 0 || tn > in.max_time) {
      return Bad(where, absl::StrCat("input_lengths[", n, "] = ", tn, " is outside [0, ",
                                     in.max_time, "] (T)"));
    }
    if (ln < 0 || ln > kCtcMaxLabelLength) {
      return Bad(where, absl::StrCat("label_lengths[", n, "] = ", ln, " is outside [0, ",
                                     kCtcMaxLabelLength, "]"));
    }
    total += ln;
  }
  if (static_cast<int64_t>(in.labels.size()) != total) {
    return Bad(where, absl::StrCat("labels has ", in.labels.size(),
                                   " values, the sum of label_lengths is ", total));
  }
  for (size_t i = 0; i < in.labels.size(); ++i) {
    const int32_t l = in.labels[i];
    if (l < 0 || l >= in.classes) {
      return Bad(where,
                 absl::StrCat("labels[", i, "] = ", l, " is outside [0, ", in.classes, ") (C)"));
    }
    if (l == desc.blank) {
      return Bad(where, absl::StrCat("labels[", i, "] = ", l, " is the blank"));
    }
  }
  return absl::OkStatus();
}

int64_t CtcLossOutputCount(const CtcLossDescriptor& desc, int64_t batch) {
  return desc.reduction == CtcReduction::kNone ? batch : 1;
}

double CtcGradientScale(const CtcLossDescriptor& desc, int64_t batch, int32_t label_length) {
  double s = desc.grad_scale;
  if (desc.reduction == CtcReduction::kMeanByTargetLength) {
    s /= static_cast<double>(batch) * std::max(label_length, 1);
  }
  return s;
}

absl::StatusOr<CtcWorkspaceLayout> CtcWorkspaceLayoutFor(const CtcLossDescriptor& desc,
                                                         const CtcLossInputs& in) {
  absl::Status s = CheckCtcLoss(desc, in, "CtcLossWorkspaceBytes");
  if (!s.ok()) return s;
  CtcWorkspaceLayout w;
  w.table_ints = static_cast<int64_t>(in.labels.size());
  for (int64_t n = 0; n < in.batch; ++n) {
    w.alpha_floats += in.input_lengths[n] * CtcStates(in.label_lengths[n]);
  }
  size_t at = 0;
  auto take = [&at](size_t bytes) {
    const size_t start = at;
    at += AlignUp(bytes);
    return start;
  };
  const size_t n = static_cast<size_t>(in.batch);
  w.samples = take(n * kCtcSampleRecordBytes);
  w.tables = take(static_cast<size_t>(5 * w.table_ints) * sizeof(int32_t));
  w.lse = take(desc.inputs_are_log_probs ? 0 : static_cast<size_t>(in.max_time) * n * 4);
  w.alpha = take(static_cast<size_t>(w.alpha_floats) * 4);
  w.beta = take(static_cast<size_t>(w.alpha_floats) * 4);
  w.losses = take(n * sizeof(double));
  w.total = at;
  return w;
}

absl::StatusOr<size_t> CtcLossWorkspaceBytes(const CtcLossDescriptor& desc,
                                             const CtcLossInputs& in) {
  absl::StatusOr<CtcWorkspaceLayout> w = CtcWorkspaceLayoutFor(desc, in);
  if (!w.ok()) return w.status();
  return w->total;
}

namespace reference {

namespace {

// One sample's log-probabilities lp[t][c] (t < Tn) and its extended label.
struct Sample {
  int64_t frames = 0;
  std::vector<int32_t> ext;         // l'_s: blank at even s, label (s - 1) / 2 at odd s
  std::vector<double> lp;           // frames x C
  std::vector<double> alpha, beta;  // frames x S, log space, both including frame t's emission
  double nll = 0;
};

void LogProbs(const CtcLossDescriptor& desc, const CtcLossInputs& in, const double* x, int64_t n,
              Sample& s) {
  const int64_t C = in.classes;
  s.lp.assign(s.frames * C, 0);
  for (int64_t t = 0; t < s.frames; ++t) {
    const double* row = x + (t * in.batch + n) * C;
    double lse = 0;
    if (!desc.inputs_are_log_probs) {
      lse = kNegInf;
      for (int64_t c = 0; c < C; ++c) lse = LogAdd(lse, row[c]);
    }
    for (int64_t c = 0; c < C; ++c) s.lp[t * C + c] = row[c] - lse;
  }
}

// Whether the path may skip from state s - 2 to s (forward) or s + 2 to s (backward): s is a
// label and not the same label as the one two states away (a repeat needs its blank).
bool CanSkip(const std::vector<int32_t>& ext, int64_t from, int64_t to, int32_t blank) {
  return ext[to] != blank && ext[from] != ext[to];
}

void AlphaBeta(const CtcLossInputs& in, int32_t blank, Sample& s) {
  const int64_t S = static_cast<int64_t>(s.ext.size()), T = s.frames, C = in.classes;
  if (T == 0) {
    s.nll = S == 1 ? 0 : std::numeric_limits<double>::infinity();
    return;
  }
  auto lp = [&](int64_t t, int64_t st) { return s.lp[t * C + s.ext[st]]; };
  s.alpha.assign(T * S, kNegInf);
  s.beta.assign(T * S, kNegInf);
  for (int64_t st = 0; st < std::min<int64_t>(S, 2); ++st) s.alpha[st] = lp(0, st);
  for (int64_t t = 1; t < T; ++t) {
    for (int64_t st = 0; st < S; ++st) {
      double a = s.alpha[(t - 1) * S + st];
      if (st >= 1) a = LogAdd(a, s.alpha[(t - 1) * S + st - 1]);
      if (st >= 2 && CanSkip(s.ext, st - 2, st, blank))
        a = LogAdd(a, s.alpha[(t - 1) * S + st - 2]);
      s.alpha[t * S + st] = a == kNegInf ? kNegInf : a + lp(t, st);
    }
  }
  for (int64_t st = std::max<int64_t>(S - 2, 0); st < S; ++st) {
    s.beta[(T - 1) * S + st] = lp(T - 1, st);
  }
  for (int64_t t = T - 2; t >= 0; --t) {
    for (int64_t st = 0; st < S; ++st) {
      double b = s.beta[(t + 1) * S + st];
      if (st + 1 < S) b = LogAdd(b, s.beta[(t + 1) * S + st + 1]);
      if (st + 2 < S && CanSkip(s.ext, st + 2, st, blank)) {
        b = LogAdd(b, s.beta[(t + 1) * S + st + 2]);
      }
      s.beta[t * S + st] = b == kNegInf ? kNegInf : b + lp(t, st);
    }
  }
  double logp = s.alpha[(T - 1) * S + S - 1];
  if (S >= 2) logp = LogAdd(logp, s.alpha[(T - 1) * S + S - 2]);
  s.nll = -logp;
}

// grad rows of sample n: scale (exp(lp) - γ), γ_t(c) = Σ_{s: l'_s = c} α_t(s) β_t(s) / (p y_t(c)),
// the posterior of emitting c at t. This is d(loss)/d(logit) through the log_softmax, and
// PyTorch's gradient for log_probs inputs.
void Gradient(const CtcLossDescriptor& desc, const CtcLossInputs& in, const Sample& s, int64_t n,
              double* grad) {
  const int64_t C = in.classes, S = static_cast<int64_t>(s.ext.size());
  const double scale = CtcGradientScale(desc, in.batch, in.label_lengths[n]);
  const bool infinite = std::isinf(s.nll);
  std::vector<double> lcab(C);
  for (int64_t t = 0; t < in.max_time; ++t) {
    double* row = grad + (t * in.batch + n) * C;
    if (t >= s.frames || (infinite && desc.zero_infinity)) {
      std::fill(row, row + C, 0.0);
      continue;
    }
    if (infinite) {
      std::fill(row, row + C, std::numeric_limits<double>::quiet_NaN());
      continue;
    }
    std::fill(lcab.begin(), lcab.end(), kNegInf);
    for (int64_t st = 0; st < S; ++st) {
      lcab[s.ext[st]] = LogAdd(lcab[s.ext[st]], s.alpha[t * S + st] + s.beta[t * S + st]);
    }
    for (int64_t c = 0; c < C; ++c) {
      const double lp = s.lp[t * C + c];
      const double gamma = lcab[c] == kNegInf ? 0 : std::exp(lcab[c] + s.nll - lp);
      row[c] = scale * (std::exp(lp) - gamma);
    }
  }
}

}  // namespace

absl::Status CtcLoss(const CtcLossDescriptor& desc, const CtcLossInputs& in,
                     const double* activations, double* losses, double* grad) {
  const char* where = "reference::CtcLoss";
  absl::Status status = CheckCtcLoss(desc, in, where);
  if (!status.ok()) return status;
  if (activations == nullptr) return Bad(where, "activations is null");
  if (losses == nullptr) return Bad(where, "losses is null");
  std::vector<double> per_sample(in.batch);
  int64_t label_offset = 0;
  for (int64_t n = 0; n < in.batch; ++n) {
    Sample s;
    s.frames = in.input_lengths[n];
    const int32_t L = in.label_lengths[n];
    s.ext.assign(CtcStates(L), desc.blank);
    for (int32_t i = 0; i < L; ++i) s.ext[2 * i + 1] = in.labels[label_offset + i];
    label_offset += L;
    LogProbs(desc, in, activations, n, s);
    AlphaBeta(in, desc.blank, s);
    per_sample[n] = std::isinf(s.nll) && desc.zero_infinity ? 0 : s.nll;
    if (grad != nullptr) Gradient(desc, in, s, n, grad);
  }
  if (desc.reduction == CtcReduction::kNone) {
    std::copy(per_sample.begin(), per_sample.end(), losses);
    return absl::OkStatus();
  }
  double sum = 0;
  for (int64_t n = 0; n < in.batch; ++n) {
    sum += desc.reduction == CtcReduction::kSum ? per_sample[n]
                                                : per_sample[n] / std::max(in.label_lengths[n], 1);
  }
  losses[0] = desc.reduction == CtcReduction::kSum ? sum : sum / static_cast<double>(in.batch);
  return absl::OkStatus();
}

}  // namespace reference
}  // namespace dnn
}  // namespace kiln
