// The rewrites of a training graph's forward part, run before its backward is built so the
// backward follows the fused ops (each fused op's gradient builder gives the fused backward).
#ifndef KILN_PASSES_TRAINING_PASSES_H_
#define KILN_PASSES_TRAINING_PASSES_H_

#include <memory>

#include "passes/pass.h"
#include "passes/pass_manager.h"

namespace kiln {

// "fuse_batchnorm_scale": a training-mode spatial BatchNorm whose only use is a per-channel Scale
// with bias (Caffe's BatchNorm + Scale pair) becomes one AffineBatchNorm.
std::unique_ptr<Pass> MakeFuseBatchNormScalePass();

// "fuse_affine_batchnorm_relu": an AffineBatchNorm whose only use is a ReLU with negative slope
// 0 takes the ReLU in (its "relu" attribute), so the forward writes max(0, y) in its own pass and
// the backward masks dy by that output inside its own two passes.
std::unique_ptr<Pass> MakeFuseAffineBatchNormReluPass();

// "fuse_eltwise_relu": an Eltwise whose only reader is a ReLU with a slope >= 0 (a residual
// sum and its ReLU) takes the ReLU in (its "activation" attribute): one pass forward, and its
// gradient reads the mask off the fused output.
std::unique_ptr<Pass> MakeFuseEltwiseReluPass();

// The training forward pipeline: the passes above, each run once. `options` can disable them by
// name.
PassManager MakeTrainingForwardPipeline(PassManagerOptions options = {});

// "fuse_gradient_sum_activation", run on the graph after its backward is built: an
// ActivationGradient whose dy is a plain Eltwise sum read by nothing else (the gradient sum of an
// activation output with several readers) adds the sum's operands itself, in its one pass.
std::unique_ptr<Pass> MakeFuseGradientSumActivationPass();

// The training backward pipeline: the pass above. `options` can disable it by name.
PassManager MakeTrainingBackwardPipeline(PassManagerOptions options = {});

}  // namespace kiln

#endif  // KILN_PASSES_TRAINING_PASSES_H_
