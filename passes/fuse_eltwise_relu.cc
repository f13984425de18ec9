// A residual network adds its shortcut to its branch with an Eltwise sum and follows it with a
// ReLU, usually in place. In training that is two passes over the tensor forward (the sum
// writes it, the ReLU reads and writes it again) and the ReLU's backward is one more. An Eltwise
// whose only reader is a ReLU with a slope >= 0 takes it in: the sum's pass writes max(0, y)
// (or the leaky form), and the Eltwise's gradient starts with the ReLU's backward read off that
// output, which passes/fuse_gradient_sum_activation.cc then merges with the gradient sum in
// front of it.
//
// A ReLU with a negative slope changes signs, so its mask cannot be read off its output; it is
// left apart. The ReLU's output may have any number of readers (they read the fused output).
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "passes/rewrite_util.h"
#include "passes/training_passes.h"

namespace kiln {
namespace {

class FuseEltwiseReluPass : public Pass {
 public:
  absl::string_view name() const override { return "fuse_eltwise_relu"; }

  absl::StatusOr<bool> Run(Graph& graph, const PassContext& context) override {
    bool changed = false;
    for (const std::string& node_name : NodeNames(graph)) {
      Node* sum = graph.FindNode(node_name);
      if (sum == nullptr || sum->kind() != OpKind::kEltwise ||
          sum->GetString("activation") != "none") {
        continue;
      }
      Node* relu = SoleConsumer(graph, sum->output(0));
      if (relu == nullptr) {
        for (const auto& [reader, index] : graph.Uses(sum->output(0))) {
          if (reader->kind() == OpKind::kReLU) {
            context.Explain(name(), *sum, *reader,
                            "the Eltwise's output has other readers (or is a graph output)");
          }
        }
        continue;
      }
      if (relu->kind() != OpKind::kReLU) continue;
      if (!(relu->GetFloat("negative_slope") >= 0.0)) {
        context.Explain(name(), *sum, *relu,
                        "the ReLU's slope is negative, so its mask cannot be read off its output");
        continue;
      }
      AttrMap attrs = sum->attrs();
      attrs["activation"] = AttrValue(std::string("relu"));
      attrs["negative_slope"] = AttrValue(relu->GetFloat("negative_slope"));
      KILN_ASSIGN_OR_RETURN(
          Node * fused,
          graph.AddNode("Eltwise", UniqueName(graph, sum->name() + "/relu"), sum->inputs(), attrs));
      const std::string final_name = sum->name();
      KILN_RETURN_IF_ERROR(FinishFusion(graph, relu->output(0), fused, final_name, {sum, relu}));
      changed = true;
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> MakeFuseEltwiseReluPass() { return std::make_unique<FuseEltwiseReluPass>(); }

}  // namespace kiln
