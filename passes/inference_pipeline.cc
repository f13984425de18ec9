// The inference pipeline: every rewrite in one fixed-point group, because each can expose
// another (a folded BatchNorm leaves Convolution + ReLU for the epilogue fusion; a removed
// Dropout leaves dead code).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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

// Bands of rows cost (almost) no speed, so every optimized plan takes them; slices of channels
// cost some, so only plans that ask for the smallest memory do.
PassManager MakeMemoryPipeline(PassManagerOptions options, bool split_channels) {
  PassManager manager(std::move(options));
  manager.Add(MakeSplitRowsForMemoryPass());
  if (split_channels) manager.Add(MakeSplitForMemoryPass());
  return manager;
}

PassManager MakeCudaPlacementPipeline(PassManagerOptions options) {
  PassManager manager(std::move(options));
  manager.Add(MakePlaceConcatInputsPass());
  manager.Add(MakeFoldConvertIntoCropPass());
  return manager;
}

std::vector<std::string> KnownPassNames() {
  std::vector<std::string> names;
  auto append = [&names](const PassManager& pipeline) {
    for (std::string& name : pipeline.PassNames()) names.push_back(std::move(name));
  };
  append(MakeInferencePipeline());
  append(MakeCudaPlacementPipeline());
  append(MakeMemoryPipeline({}, /*split_channels=*/true));
  return names;
}

absl::Status ValidatePassNames(const std::set<std::string>& names) {
  if (names.empty()) return absl::OkStatus();
  const std::vector<std::string> known = KnownPassNames();
  for (const std::string& name : names) {
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      return absl::InvalidArgumentError(absl::StrCat("compile: no pass named '", name,
                                                     "'; passes: ", absl::StrJoin(known, ", ")));
    }
  }
  return absl::OkStatus();
}

}  // namespace kiln
