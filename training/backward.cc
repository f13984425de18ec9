#include "training/backward.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ir/graph_builder.h"
#include "ops/gradients/gradient_request.h"

namespace kiln {

namespace {

// The gradient contributions reaching one value, in the order they were built.
using Contributions = std::map<Value, std::vector<Value>>;

// One Value for the sum of `parts` (the part itself when there is one).
absl::StatusOr<Value> SumOf(GraphBuilder& b, const Value& of, const std::vector<Value>& parts) {
  if (parts.size() == 1) return parts[0];
  std::string name = absl::StrCat(of.node->name(), "/grad_sum");
  if (of.node->num_outputs() > 1) absl::StrAppend(&name, "_", of.index);
  for (int i = 2; b.graph().FindNode(name) != nullptr; ++i) {
    name = absl::StrCat(of.node->name(), "/grad_sum_", i);
  }
  KILN_ASSIGN_OR_RETURN(
      Value sum, b.Op1("Eltwise", parts, {{"operation", AttrValue(std::string("sum"))}}, name));
  b.graph().SetOrigins(sum.node, of.node->origins());
  return sum;
}

}  // namespace

absl::StatusOr<std::vector<Value>> BuildBackward(Graph& graph, const std::vector<LossTerm>& losses,
                                                 const std::vector<Value>& wrt,
                                                 const BackwardOptions& options) {
  KILN_ASSIGN_OR_RETURN(std::vector<Node*> order, graph.TopologicalOrder());

  // Which values depend on some value in `wrt` through differentiable ops: only their
  // producers' inputs need gradients.
  std::set<Value> depends(wrt.begin(), wrt.end());
  for (Node* node : order) {
    if (!node->def().differentiable) continue;
    bool any = false;
    for (const Value& in : node->inputs()) any = any || depends.count(in) > 0;
    if (!any) continue;
    for (int i = 0; i < node->num_outputs(); ++i) depends.insert(node->output(i));
  }

  std::map<Value, double> seeds;
  for (const LossTerm& loss : losses) {
    if (loss.value.node == nullptr) return absl::InvalidArgumentError("backward: null loss");
    if (loss.value.type().num_elements() != 1) {
      return absl::InvalidArgumentError(absl::StrCat("backward: loss '", loss.value.node->name(),
                                                     "' is not a scalar (",
                                                     loss.value.type().ToString(), ")"));
    }
    seeds[loss.value] += loss.weight;
  }

  GraphBuilder builder(&graph);
  Contributions grads;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Node* node = *it;
    const OpDef& def = node->def();
    GradientRequest request;
    request.node = node;
    bool reached = false;
    for (int i = 0; i < node->num_outputs(); ++i) {
      const Value out = node->output(i);
      auto g = grads.find(out);
      Value sum;
      if (g != grads.end()) {
        KILN_ASSIGN_OR_RETURN(sum, SumOf(builder, out, g->second));
        reached = true;
      }
      auto s = seeds.find(out);
      request.output_grads.push_back(sum);
      request.loss_weights.push_back(s == seeds.end() ? 0.0 : s->second);
      reached = reached || (s != seeds.end() && s->second != 0.0);
    }
    if (!reached || !def.differentiable) continue;
    auto pd = options.propagate_down.find(node->name());
    bool wanted = false;
    for (int i = 0; i < node->num_inputs(); ++i) {
      bool need = depends.count(node->input(i)) > 0;
      if (pd != options.propagate_down.end() && i < static_cast<int>(pd->second.size())) {
        need = need && pd->second[i];
      }
      request.needs_grad.push_back(need);
      wanted = wanted || need;
    }
    if (!wanted) continue;
    if (!def.gradient) {
      return absl::UnimplementedError(absl::StrCat("backward: node '", node->name(), "' (",
                                                   node->op(), ") has no gradient builder"));
    }
    absl::StatusOr<std::vector<Value>> input_grads = def.gradient(builder, request);
    if (!input_grads.ok()) {
      return absl::Status(input_grads.status().code(),
                          absl::StrCat("backward: ", input_grads.status().message()));
    }
    if (static_cast<int>(input_grads->size()) != node->num_inputs()) {
      return absl::InternalError(absl::StrCat("backward: gradient of '", node->name(),
                                              "' returned ", input_grads->size(), " values for ",
                                              node->num_inputs(), " inputs"));
    }
    for (int i = 0; i < node->num_inputs(); ++i) {
      const Value& g = (*input_grads)[i];
      if (g.node == nullptr || !request.needs_grad[i]) continue;
      if (g.type().dims() != node->input(i).type().dims()) {
        return absl::InternalError(
            absl::StrCat("backward: gradient of input ", i, " of '", node->name(), "' is ",
                         g.type().ToString(), ", the input is ", node->input(i).type().ToString()));
      }
      grads[node->input(i)].push_back(g);
    }
  }

  std::vector<Value> out;
  for (const Value& v : wrt) {
    auto g = grads.find(v);
    if (g == grads.end()) {
      out.push_back(Value{});
      continue;
    }
    KILN_ASSIGN_OR_RETURN(Value sum, SumOf(builder, v, g->second));
    out.push_back(sum);
  }
  return out;
}

}  // namespace kiln
