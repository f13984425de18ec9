// The inference pipeline: every rewrite in one fixed-point group, because each can expose
// another (a folded BatchNorm leaves Convolution + ReLU for the epilogue fusion; a removed
// Dropout leaves dead code).
#include "passes/inference_passes.h"

namespace kiln {

PassManager MakeInferencePipeline(PassManagerOptions options) {
  PassManager manager(std::move(options));
  std::vector<std::unique_ptr<Pass>> group;
  group.push_back(MakeRemoveDropoutPass());
  group.push_back(MakeFoldBatchNormPass());
  group.push_back(MakeBatchNormToScalePass());
  group.push_back(MakeFuseConvEpiloguePass());
  group.push_back(MakeFusePointwisePass());
  group.push_back(MakeShrinkDeconvolutionToCropPass());
  group.push_back(MakeDeadCodePass());
  manager.AddFixedPointGroup(std::move(group));
  return manager;
}

}  // namespace kiln
