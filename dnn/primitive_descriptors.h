// Descriptors of the primitives beyond convolution (activation, pooling, LRN, softmax, loss,
// dropout, eltwise), modelled on cuDNN's and extended where Caffe needs more (ceil rounding,
// within-channel LRN, loss normalization). Each Create validates and names the bad field.
#ifndef KILN_DNN_PRIMITIVE_DESCRIPTORS_H_
#define KILN_DNN_PRIMITIVE_DESCRIPTORS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dnn/descriptors.h"

namespace kiln {
namespace dnn {

// Element-wise activations. `coef` is the ReLU negative slope (0 for a plain ReLU, Caffe's
// negative_slope), the clipped ReLU ceiling, or the ELU alpha. kPower is Caffe's
// (shift + scale x)^power.
enum class ActivationMode { kRelu, kClippedRelu, kSigmoid, kTanh, kElu, kPower, kAbs, kIdentity };

struct ActivationDescriptor {
  ActivationMode mode = ActivationMode::kRelu;
  double coef = 0;
  double power = 1, scale = 1, shift = 0;

  static absl::StatusOr<ActivationDescriptor> Create(ActivationMode mode, double coef = 0);
  static absl::StatusOr<ActivationDescriptor> CreatePower(double power, double scale, double shift);
  std::string ToString() const;
};

// kAverageIncludePadding divides by the window clipped to the padded input (Caffe's AVE, equal
// to cuDNN's INCLUDE_PADDING whenever the window does not overhang the padding);
// kAverageExcludePadding divides by the number of input elements the window covers.
enum class PoolingMode { kMax, kAverageIncludePadding, kAverageExcludePadding };
// kFloor is cuDNN's output size; kCeil is Caffe's: ceil((in + 2 pad - window) / stride) + 1,
// less one when the last window would start inside the right padding.
enum class PoolingRounding { kFloor, kCeil };

struct PoolingDescriptor {
  PoolingMode mode = PoolingMode::kMax;
  PoolingRounding rounding = PoolingRounding::kFloor;
  std::vector<int64_t> window, pads, strides;  // 2 or 3 spatial dims each
  bool global = false;                         // window = the whole input plane

  static absl::StatusOr<PoolingDescriptor> Create(
      PoolingMode mode, std::vector<int64_t> window, std::vector<int64_t> pads,
      std::vector<int64_t> strides, PoolingRounding rounding = PoolingRounding::kFloor);
  // Pools each whole plane to one value (Caffe's global_pooling); 2 or 3 spatial dims.
  static PoolingDescriptor Global(PoolingMode mode, int spatial_rank);
  int spatial_rank() const { return static_cast<int>(strides.size()); }
  // The window, pads and strides this pooling has on input `x` (global resolves to x's plane).
  PoolingDescriptor ResolvedFor(const TensorDescriptor& x) const;
  std::string ToString() const;
};

// Output dims (N, C, [O,] P, Q) of pooling `x`; InvalidArgument when ranks disagree or the window
// does not fit.
absl::StatusOr<std::vector<int64_t>> PoolingOutputDims(const PoolingDescriptor& pool,
                                                       const TensorDescriptor& x);

// Local response normalization. Across channels (Caffe's ACROSS_CHANNELS, cuDNN's
// CROSS_CHANNEL_DIM1): y = x (k + alpha / size sum_{|c'-c| <= size/2} x_c'^2)^-beta. Within
// channel (Caffe's WITHIN_CHANNEL, a local contrast normalization over a size x size spatial
// window, zero padded): y = x (1 + alpha / size^2 sum_window x^2)^-beta; k is not used there.
enum class LrnMode { kAcrossChannels, kWithinChannel };

struct LrnDescriptor {
  LrnMode mode = LrnMode::kAcrossChannels;
  int64_t size = 5;
  double alpha = 1e-4, beta = 0.75, k = 1;

  static absl::StatusOr<LrnDescriptor> Create(LrnMode mode, int64_t size, double alpha, double beta,
                                              double k);
  std::string ToString() const;
};

// Batch normalization over N and space per channel (spatial), or over N per (C, space) element
// (per activation).
enum class BatchNormMode { kSpatial, kPerActivation };
// How training updates the running statistics. kExponential is cuDNN's: running = (1 - f)
// running + f batch (variance unbiased). kCaffeSum is Caffe's BatchNorm blobs: mean_sum = m
// mean_sum + mean, var_sum = m var_sum + unbiased var, scale_factor = m scale_factor + 1, with m
// the moving_average_fraction; inference divides the sums by scale_factor.
enum class RunningStatsRule { kExponential, kCaffeSum };

// What a batch-norm call computes besides the normalization (cuDNN's batch-norm ops):
// kBatchNormActivation applies `activation` to the scaled result in the same pass, and the
// backward masks dy by the activation's derivative read from y (the fused output) in its own two
// passes, so the activation costs no launch and no tensor of its own either way. ReLU with slope
// 0 is the activation implemented (the one Caffe nets put after BatchNorm + Scale).
enum class BatchNormOps { kBatchNorm, kBatchNormActivation };

// A batch-norm training call's settings (forward, and the backward of that forward).
struct BatchNormTraining {
  BatchNormMode mode = BatchNormMode::kSpatial;
  RunningStatsRule rule = RunningStatsRule::kExponential;
  double factor = 0.1;  // kExponential: the new batch's weight; kCaffeSum: moving_average_fraction
  double epsilon = 1e-5;
  BatchNormOps ops = BatchNormOps::kBatchNorm;
  ActivationDescriptor activation;  // kBatchNormActivation only
};

// Softmax over the dims [first_axis, last_axis] of a tensor, for each index of the other dims.
// Channel mode is axes [1, 1], instance mode [1, rank - 1]; any single axis works.
enum class SoftmaxAlgorithm { kAccurate, kLog };

struct SoftmaxDescriptor {
  SoftmaxAlgorithm algorithm = SoftmaxAlgorithm::kAccurate;
  int first_axis = 1, last_axis = 1;

  static SoftmaxDescriptor Channel(SoftmaxAlgorithm algorithm) { return {algorithm, 1, 1}; }
  static SoftmaxDescriptor Instance(SoftmaxAlgorithm algorithm, int rank) {
    return {algorithm, 1, rank - 1};
  }
  static SoftmaxDescriptor Axis(SoftmaxAlgorithm algorithm, int axis) {
    return {algorithm, axis, axis};
  }
};

// What SoftmaxWithLoss divides the summed loss by (Caffe's LossParameter.NormalizationMode):
// every label (outer x inner), the labels not ignored, the outer count, or nothing.
enum class LossNormalization { kFull, kValid, kBatchSize, kNone };

struct SoftmaxLossDescriptor {
  int axis = 1;
  bool has_ignore_label = false;
  int64_t ignore_label = -1;
  LossNormalization normalization = LossNormalization::kValid;
  double loss_weight = 1;
};

// Dropout: element e (its index in the logical row-major order of the dims, whatever the
// strides) is kept when DropoutUniform(seed, e) >= ratio; kept elements are scaled by
// 1 / (1 - ratio) (Caffe's train-time scaling). The mask is a pure function of (seed, e), so
// backward regenerates it and every launch shape gives the same mask.
struct DropoutDescriptor {
  double ratio = 0.5;
  uint64_t seed = 0;

  static absl::StatusOr<DropoutDescriptor> Create(double ratio, uint64_t seed);
};

// Caffe's Eltwise: a sum with one coefficient per input (all 1 when empty), a product, or a
// maximum (the gradient goes to the first input holding the maximum).
enum class EltwiseOp { kSum, kProd, kMax };
constexpr int kMaxEltwiseInputs = 8;

}  // namespace dnn
}  // namespace kiln

#endif  // KILN_DNN_PRIMITIVE_DESCRIPTORS_H_
