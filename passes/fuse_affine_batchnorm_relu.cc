// Caffe nets follow BatchNorm + Scale with a ReLU, usually in place (top == bottom). In training
// that ReLU is one more pass over the tensor forward and one more backward (ActivationGradient
// reads y and dy and writes dy again), all of it bandwidth. An AffineBatchNorm whose only reader
// is a plain ReLU (negative_slope 0) takes it in: the forward's apply pass writes max(0, y), and
// the gradient masks dy where that output is not positive inside the sums and the dx pass it
// runs anyway (cuDNN's batch norm with a fused activation does the same).
//
// In-place ReLUs need no care here: the importer gives each in-place top a new value, so the
// AffineBatchNorm's output and the ReLU's are distinct values whatever the prototxt's names.
// The ReLU's output may have any number of readers (they read the fused output instead); the
// AffineBatchNorm's output may not, as nothing would be left to give them the value before the
// ReLU.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "passes/rewrite_util.h"
#include "passes/training_passes.h"

namespace kiln {
namespace {

// Why `relu` (the sole reader of `bn`'s output) cannot be folded into `bn`, or "" when it can.
std::string WhyNot(const Node& relu) {
  if (relu.kind() != OpKind::kReLU) return "the AffineBatchNorm's reader is not a ReLU";
  if (relu.GetFloat("negative_slope") != 0.0) {
    return "the ReLU has a negative slope (only a plain ReLU is fused)";
  }
  return "";
}

class FuseAffineBatchNormReluPass : public Pass {
 public:
  absl::string_view name() const override { return "fuse_affine_batchnorm_relu"; }

  absl::StatusOr<bool> Run(Graph& graph, const PassContext& context) override {
    bool changed = false;
    for (const std::string& node_name : NodeNames(graph)) {
      Node* bn = graph.FindNode(node_name);
      if (bn == nullptr || bn->kind() != OpKind::kAffineBatchNorm || bn->GetBool("relu")) continue;
      Node* relu = SoleConsumer(graph, bn->output(0));
      if (relu == nullptr) {
        for (const auto& [reader, index] : graph.Uses(bn->output(0))) {
          if (reader->kind() == OpKind::kReLU) {
            context.Explain(name(), *bn, *reader,
                            "the AffineBatchNorm's output has other readers (or is a graph "
                            "output)");
          }
        }
        continue;
      }
      if (std::string why = WhyNot(*relu); !why.empty()) {
        context.Explain(name(), *bn, *relu, why);
        continue;
      }
      AttrMap attrs = bn->attrs();
      attrs["relu"] = AttrValue(true);
      KILN_ASSIGN_OR_RETURN(
          Node * fused, graph.AddNode("AffineBatchNorm", UniqueName(graph, bn->name() + "/relu"),
                                      bn->inputs(), attrs));
      // Running statistics and saved statistics keep their places.
      for (int i = 1; i < bn->num_outputs(); ++i) {
        KILN_RETURN_IF_ERROR(graph.ReplaceAllUsesWith(bn->output(i), fused->output(i)));
      }
      const std::string final_name = bn->name();
      KILN_RETURN_IF_ERROR(FinishFusion(graph, relu->output(0), fused, final_name, {bn, relu}));
      changed = true;
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> MakeFuseAffineBatchNormReluPass() {
  return std::make_unique<FuseAffineBatchNormReluPass>();
}

}  // namespace kiln
