// A per-channel Scale followed by a ReLU as one Scale that applies the ReLU before its store
// (DenseNet's and pre-activation ResNets' BatchNorm-Scale-ReLU, after batchnorm_to_scale made
// the first two one Scale): one pass over the tensor instead of two.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "passes/inference_passes.h"
#include "passes/rewrite_util.h"

namespace kiln {
namespace {

class FusePointwisePass : public Pass {
 public:
  absl::string_view name() const override { return "fuse_pointwise"; }

  absl::StatusOr<bool> Run(Graph& graph, const PassContext& context) override {
    bool changed = false;
    for (const std::string& node_name : NodeNames(graph)) {
      Node* scale = graph.FindNode(node_name);
      if (scale == nullptr || scale->kind() != OpKind::kScale) continue;
      if (scale->GetString("activation") != "none") continue;
      Node* next = SoleConsumer(graph, scale->output(0));
      if (next == nullptr) {
        if (UseCount(graph, scale->output(0)) > 1) {
          for (const auto& [reader, index] : graph.Uses(scale->output(0))) {
            if (reader->kind() == OpKind::kReLU) {
              context.Explain(name(), *scale, *reader, "the Scale's output has other readers");
            }
          }
        }
        continue;
      }
      if (next->kind() != OpKind::kReLU) continue;
      AttrMap attrs = scale->attrs();
      attrs["activation"] = std::string("relu");
      attrs["negative_slope"] = next->GetFloat("negative_slope");
      KILN_ASSIGN_OR_RETURN(Node * fused,
                            graph.AddNode("Scale", UniqueName(graph, scale->name() + "/fused"),
                                          scale->inputs(), attrs));
      const std::string final_name = scale->name();
      KILN_RETURN_IF_ERROR(FinishFusion(graph, next->output(0), fused, final_name, {scale, next}));
      changed = true;
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> MakeFusePointwisePass() { return std::make_unique<FusePointwisePass>(); }

}  // namespace kiln
