// BatchNorm, AffineBatchNorm and their gradients as the batch-norm primitives' descriptors.
#ifndef KILN_KERNELS_DNN_PLANS_BATCH_NORM_H_
#define KILN_KERNELS_DNN_PLANS_BATCH_NORM_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "dnn/descriptors.h"
#include "dnn/primitive_descriptors.h"
#include "ir/graph.h"
#include "kernels/dnn_plans/tensor.h"

namespace kiln {
namespace dnn_plans {

// The statistics' (and scale's, bias's) descriptor for x: packed f32 with x's rank, C at dim 1
// and, per activation, x's spatial dims. The graph's [C] (or [C, spatial...]) is the same
// elements in the same order.
absl::StatusOr<dnn::TensorDescriptor> ParamDescriptor(dnn::BatchNormMode mode,
                                                      const dnn::TensorDescriptor& xd);

// BatchNorm(x, mean, variance[, scale_factor]) -> y[, running mean, variance, scale_factor] and
// BatchNormGradient(x, dy, mean, variance[, scale_factor]) -> dx. Caffe's BatchNorm has no scale
// or bias of its own (a Scale layer follows it): the primitives get the identity ones.
struct BatchNormPlan {
  dnn::BatchNormMode mode = dnn::BatchNormMode::kSpatial;
  bool stored_stats = true;  // use_global_stats: the node's statistics (inference)
  bool has_factor = false;   // Caffe's scale_factor input
  double eps = 1e-5;
  dnn::TensorDescriptor xd;
  dnn::TensorDescriptor yd;   // y, or dx for the gradient
  dnn::TensorDescriptor dyd;  // the gradient's dy
  dnn::TensorDescriptor pd;   // the statistics as the primitive sees them (ParamDescriptor)
  int64_t features = 1;
  // Batch statistics: the training call, which updates the running statistics by Caffe's rule
  // (kCaffeSum with moving_average_fraction) when `update` is set.
  dnn::BatchNormTraining training;
  bool update = false;
};
absl::StatusOr<BatchNormPlan> PlanBatchNorm(const Node& node, const OperandTypes& types);

// AffineBatchNorm(x, mean, variance, scale_factor, scale, bias) -> y[, running statistics],
// saved mean, saved inverse std; AffineBatchNormGradient(x, dy, scale, saved_mean,
// saved_inv_std[, y]) -> dx, dscale, dbias. Spatial, Caffe's running sums, the ReLU fused when
// the node says "relu".
struct AffineBatchNormPlan {
  dnn::BatchNormTraining bn;
  bool update = false;  // the forward updates the running statistics
  dnn::TensorDescriptor xd;
  dnn::TensorDescriptor yd;        // the forward's y; the gradient's fused-ReLU y (x's when none)
  dnn::TensorDescriptor dyd, dxd;  // the gradient's
  dnn::TensorDescriptor pd;
};
absl::StatusOr<AffineBatchNormPlan> PlanAffineBatchNorm(const Node& node,
                                                        const OperandTypes& types);

}  // namespace dnn_plans
}  // namespace kiln

#endif  // KILN_KERNELS_DNN_PLANS_BATCH_NORM_H_
