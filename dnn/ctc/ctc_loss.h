// Connectionist temporal classification (CTC) loss, as cuDNN's cudnnCTCLoss and PyTorch's
// nn.CTCLoss: the descriptor, argument validation, the GPU workspace's layout and the CPU
// reference (double precision). The CUDA version is dnn/cuda/ctc/ctc_loss.h.
//
// Operands, shared by both backends:
//   activations [T, N, C], packed time-major (element (t, n, c) at (t N + n) C + c): logits, to
//     which log_softmax over C is applied inside (cuDNN, warp-ctc), or log-probabilities when
//     `inputs_are_log_probs` (PyTorch).
//   labels: int32 on the HOST, the N targets concatenated (PyTorch's 1-D form), sample n's
//     label_lengths[n] values following those of samples 0..n-1; no label equals `blank`.
//   label_lengths[N], input_lengths[N]: int32 on the HOST (as cuDNN's CTC API takes them). The
//     lengths decide the work and the workspace, so the host needs them anyway; having the
//     labels there too lets every bad value be refused with a status before anything runs.
//     The arrays are read during the call only.
//   losses: kNone: N values, -log p(label_n | x_n); kSum and kMeanByTargetLength: 1 value.
//   grad (optional) [T, N, C], the activations' layout: the gradient of the reduced loss (of
//     the sum of the losses under kNone) times grad_scale, with respect to the logits, or, with
//     `inputs_are_log_probs`, PyTorch's gradient for log_probs, exp(lp) - posterior (the
//     exact derivative is -posterior; the two differ by exp(lp) times a row constant, which
//     a log_softmax in front of the loss takes out, so both give the same logit gradient).
//     Rows t >= input_lengths[n] are 0.
// An impossible alignment (a label needing more frames than input_lengths[n] gives) has an
// infinite loss; its gradient is NaN in the frames t < input_lengths[n], as in PyTorch, unless
// `zero_infinity`, which makes both 0.
#ifndef KILN_DNN_CTC_CTC_LOSS_H_
#define KILN_DNN_CTC_CTC_LOSS_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "base/dtype.h"

namespace kiln {
namespace dnn {

enum class CtcReduction : int {
  kNone,                // one loss per sample
  kSum,                 // Σ_n loss_n
  kMeanByTargetLength,  // PyTorch's 'mean': (1/N) Σ_n loss_n / max(label_lengths[n], 1)
};

struct CtcLossDescriptor {
  int32_t blank = 0;  // the blank class, in [0, C)
  bool inputs_are_log_probs = false;
  CtcReduction reduction = CtcReduction::kNone;
  bool zero_infinity = false;
  // Multiplies the gradient (not the loss): a loss weight, or the upstream dL/dloss.
  float grad_scale = 1.0f;
};

// The longest label a sample may have. The GPU's gradient kernel keeps a sample's distinct
// labels in shared memory; both backends refuse the same inputs.
constexpr int32_t kCtcMaxLabelLength = 4096;

// One call's shapes and host-side integer operands.
struct CtcLossInputs {
  DataType dtype = DataType::kF32;  // activations and grad (the reference ignores it)
  int64_t max_time = 0;             // T
  int64_t batch = 0;                // N
  int64_t classes = 0;              // C
  absl::Span<const int32_t> labels;
  absl::Span<const int32_t> label_lengths;
  absl::Span<const int32_t> input_lengths;
};

// OK, or InvalidArgument naming the argument and its bad value: dims < 1 or T N C overflowing,
// dtype not f32/f16/bf16, blank outside [0, C), an unknown reduction, a non-finite grad_scale,
// lengths arrays not N long, input_lengths[n] outside [0, T], label_lengths[n] outside
// [0, kCtcMaxLabelLength], labels.size() != Σ label_lengths, labels[i] outside [0, C) or equal
// to blank. `where` prefixes the message.
absl::Status CheckCtcLoss(const CtcLossDescriptor& desc, const CtcLossInputs& in,
                          const char* where);

// Elements `losses` must hold: N under kNone, else 1.
int64_t CtcLossOutputCount(const CtcLossDescriptor& desc, int64_t batch);

// The states of sample n's extended label (blanks around and between the labels): 2 L + 1.
inline int64_t CtcStates(int32_t label_length) { return 2 * int64_t{label_length} + 1; }

// The GPU workspace, in regions aligned to 256 bytes (offsets in bytes from its start):
//   samples: N records of kCtcSampleRecordBytes (dnn/cuda/ctc/ctc_loss_launch.h, CtcSample)
//   tables:  5 Σ L int32: the labels, each sample's label positions sorted by class, and its
//            distinct classes with the begin and end of their positions
//   lse:     T N f32, log Σ_c exp(x) of every row (logit inputs only)
//   alpha, beta: Σ_n input_lengths[n] (2 L_n + 1) f32 each, the forward and backward
//            variables, each time step's relative to a running log scale
//   losses:  N f64, the per-sample losses before reduction
constexpr int64_t kCtcSampleRecordBytes = 32;
struct CtcWorkspaceLayout {
  size_t samples = 0, tables = 0, lse = 0, alpha = 0, beta = 0, losses = 0;
  int64_t table_ints = 0;    // Σ L
  int64_t alpha_floats = 0;  // Σ_n input_lengths[n] (2 L_n + 1)
  size_t total = 0;
};
// The layout for validated inputs (call CheckCtcLoss first; this checks again).
absl::StatusOr<CtcWorkspaceLayout> CtcWorkspaceLayoutFor(const CtcLossDescriptor& desc,
                                                         const CtcLossInputs& in);
// Bytes of GPU workspace the call needs (cuDNN's cudnnGetCTCLossWorkspaceSize).
absl::StatusOr<size_t> CtcLossWorkspaceBytes(const CtcLossDescriptor& desc,
                                             const CtcLossInputs& in);

// The per-sample multiplier of the gradient: grad_scale, divided by N max(L_n, 1) under
// kMeanByTargetLength.
double CtcGradientScale(const CtcLossDescriptor& desc, int64_t batch, int32_t label_length);

namespace reference {

// The CPU reference: the alpha-beta recursion in log space, in double. `activations` and `grad`
// (nullptr: no gradient) hold T N C values, `losses` CtcLossOutputCount values.
absl::Status CtcLoss(const CtcLossDescriptor& desc, const CtcLossInputs& in,
                     const double* activations, double* losses, double* grad);

}  // namespace reference
}  // namespace dnn
}  // namespace kiln

#endif  // KILN_DNN_CTC_CTC_LOSS_H_
