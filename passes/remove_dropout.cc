// Inference Dropout is the identity (Caffe scales at training time), so its readers can read its
// input directly; the node then dies.
#include "base/status_macros.h"
#include "passes/inference_passes.h"
#include "passes/rewrite_util.h"

namespace kiln {
namespace {

class RemoveDropoutPass : public Pass {
 public:
  absl::string_view name() const override { return "remove_dropout"; }
  absl::StatusOr<bool> Run(Graph& graph, const PassContext& context) override {
    if (!context.inference) return false;
    bool changed = false;
    for (Node* n : graph.nodes()) {
      if (n->kind() != OpKind::kDropout || n->GetBool("training")) continue;
      const Value in = n->input(0), out = n->output(0);
      if (in.type() != out.type()) {
        context.Explain(name(), *in.node, *n, "input and output types differ (strided input)");
        continue;
      }
      if (in.node->kind() == OpKind::kParameter) {
        bool input_is_output = false;
        for (const GraphOutput& o : graph.outputs()) input_is_output |= o.value == out;
        if (input_is_output) {
          // The output would become the input buffer itself; keep one copy step.
          context.Explain(name(), *in.node, *n, "a graph output would alias a graph input");
          continue;
        }
      }
      KILN_RETURN_IF_ERROR(graph.ReplaceAllUsesWith(out, in));
      changed = true;
    }
    if (changed) graph.RemoveDeadNodes();
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> MakeRemoveDropoutPass() { return std::make_unique<RemoveDropoutPass>(); }

}  // namespace kiln
