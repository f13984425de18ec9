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

// The training forward pipeline: the passes above, each run once. `options` can disable them by
// name.
PassManager MakeTrainingForwardPipeline(PassManagerOptions options = {});

}  // namespace kiln

#endif  // KILN_PASSES_TRAINING_PASSES_H_
