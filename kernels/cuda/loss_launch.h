// Plain C++ declarations of the loss and accuracy launchers (loss_kernels.cu), so g++ code can
// call them. Each reduces in one block with a fixed summation order (deterministic, no atomics),
// in double, reading packed row-major operands of any float storage (labels also i32), and
// writes one value into `out` in `out_type`. Each returns the launch's cudaError_t as an int.
#ifndef KILN_KERNELS_CUDA_LOSS_LAUNCH_H_
#define KILN_KERNELS_CUDA_LOSS_LAUNCH_H_

#include <cstdint>

namespace kiln {
namespace cuda {

// How a loss operand is stored.
enum class LossStorage : int { kF32, kF16, kBF16, kI32 };

struct LossOperand {
  const void* data = nullptr;
  LossStorage type = LossStorage::kF32;
};

// Caffe's normalizers; kValid counts the non-ignored entries.
enum class LossNormalizer : int { kFull, kValid, kBatchSize, kNone };

// Accuracy: scores [outer, classes, inner], labels outer*inner numbers; the share of positions
// (ignored labels skipped) where fewer than top_k classes score strictly above the label's. A
// label outside [0, classes) makes the result NaN (a kernel cannot return a status).
int LaunchAccuracy(LossOperand scores, LossOperand labels, int64_t outer, int64_t classes,
                   int64_t inner, int64_t top_k, bool has_ignore, int64_t ignore_label,
                   LossOperand out, void* stream);
// sum((a - b)^2) / (2 rows).
int LaunchEuclideanLoss(LossOperand a, LossOperand b, int64_t count, int64_t rows, LossOperand out,
                        void* stream);
// Sigmoid cross-entropy against targets, entries equal to the ignore label skipped.
int LaunchSigmoidCrossEntropyLoss(LossOperand logits, LossOperand targets, int64_t count,
                                  int64_t rows, bool has_ignore, int64_t ignore_label,
                                  LossNormalizer normalizer, LossOperand out, void* stream);
// Contrastive loss over `rows` pairs of `width` features and their similarity flags.
int LaunchContrastiveLoss(LossOperand a, LossOperand b, LossOperand similar, int64_t rows,
                          int64_t width, double margin, bool legacy, LossOperand out, void* stream);

// The gradients, each scaled by `weight` (the loss_weight) over the forward's normalizer, written
// packed in `out`'s storage: d/da of the Euclidean loss; d/dlogits of the sigmoid cross-entropy;
// both inputs' gradients of the contrastive loss.
int LaunchEuclideanLossGradient(LossOperand a, LossOperand b, int64_t count, int64_t rows,
                                double weight, LossOperand da, void* stream);
int LaunchSigmoidCrossEntropyLossGradient(LossOperand logits, LossOperand targets, int64_t count,
                                          int64_t rows, bool has_ignore, int64_t ignore_label,
                                          LossNormalizer normalizer, double weight, LossOperand dx,
                                          void* stream);
int LaunchContrastiveLossGradient(LossOperand a, LossOperand b, LossOperand similar, int64_t rows,
                                  int64_t width, double margin, bool legacy, double weight,
                                  LossOperand da, LossOperand db, void* stream);

}  // namespace cuda
}  // namespace kiln

#endif  // KILN_KERNELS_CUDA_LOSS_LAUNCH_H_
