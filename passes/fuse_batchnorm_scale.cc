// Caffe trains batch normalization as two layers: BatchNorm (x̂ from the batch statistics) and a
// Scale with bias (y = γ x̂ + β). Run apart, they make one more pass over the tensor forward and
// three more backward (Scale's dx, Σ x̂ dy, Σ dy), and keep x̂ alive until backward reads it. The
// batch-norm primitive already takes γ and β, and its backward's reductions are dγ and dβ, so a
// training-mode spatial BatchNorm whose only reader is a per-channel Scale with bias becomes one
// AffineBatchNorm (PyTorch's affine BatchNorm2d). The statistics outputs move to the new node.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ops/shape_util.h"
#include "passes/rewrite_util.h"
#include "passes/training_passes.h"

namespace kiln {
namespace {

// Why `scale` cannot absorb `bn` (whose only reader it is), or "" when it can.
std::string WhyNot(const Node& bn, const Node& scale) {
  if (scale.kind() != OpKind::kScale) return "the BatchNorm's reader is not a Scale";
  if (scale.input(0) != Value{const_cast<Node*>(&bn), 0}) {
    return "the BatchNorm output is the Scale's parameter";
  }
  if (scale.num_inputs() != 3) return "the Scale has no bias (bias_term false)";
  if (scale.attrs().count("activation") && scale.GetString("activation") != "none") {
    return "the Scale has a fused activation";
  }
  const TensorType& x = bn.input(0).type();
  auto axis = NormalizeAxis(scale.GetInt("axis"), x.rank(), "axis");
  if (!axis.ok() || *axis != 1 || scale.GetInt("num_axes") != 1) {
    return "the Scale is not per channel (axis 1, num_axes 1)";
  }
  for (int i = 1; i < 3; ++i) {
    if (scale.input(i).type().dims() != std::vector<int64_t>{x.dim(1)}) {
      return "the Scale's parameters are not one value per channel";
    }
  }
  return "";
}

class FuseBatchNormScalePass : public Pass {
 public:
  absl::string_view name() const override { return "fuse_batchnorm_scale"; }

  absl::StatusOr<bool> Run(Graph& graph, const PassContext& context) override {
    bool changed = false;
    for (const std::string& node_name : NodeNames(graph)) {
      Node* bn = graph.FindNode(node_name);
      if (bn == nullptr || bn->kind() != OpKind::kBatchNorm) continue;
      if (bn->GetBool("use_global_stats") || bn->GetString("mode") != "spatial" ||
          bn->num_inputs() != 4) {
        continue;  // stored statistics are the inference passes' business
      }
      Node* scale = SoleConsumer(graph, bn->output(0));
      if (scale == nullptr) {
        for (const auto& [reader, index] : graph.Uses(bn->output(0))) {
          if (reader->kind() == OpKind::kScale) {
            context.Explain(name(), *bn, *reader, "the BatchNorm's output has other readers");
          }
        }
        continue;
      }
      if (std::string why = WhyNot(*bn, *scale); !why.empty()) {
        context.Explain(name(), *bn, *scale, why);
        continue;
      }
      std::vector<Value> inputs = bn->inputs();
      inputs.push_back(scale->input(1));
      inputs.push_back(scale->input(2));
      AttrMap attrs = {{"eps", bn->attrs().at("eps")},
                       {"moving_average_fraction", bn->attrs().at("moving_average_fraction")},
                       {"update_running_stats", bn->attrs().at("update_running_stats")}};
      KILN_ASSIGN_OR_RETURN(
          Node * fused, graph.AddNode("AffineBatchNorm", UniqueName(graph, bn->name() + "/affine"),
                                      inputs, attrs));
      for (int i = 1; i < bn->num_outputs(); ++i) {
        KILN_RETURN_IF_ERROR(graph.ReplaceAllUsesWith(bn->output(i), fused->output(i)));
      }
      const std::string final_name = bn->name();
      KILN_RETURN_IF_ERROR(FinishFusion(graph, scale->output(0), fused, final_name, {bn, scale}));
      changed = true;
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> MakeFuseBatchNormScalePass() {
  return std::make_unique<FuseBatchNormScalePass>();
}

PassManager MakeTrainingForwardPipeline(PassManagerOptions options) {
  PassManager manager(std::move(options));
  manager.Add(MakeFuseBatchNormScalePass());
  manager.Add(MakeFuseAffineBatchNormReluPass());  // reads the AffineBatchNorms the pass above made
  manager.Add(MakeFuseEltwiseReluPass());
  return manager;
}

PassManager MakeTrainingBackwardPipeline(PassManagerOptions options) {
  PassManager manager(std::move(options));
  manager.Add(MakeFuseGradientSumActivationPass());
  return manager;
}

}  // namespace kiln
