// In a training graph a value read by several ops gets the sum of their gradients (an Eltwise
// sum the backward builder adds, named "<node>/grad_sum"). When that value is an activation's
// output, as at every residual block's ReLU, the sum is written to memory only for the
// activation's backward to read it back: two passes where one does. An ActivationGradient whose
// dy is such a sum, read by nothing else, takes the sum's operands as its own dy inputs and adds
// them in its single pass (in the same order, so the f32 result is the one the two ops gave).
//
// Only plain sums qualify (no coefficients, no fused activation), of at most 8 operands (the
// CUDA kernel's operand count).
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "passes/rewrite_util.h"
#include "passes/training_passes.h"

namespace kiln {
namespace {

constexpr int kMaxSummands = 8;

// Why the Eltwise `sum` (dy of `grad`) cannot be folded into it, or "" when it can.
std::string WhyNot(const Graph& graph, Node& sum, const Node& grad) {
  if (sum.GetString("operation") != "sum") return "dy is not a sum";
  for (double c : sum.GetFloats("coeffs")) {
    if (c != 1.0) return "the sum has coefficients";
  }
  if (sum.GetString("activation") != "none") return "the sum has a fused activation";
  if (sum.num_inputs() > kMaxSummands) {
    return absl::StrCat("the sum has ", sum.num_inputs(), " operands (at most ", kMaxSummands, ")");
  }
  if (SoleConsumer(graph, sum.output(0)) != &grad) return "the sum has other readers";
  for (const Value& in : sum.inputs()) {
    if (in.type() != grad.input(1).type()) return "the sum's operands differ in type from it";
  }
  return "";
}

class FuseGradientSumActivationPass : public Pass {
 public:
  absl::string_view name() const override { return "fuse_gradient_sum_activation"; }

  absl::StatusOr<bool> Run(Graph& graph, const PassContext& context) override {
    bool changed = false;
    for (const std::string& node_name : NodeNames(graph)) {
      Node* grad = graph.FindNode(node_name);
      if (grad == nullptr || grad->kind() != OpKind::kActivationGradient ||
          grad->num_inputs() != 2) {
        continue;
      }
      Node* sum = grad->input(1).node;
      if (sum->kind() != OpKind::kEltwise) continue;
      if (std::string why = WhyNot(graph, *sum, *grad); !why.empty()) {
        context.Explain(name(), *sum, *grad, why);
        continue;
      }
      std::vector<Value> inputs = {grad->input(0)};
      for (const Value& in : sum->inputs()) inputs.push_back(in);
      KILN_ASSIGN_OR_RETURN(Node * fused, graph.AddNode("ActivationGradient",
                                                        UniqueName(graph, grad->name() + "/of_sum"),
                                                        inputs, grad->attrs()));
      const std::string final_name = grad->name();
      KILN_RETURN_IF_ERROR(FinishFusion(graph, grad->output(0), fused, final_name, {sum, grad}));
      changed = true;
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> MakeFuseGradientSumActivationPass() {
  return std::make_unique<FuseGradientSumActivationPass>();
}

}  // namespace kiln
