#include "training/trainable_graph.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "passes/training_passes.h"
#include "training/backward.h"

namespace kiln {

namespace {

// The training-mode BatchNorms whose statistics are Constants (their three statistic inputs).
std::vector<Node*> TrainingBatchNorms(Graph& graph, std::set<std::string>& statistics) {
  std::vector<Node*> batch_norms;
  for (Node* n : graph.nodes()) {
    if (n->kind() != OpKind::kBatchNorm || n->GetBool("use_global_stats") || n->num_inputs() != 4)
      continue;
    bool constants = true;
    for (int i = 1; i < 4; ++i)
      constants = constants && n->input(i).node->kind() == OpKind::kConstant;
    if (!constants) continue;
    batch_norms.push_back(n);
    for (int i = 1; i < 4; ++i) statistics.insert(n->input(i).node->name());
  }
  return batch_norms;
}

// Each training-mode BatchNorm becomes one that also outputs its updated statistics.
absl::Status UpdateStatistics(Graph& graph, const std::vector<Node*>& batch_norms) {
  for (Node* old : batch_norms) {
    const std::string name = old->name();
    const std::vector<std::string> origins = old->origins();
    AttrMap attrs = old->attrs();
    attrs["update_running_stats"] = AttrValue(true);
    KILN_RETURN_IF_ERROR(graph.RenameNode(old, absl::StrCat(name, "/without_statistics")));
    KILN_ASSIGN_OR_RETURN(Node * updating, graph.AddNode("BatchNorm", name, old->inputs(), attrs));
    graph.SetOrigins(updating, origins);
    KILN_RETURN_IF_ERROR(graph.ReplaceAllUsesWith(old->output(0), updating->output(0)));
    for (int i = 1; i < 4; ++i) {
      const std::string stat = old->input(i).node->name().substr(std::string("param/").size());
      KILN_RETURN_IF_ERROR(graph.AddOutput(absl::StrCat("stats/", stat), updating->output(i)));
    }
  }
  return absl::OkStatus();
}

// Training-mode Dropouts read a per-run seed offset: each is replaced by the same Dropout with
// the offset as its second input (the original keeps its name for reports).
absl::Status SeedDropouts(Graph& graph, TrainableGraph& out) {
  std::vector<Node*> dropouts;
  for (Node* n : graph.nodes()) {
    if (n->kind() == OpKind::kDropout && n->GetBool("training") && n->num_inputs() == 1) {
      dropouts.push_back(n);
    }
  }
  if (dropouts.empty()) return absl::OkStatus();
  out.dropout_seed_input = "dropout_seed";
  KILN_ASSIGN_OR_RETURN(TensorType one, TensorType::Create(DataType::kF32, {1}));
  KILN_ASSIGN_OR_RETURN(Value seed, graph.AddParameter(out.dropout_seed_input, one));
  for (Node* old : dropouts) {
    const std::string name = old->name();
    const std::vector<std::string> origins = old->origins();
    KILN_RETURN_IF_ERROR(graph.RenameNode(old, absl::StrCat(name, "/without_seed")));
    KILN_ASSIGN_OR_RETURN(Node * seeded,
                          graph.AddNode("Dropout", name, {old->input(0), seed}, old->attrs()));
    graph.SetOrigins(seeded, origins);
    KILN_RETURN_IF_ERROR(graph.ReplaceAllUsesWith(old->output(0), seeded->output(0)));
  }
  return absl::OkStatus();
}

// Turns the trained parameters and statistics into graph inputs; returns the parameters' input
// values, which backward differentiates with respect to.
// `wrt_params` receives, per returned value, its index in out.params (a weight promoted only
// because of every_param_an_input is not differentiated).
absl::StatusOr<std::vector<Value>> PromoteParams(Graph& graph, const std::vector<ParamSpec>& params,
                                                 const std::set<std::string>& statistics,
                                                 const TrainableGraphOptions& options,
                                                 TrainableGraph& out,
                                                 std::vector<size_t>& wrt_params) {
  std::set<std::string> wanted;
  if (options.only != nullptr) wanted.insert(options.only->begin(), options.only->end());
  std::vector<Value> wrt;
  std::set<std::string> done;
  for (const ParamSpec& p : params) {
    if (!done.insert(p.node).second) continue;  // a shared weight: one Constant, promoted once
    Node* constant = graph.FindNode(p.node);
    if (constant == nullptr || constant->constant() == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("training: parameter node '", p.node, "'",
                       p.layer.empty() ? "" : absl::StrCat(" of layer '", p.layer, "'"),
                       " is not a Constant of the graph"));
    }
    const bool trained =
        options.only == nullptr ? p.learnable && p.lr_mult != 0.0f : wanted.count(p.node) > 0;
    const bool statistic = statistics.count(p.node) > 0;
    if (!trained && !statistic && !options.every_param_an_input) {
      out.fixed[p.node] = *constant->constant();
      continue;
    }
    const std::string input = absl::StrCat("param/", p.node);
    KILN_ASSIGN_OR_RETURN(Value value, graph.AddParameter(input, constant->output_types()[0]));
    KILN_RETURN_IF_ERROR(graph.ReplaceAllUsesWith(constant->output(0), value));
    if (statistic) {
      RunningStat r;
      r.node = p.node;
      r.input = input;
      r.output = absl::StrCat("stats/", p.node);
      r.layer = p.layer;
      r.index = p.index;
      r.caffe_shape = p.stored_shape;
      r.initial = *constant->constant();
      out.running.push_back(std::move(r));
      continue;
    }
    TrainableParam t;
    t.node = p.node;
    t.input = input;
    t.layer = p.layer;
    t.index = p.index;
    t.caffe_shape = p.stored_shape;
    t.lr_mult = p.lr_mult;
    t.decay_mult = p.decay_mult;
    t.initial = *constant->constant();
    if (options.only == nullptr && trained) {
      wrt.push_back(value);
      wrt_params.push_back(out.params.size());
    }
    out.params.push_back(std::move(t));
  }
  return wrt;
}

absl::Status AddBackward(Graph& graph, const std::vector<LossSpec>& losses, std::vector<Value> wrt,
                         const std::vector<size_t>& wrt_params,
                         const TrainableGraphOptions& options, TrainableGraph& out) {
  if (losses.empty()) {
    return absl::InvalidArgumentError(
        "training: the training graph has no loss (no output with a non-zero loss weight)");
  }
  std::vector<LossTerm> terms;
  for (const LossSpec& loss : losses)
    terms.push_back({loss.value, loss.weight * options.loss_scale});
  BackwardOptions backward;
  backward.propagate_down = options.propagate_down;
  const size_t num_params = wrt.size();
  for (const auto& [output, gradient] : options.output_gradients) {
    Value value;
    for (const GraphOutput& o : graph.outputs()) {
      if (o.name == output) value = o.value;
    }
    for (Node* input : graph.Parameters()) {
      if (value.node == nullptr && input->name() == output) value = input->output(0);
    }
    if (value.node == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("training: no graph output or input '", output, "' to differentiate"));
    }
    wrt.push_back(value);
  }
  KILN_ASSIGN_OR_RETURN(std::vector<Value> grads, BuildBackward(graph, terms, wrt, backward));
  for (size_t i = 0; i < num_params; ++i) {
    if (grads[i].node == nullptr) continue;  // no loss depends on it: left as it is
    TrainableParam& param = out.params[wrt_params[i]];
    param.gradient = absl::StrCat("grad/", param.node);
    KILN_RETURN_IF_ERROR(graph.AddOutput(param.gradient, grads[i]));
  }
  for (size_t i = num_params; i < grads.size(); ++i) {
    if (grads[i].node == nullptr) continue;
    const auto& [output, gradient] = options.output_gradients[i - num_params];
    KILN_RETURN_IF_ERROR(graph.AddOutput(gradient, grads[i]));
    out.output_gradients[output] = gradient;
  }
  // The backward's own rewrites run on the finished graph: they may replace a node that makes
  // a parameter's gradient, which the outputs above then follow.
  if (options.passes != nullptr) {
    PassContext context;
    context.inference = false;
    KILN_RETURN_IF_ERROR(
        MakeTrainingBackwardPipeline(*options.passes).Run(graph, context).status());
  }
  return absl::OkStatus();
}

// Each carried state's input must be a graph input and its output a graph output of the same
// type (the trainer copies one into the other after every pass).
absl::Status CheckCarriedStates(const Graph& graph,
                                const std::vector<std::pair<std::string, std::string>>& carried,
                                TrainableGraph& out) {
  for (const auto& [input, output] : carried) {
    const Node* in = nullptr;
    for (const Node* node : graph.Parameters()) {
      if (node->name() == input) in = node;
    }
    const GraphOutput* written = nullptr;
    for (const GraphOutput& o : graph.outputs()) {
      if (o.name == output) written = &o;
    }
    if (in == nullptr || written == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "training: carried state '", input, "' -> '", output,
          "': ", in == nullptr ? "no graph input of that name" : "no graph output of that name"));
    }
    if (in->output_types()[0] != written->value.type()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "training: carried state '", input, "' is ", in->output_types()[0].ToString(),
          " but its next value '", output, "' is ", written->value.type().ToString()));
    }
    out.carried.push_back({input, output});
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TrainableGraph> MakeTrainableGraph(std::unique_ptr<Graph> graph,
                                                  const std::vector<ParamSpec>& params,
                                                  const std::vector<LossSpec>& losses,
                                                  std::vector<std::string> data_inputs,
                                                  const TrainableGraphOptions& options) {
  if (graph == nullptr) return absl::InvalidArgumentError("training: no graph");
  TrainableGraph out;
  std::set<std::string> statistics;
  std::vector<Node*> batch_norms;
  if (options.only == nullptr) batch_norms = TrainingBatchNorms(*graph, statistics);
  std::vector<size_t> wrt_params;
  KILN_ASSIGN_OR_RETURN(std::vector<Value> wrt,
                        PromoteParams(*graph, params, statistics, options, out, wrt_params));
  KILN_RETURN_IF_ERROR(UpdateStatistics(*graph, batch_norms));
  KILN_RETURN_IF_ERROR(SeedDropouts(*graph, out));
  if (options.passes != nullptr) {
    PassContext context;
    context.inference = false;
    KILN_RETURN_IF_ERROR(
        MakeTrainingForwardPipeline(*options.passes).Run(*graph, context).status());
  }
  graph->RemoveDeadNodes();
  out.data_inputs = std::move(data_inputs);
  KILN_RETURN_IF_ERROR(CheckCarriedStates(*graph, options.carried_states, out));
  for (const LossSpec& loss : losses) out.losses.push_back({loss.name, loss.weight});
  if (options.with_backward) {
    KILN_RETURN_IF_ERROR(AddBackward(*graph, losses, std::move(wrt), wrt_params, options, out));
  }
  out.graph = std::move(graph);
  return out;
}

std::vector<ParamSpec> ConstantsAsParams(const Graph& graph) {
  std::vector<ParamSpec> specs;
  for (const Node* n : graph.nodes()) {
    if (n->constant() == nullptr || n->constant()->type().dtype() != DataType::kF32) continue;
    ParamSpec spec;
    spec.node = n->name();
    spec.layer = n->name();
    spec.stored_shape = n->constant()->type().dims();
    specs.push_back(std::move(spec));
  }
  return specs;
}

}  // namespace kiln
