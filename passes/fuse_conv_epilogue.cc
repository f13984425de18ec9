// Convolution + Eltwise sum (a residual) + ReLU as one Convolution whose kernel adds the bias and
// the residual and applies the ReLU before its single store (as cuDNN's
// ConvolutionBiasActivationForward): the sum and the activation no longer read and write the
// whole tensor again.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "passes/inference_passes.h"
#include "passes/rewrite_util.h"

namespace kiln {
namespace {

bool IsPlainSum(const Node& n) {
  if (n.kind() != OpKind::kEltwise || n.GetString("operation") != "sum" || n.num_inputs() != 2) {
    return false;
  }
  for (double c : n.GetFloats("coeffs")) {
    if (c != 1.0) return false;
  }
  // A sum with its ReLU fused already (passes/fuse_eltwise_relu.cc) is not a plain sum.
  return n.GetString("activation") == "none";
}

class FuseConvEpiloguePass : public Pass {
 public:
  absl::string_view name() const override { return "fuse_conv_epilogue"; }

  absl::StatusOr<bool> Run(Graph& graph, const PassContext& context) override {
    bool changed = false;
    std::vector<std::string> names = NodeNames(graph);
    // Latest first: of two convolutions meeting at a residual sum (ResNet's projection
    // shortcut), the later one (the main branch) takes the sum, the other becomes its residual.
    for (auto it = names.rbegin(); it != names.rend(); ++it) {
      Node* conv = graph.FindNode(*it);
      if (conv == nullptr || conv->kind() != OpKind::kConvolution) continue;
      if (conv->GetString("activation") != "none") continue;  // already fused
      KILN_ASSIGN_OR_RETURN(bool fused, TryFuse(graph, conv, context));
      changed = changed || fused;
    }
    return changed;
  }

 private:
  absl::StatusOr<bool> TryFuse(Graph& graph, Node* conv, const PassContext& context) {
    std::vector<const Node*> absorbed = {conv};
    Value current = conv->output(0);
    Value residual;
    Node* next = SoleConsumer(graph, current);
    if (next != nullptr && IsPlainSum(*next) && conv->num_inputs() <= 3) {
      const Value other = next->input(0) == current ? next->input(1) : next->input(0);
      if (other == current) {
        context.Explain(name(), *conv, *next, "the sum adds the convolution to itself");
      } else if (other.type() != current.type()) {
        context.Explain(name(), *conv, *next, "the residual's type or strides differ");
      } else {
        residual = other;
        absorbed.push_back(next);
        current = next->output(0);
        next = SoleConsumer(graph, current);
      }
    }
    bool relu = false;
    double slope = 0;
    if (next != nullptr && next->kind() == OpKind::kReLU && next->input(0) == current) {
      relu = true;
      slope = next->GetFloat("negative_slope");
      absorbed.push_back(next);
      current = next->output(0);
    }
    if (absorbed.size() == 1) {
      if (next == nullptr) {
        const int uses = UseCount(graph, current);
        if (uses > 1) {
          for (const auto& [reader, index] : graph.Uses(current)) {
            context.Explain(
                name(), *conv, *reader,
                absl::StrCat("the output has ", uses, " readers (or is a graph output)"));
          }
        }
      } else if (next->kind() == OpKind::kConvolution && next->num_inputs() > 3 &&
                 next->input(3) == current) {
        context.Explain(name(), *conv, *next,
                        "the output is the residual another convolution's epilogue adds");
      } else {
        context.Explain(name(), *conv, *next,
                        absl::StrCat(next->op(), " is not a ReLU or a two-input Eltwise sum"));
      }
      return false;
    }
    std::vector<Value> inputs = {conv->input(0), conv->input(1)};
    if (conv->num_inputs() > 2) {
      inputs.push_back(conv->input(2));
    } else if (residual.node != nullptr) {
      // The residual port comes after the bias port: a zero bias fills it.
      const TensorType& w = conv->input(1).type();
      KILN_ASSIGN_OR_RETURN(TensorType t, TensorType::Create(w.dtype(), {w.dim(0)}));
      KILN_ASSIGN_OR_RETURN(
          Value zero,
          graph.AddConstant(UniqueName(graph, conv->name() + "/zero_bias"), HostTensor(t)));
      inputs.push_back(zero);
    }
    if (residual.node != nullptr) inputs.push_back(residual);
    AttrMap attrs = conv->attrs();
    attrs["activation"] = std::string(relu ? "relu" : "none");
    attrs["negative_slope"] = slope;
    KILN_ASSIGN_OR_RETURN(
        Node * fused,
        graph.AddNode("Convolution", UniqueName(graph, conv->name() + "/fused"), inputs, attrs));
    const std::string final_name = conv->name();
    KILN_RETURN_IF_ERROR(FinishFusion(graph, current, fused, final_name, absorbed));
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> MakeFuseConvEpiloguePass() {
  return std::make_unique<FuseConvEpiloguePass>();
}

}  // namespace kiln
