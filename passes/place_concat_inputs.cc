// Concat without a copy: each input's producer writes straight into its channel range of the
// Concat's output. The pass gives every input the output's strides (a sub-region of it); the
// planner then places each input at its offset inside the Concat's buffer and the Concat step
// runs nothing. In a DenseNet block every Concat feeds the next one, so the whole block lives in
// the last Concat's buffer and the quadratic copying is gone. Runs on the plan's own graph, after
// the layout is fixed (the strides depend on it).
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "passes/inference_passes.h"
#include "passes/rewrite_util.h"

namespace kiln {
namespace {

// Ops whose CUDA kernels are views or that have several outputs: their outputs cannot move.
bool CanWriteASubRegion(const Node& n) {
  if (n.kind() == OpKind::kConcat) return true;  // nested: its own inputs move along with it
  switch (n.kind()) {
    case OpKind::kParameter:
    case OpKind::kConstant:
    case OpKind::kFlatten:
    case OpKind::kReshape:
    case OpKind::kDropout:
    case OpKind::kConvert:
    case OpKind::kSplit:
    case OpKind::kSlice:
      return false;
    default:
      return n.num_outputs() == 1;
  }
}

class PlaceConcatInputsPass : public Pass {
 public:
  absl::string_view name() const override { return "place_concat_inputs"; }

  absl::StatusOr<bool> Run(Graph& graph, const PassContext& context) override {
    KILN_ASSIGN_OR_RETURN(std::vector<Node*> order, graph.TopologicalOrder());
    bool changed = false;
    // Last first: an inner Concat takes the strides its outer one gave it before passing them on.
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      Node* concat = *it;
      if (concat->kind() != OpKind::kConcat) continue;
      const std::string reason = Legality(graph, *concat);
      if (!reason.empty()) {
        context.Explain(name(), *concat, *concat, reason);
        continue;
      }
      const std::vector<int64_t> strides = concat->output_types()[0].strides();
      for (const Value& v : concat->inputs()) {
        KILN_RETURN_IF_ERROR(graph.SetOutputStrides(v.node, v.index, strides));
      }
      changed = true;
    }
    return changed;
  }

 private:
  static std::string Legality(const Graph& graph, const Node& concat) {
    const TensorType& out = concat.output_types()[0];
    for (const GraphOutput& o : graph.outputs()) {
      for (const Value& v : concat.inputs()) {
        if (o.value == v) return absl::StrCat("input '", v.node->name(), "' is a graph output");
      }
    }
    for (int i = 0; i < concat.num_inputs(); ++i) {
      const Value& v = concat.input(i);
      if (!CanWriteASubRegion(*v.node)) {
        return absl::StrCat("input '", v.node->name(), "' (", v.node->op(),
                            ") cannot write into a sub-region");
      }
      if (v.node->HasStridedOutput(v.index)) {
        return absl::StrCat("input '", v.node->name(), "' is already placed elsewhere");
      }
      for (int j = 0; j < i; ++j) {
        if (concat.input(j) == v) return "an input appears twice";
      }
      for (const auto& [reader, index] : graph.Uses(v)) {
        if (reader->kind() == OpKind::kConcat && reader != &concat) {
          return absl::StrCat("input '", v.node->name(), "' also feeds Concat '", reader->name(),
                              "'");
        }
      }
      if (v.type().dtype() != out.dtype()) return "input and output types differ";
      // The planner offsets each input by whole elements of the output's strides.
      if (!v.type().IsContiguous() && !v.type().IsChannelsLast()) {
        return absl::StrCat("input '", v.node->name(), "' is not packed");
      }
    }
    return "";
  }
};

}  // namespace

std::unique_ptr<Pass> MakePlaceConcatInputsPass() {
  return std::make_unique<PlaceConcatInputsPass>();
}

}  // namespace kiln
