// The CPU oracle of the primitives beyond convolution: forward and backward of every op, on
// host arrays of doubles laid out as their descriptors say (any strides), computed the plain way
// in double precision. The CUDA primitives are tested against these, and these are tested by
// finite differences. Signatures follow the CUDA ones; blending is out = alpha op + beta out,
// with `out` not read when beta == 0. Calls are validated by primitive_checks.h, so the oracle
// refuses exactly what the GPU refuses.
#ifndef KILN_DNN_PRIMITIVE_REFERENCE_H_
#define KILN_DNN_PRIMITIVE_REFERENCE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "dnn/descriptors.h"
#include "dnn/primitive_descriptors.h"

namespace kiln {
namespace dnn {
namespace reference {

using Desc = TensorDescriptor;

// Activations. Backward takes y, dy and x as cuDNN does (each formula uses what it needs).
absl::Status ActivationForward(const ActivationDescriptor& act, double alpha, const Desc& xd,
                               const double* x, double beta, const Desc& yd, double* y);
absl::Status ActivationBackward(const ActivationDescriptor& act, double alpha, const Desc& yd,
                                const double* y, const Desc& dyd, const double* dy, const Desc& xd,
                                const double* x, double beta, const Desc& dxd, double* dx);
// PReLU: y = x > 0 ? x : slope x, with `slope` broadcast onto x (per channel or shared).
absl::Status PReluForward(const Desc& xd, const double* x, const Desc& slope_d, const double* slope,
                          double alpha, double beta, const Desc& yd, double* y);
// dx = alpha dy (x > 0 ? 1 : slope) + beta dx; dslope = Σ dy x [x <= 0] over the broadcast dims,
// blended with (alpha_param, beta_param).
absl::Status PReluBackward(const Desc& xd, const double* x, const Desc& dyd, const double* dy,
                           const Desc& slope_d, const double* slope, double alpha, double beta,
                           const Desc& dxd, double* dx, double alpha_param, double beta_param,
                           double* dslope);

// Pooling. Max backward sends dy to the first maximum of each window in (d, h, w) order.
absl::Status PoolingForward(const PoolingDescriptor& pool, double alpha, const Desc& xd,
                            const double* x, double beta, const Desc& yd, double* y);
absl::Status PoolingBackward(const PoolingDescriptor& pool, double alpha, const Desc& yd,
                             const double* y, const Desc& dyd, const double* dy, const Desc& xd,
                             const double* x, double beta, const Desc& dxd, double* dx);

// LRN across or within channels. Backward recomputes y from x (y's shape is checked, its values
// are not read), as the GPU path does.
absl::Status LrnForward(const LrnDescriptor& lrn, double alpha, const Desc& xd, const double* x,
                        double beta, const Desc& yd, double* y);
absl::Status LrnBackward(const LrnDescriptor& lrn, double alpha, const Desc& yd, const double* y,
                         const Desc& dyd, const double* dy, const Desc& xd, const double* x,
                         double beta, const Desc& dxd, double* dx);

// Batch normalization; `pd` describes scale, bias, means and variances (f32 dims from
// CheckBatchNormParam). save_mean / save_inv_std may be null. `caffe_scale_factor` is the one
// element of Caffe's third blob, used and updated only by RunningStatsRule::kCaffeSum. With
// BatchNormOps::kBatchNormActivation (a ReLU with slope 0) y = max(0, scale x̂ + bias).
absl::Status BatchNormForwardTraining(const BatchNormTraining& bn, double alpha, double beta,
                                      const Desc& xd, const double* x, const Desc& yd, double* y,
                                      const Desc& pd, const double* scale, const double* bias,
                                      double* running_mean, double* running_var,
                                      double* caffe_scale_factor, double* save_mean,
                                      double* save_inv_std);
// y = scale (x - mean s) / sqrt(var s + epsilon) + bias, s = 1, or for Caffe's sums
// s = 1 / caffe_scale_factor (0 when the factor is 0) when `caffe_scale_factor` is not null.
absl::Status BatchNormForwardInference(BatchNormMode mode, double alpha, double beta,
                                       const Desc& xd, const double* x, const Desc& yd, double* y,
                                       const Desc& pd, const double* scale, const double* bias,
                                       const double* mean, const double* var, double epsilon,
                                       const double* caffe_scale_factor);
// dx blended with (alpha_data, beta_data), dscale and dbias with (alpha_param, beta_param).
// Uses saved_mean / saved_inv_std when both are given, else recomputes them from x.
absl::Status BatchNormBackward(BatchNormMode mode, double alpha_data, double beta_data,
                               double alpha_param, double beta_param, const Desc& xd,
                               const double* x, const Desc& dyd, const double* dy, const Desc& dxd,
                               double* dx, const Desc& pd, const double* scale, double* dscale,
                               double* dbias, double epsilon, const double* saved_mean,
                               const double* saved_inv_std);
// The backward of a training forward `bn` (mode, epsilon and ops): with a fused ReLU, dy counts
// only where y (the forward's output) is > 0; otherwise y is not read and may be null.
absl::Status BatchNormBackward(const BatchNormTraining& bn, double alpha_data, double beta_data,
                               double alpha_param, double beta_param, const Desc& xd,
                               const double* x, const Desc& yd, const double* y, const Desc& dyd,
                               const double* dy, const Desc& dxd, double* dx, const Desc& pd,
                               const double* scale, double* dscale, double* dbias,
                               const double* saved_mean, const double* saved_inv_std);

// Softmax (accurate or log) over the descriptor's axes.
absl::Status SoftmaxForward(const SoftmaxDescriptor& softmax, double alpha, const Desc& xd,
                            const double* x, double beta, const Desc& yd, double* y);
absl::Status SoftmaxBackward(const SoftmaxDescriptor& softmax, double alpha, const Desc& yd,
                             const double* y, const Desc& dyd, const double* dy, double beta,
                             const Desc& dxd, double* dx);
// SoftmaxWithLoss: prob = softmax over loss.axis (written to `prob`, laid out as probd), loss =
// -Σ log max(prob[label], FLT_MIN) over labels not ignored, divided by the normalizer (at least
// 1, as Caffe). InvalidArgument for a label outside [0, C) that is not the ignore label.
absl::Status SoftmaxLossForward(const SoftmaxLossDescriptor& loss, const Desc& xd, const double* x,
                                const Desc& labeld, const double* labels, const Desc& probd,
                                double* prob, double* loss_value);
// dx = alpha loss_weight / normalizer (prob - onehot(label)) + beta dx, 0 at ignored labels.
absl::Status SoftmaxLossBackward(const SoftmaxLossDescriptor& loss, const Desc& probd,
                                 const double* prob, const Desc& labeld, const double* labels,
                                 double alpha, double beta, const Desc& dxd, double* dx);

// Dropout (forward and backward apply the same mask and scaling).
absl::Status DropoutForward(const DropoutDescriptor& dropout, double alpha, const Desc& xd,
                            const double* x, double beta, const Desc& yd, double* y);

// Tensor ops: y = alpha x + beta y across layouts; y = alpha b (broadcast) + beta y; y *= alpha;
// db = alpha Σ dy over b's broadcast dims + beta db.
absl::Status TransformTensor(double alpha, const Desc& xd, const double* x, double beta,
                             const Desc& yd, double* y);
absl::Status AddTensor(double alpha, const Desc& bd, const double* b, double beta, const Desc& yd,
                       double* y);
absl::Status ScaleTensor(const Desc& yd, double* y, double alpha);
absl::Status ReduceTensorSum(double alpha, const Desc& dyd, const double* dy, double beta,
                             const Desc& dbd, double* db);

// Eltwise forward, and the gradient of input `which`.
absl::Status EltwiseForward(EltwiseOp op, const std::vector<double>& coefficients, double alpha,
                            const std::vector<Desc>& xds, const std::vector<const double*>& xs,
                            double beta, const Desc& yd, double* y);
absl::Status EltwiseBackward(EltwiseOp op, const std::vector<double>& coefficients, int which,
                             double alpha, const std::vector<Desc>& xds,
                             const std::vector<const double*>& xs, const Desc& dyd,
                             const double* dy, double beta, const Desc& dxd, double* dx);

// Inner product over x's dims from `axis`: y = alpha (x w^T + bias) + beta y (bias may be null;
// w is [Nout, K], or [K, Nout] when `transposed`).
absl::Status InnerProductForward(int axis, bool transposed, double alpha, const Desc& xd,
                                 const double* x, const Desc& wd, const double* w,
                                 const double* bias, double beta, const Desc& yd, double* y);
absl::Status InnerProductBackwardData(int axis, bool transposed, double alpha, const Desc& dyd,
                                      const double* dy, const Desc& wd, const double* w,
                                      double beta, const Desc& dxd, double* dx);
absl::Status InnerProductBackwardFilter(int axis, bool transposed, double alpha, const Desc& xd,
                                        const double* x, const Desc& dyd, const double* dy,
                                        double beta, const Desc& dwd, double* dw);

}  // namespace reference
}  // namespace dnn
}  // namespace kiln

#endif  // KILN_DNN_PRIMITIVE_REFERENCE_H_
