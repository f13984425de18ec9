// The inference rewrites, one per file, and the pipeline that runs them. Each fusion checks
// legality first and records why it declined (PassContext::Explain); rewrites keep the original
// node names in the fused node's origins().
#ifndef KILN_PASSES_INFERENCE_PASSES_H_
#define KILN_PASSES_INFERENCE_PASSES_H_

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "passes/pass.h"
#include "passes/pass_manager.h"

namespace kiln {

// "dead_code": removes nodes no graph output depends on (Parameters stay).
std::unique_ptr<Pass> MakeDeadCodePass();
// "remove_dropout": inference Dropout is the identity; its uses read its input instead.
std::unique_ptr<Pass> MakeRemoveDropoutPass();
// "fold_batchnorm": BatchNorm with stored statistics (and a following Scale) after a
// Convolution or InnerProduct with constant weights becomes new weights and bias.
std::unique_ptr<Pass> MakeFoldBatchNormPass();
// "batchnorm_to_scale": a BatchNorm with stored statistics that could not fold (DenseNet's
// pre-activation order), with a following Scale, becomes one per-channel Scale: one pass over
// memory instead of two.
std::unique_ptr<Pass> MakeBatchNormToScalePass();
// "fuse_conv_epilogue": Convolution + Eltwise sum with a residual + ReLU become one
// Convolution whose kernel applies them before its store.
std::unique_ptr<Pass> MakeFuseConvEpiloguePass();

// "fuse_pointwise": a Scale followed by a ReLU becomes one Scale applying the ReLU.
std::unique_ptr<Pass> MakeFusePointwisePass();

// "shrink_deconvolution_to_crop": a Deconvolution read only by a Crop gets more padding, so it
// computes only what the Crop can keep (FCN-8s's upscore8: 506x506 of 568x568); the Crop's
// offsets drop by as much, and a Crop left with nothing to cut is removed.
std::unique_ptr<Pass> MakeShrinkDeconvolutionToCropPass();

// "place_concat_inputs": each Concat input takes the Concat output's strides, so its producer
// writes straight into the output (the planner places it there and the Concat runs nothing).
// For plans whose kernels write any strides (CUDA), after the layout is chosen.
std::unique_ptr<Pass> MakePlaceConcatInputsPass();
// "fold_convert_into_crop": a Convert whose input is a Crop that nothing else reads becomes
// the Crop, copying its window straight into the Convert's dtype and memory order. For plans
// with Converts (a precision or layout other than the graph's), after that rewrite.
std::unique_ptr<Pass> MakeFoldConvertIntoCropPass();

// "split_for_memory": a Convolution read only by a Pooling, at the network's largest
// activation, runs in slices of its output channels, each pooled at once, the pooled slices
// concatenated: the full convolution output never exists. Slower; only when asked for
// (CompileOptions::split_for_memory). Run after the pipeline, on fused convolutions.
std::unique_ptr<Pass> MakeSplitForMemoryPass();

// "split_rows_for_memory": the same section computed in bands of rows (each band the whole
// convolution with its own padding, pooled at once, the pooled bands concatenated along the
// height). Keeps the convolution's speed, so every optimized plan runs it, after the pipeline.
std::unique_ptr<Pass> MakeSplitRowsForMemoryPass();

// The inference pipeline: the rewrites above as one fixed-point group.
PassManager MakeInferencePipeline(PassManagerOptions options = {});

// The memory rewrites, run after the inference pipeline: "split_rows_for_memory", then with
// `split_channels` (CompileOptions::split_for_memory) "split_for_memory".
PassManager MakeMemoryPipeline(PassManagerOptions options = {}, bool split_channels = false);

// The placement rewrites of a plan whose kernels write any strides (CUDA), run after its
// precision and layout are applied: "place_concat_inputs", then "fold_convert_into_crop".
PassManager MakeCudaPlacementPipeline(PassManagerOptions options = {});

// Every pass the compiler's pipelines above can run, by name: the inference pipeline's, then
// the CUDA placement passes', then the memory passes' (every optional one included). Taken
// from the pipelines themselves, so a new pass is known once a pipeline runs it.
std::vector<std::string> KnownPassNames();

// OK when every name in `names` is a known pass (KnownPassNames); else InvalidArgument for the
// first that is not, listing the known ones: "compile: no pass named 'X'; passes: a, b, c".
// For `--disable-pass` (CompileOptions::disabled_passes).
absl::Status ValidatePassNames(const std::set<std::string>& names);

}  // namespace kiln

#endif  // KILN_PASSES_INFERENCE_PASSES_H_
