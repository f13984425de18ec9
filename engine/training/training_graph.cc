#include "engine/training/training_graph.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "engine/status_macros.h"
#include "engine/training/backward.h"
#include "passes/training_passes.h"

namespace kiln {

absl::StatusOr<TrainingGraph> MakeTrainingGraph(CaffeModel model, bool with_backward,
                                                const std::vector<std::string>* only,
                                                double loss_scale,
                                                const PassManagerOptions* passes) {
  TrainingGraph out;
  Graph& graph = *model.graph;
  std::set<std::string> wanted;
  if (only != nullptr) wanted.insert(only->begin(), only->end());
  // The statistics of training-mode BatchNorms (Caffe's three blobs, as Constants).
  std::set<std::string> statistics;
  std::vector<Node*> batch_norms;
  if (only == nullptr) {
    for (Node* n : graph.nodes()) {
      if (n->op() != "BatchNorm" || n->GetBool("use_global_stats") || n->num_inputs() != 4)
        continue;
      bool constants = true;
      for (int i = 1; i < 4; ++i) constants = constants && n->input(i).node->op() == "Constant";
      if (!constants) continue;
      batch_norms.push_back(n);
      for (int i = 1; i < 4; ++i) statistics.insert(n->input(i).node->name());
    }
  }
  std::vector<Value> wrt;
  std::set<std::string> done;
  for (const CaffeParam& p : model.params) {
    if (done.count(p.node)) continue;  // a shared blob: one Constant, promoted once
    done.insert(p.node);
    Node* constant = graph.FindNode(p.node);
    if (constant == nullptr || constant->constant() == nullptr) {
      return absl::InternalError(absl::StrCat("training: parameter node '", p.node, "' of layer '",
                                              p.layer, "' is not a Constant"));
    }
    const bool trained = only == nullptr ? p.learnable && p.lr_mult != 0.0f : wanted.count(p.node);
    const bool statistic = statistics.count(p.node) > 0;
    if (!trained && !statistic) {
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
      r.caffe_shape = p.shape;
      r.initial = *constant->constant();
      out.running.push_back(std::move(r));
      continue;
    }
    TrainableParam t;
    t.node = p.node;
    t.input = input;
    t.layer = p.layer;
    t.index = p.index;
    t.caffe_shape = p.shape;
    t.lr_mult = p.lr_mult;
    t.decay_mult = p.decay_mult;
    t.initial = *constant->constant();
    if (only == nullptr) wrt.push_back(value);
    out.params.push_back(std::move(t));
  }
  // Each training-mode BatchNorm becomes one that also outputs its updated statistics.
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
  // Training-mode Dropouts read a per-run seed offset: each is replaced by the same Dropout with
  // the offset as its second input (the original keeps its name for reports).
  std::vector<Node*> dropouts;
  for (Node* n : graph.nodes()) {
    if (n->op() == "Dropout" && n->GetBool("training") && n->num_inputs() == 1) {
      dropouts.push_back(n);
    }
  }
  if (!dropouts.empty()) {
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
  }
  if (passes != nullptr) {
    PassContext context;
    context.inference = false;
    KILN_RETURN_IF_ERROR(MakeTrainingForwardPipeline(*passes).Run(graph, context).status());
  }
  graph.RemoveDeadNodes();
  for (const CaffeInput& in : model.inputs) out.data_inputs.push_back(in.name);

  if (with_backward) {
    std::vector<LossTerm> losses;
    BackwardOptions options;
    for (const CaffeLayer& layer : model.layers) {
      for (const CaffeTop& top : layer.tops) {
        if (top.loss_weight == 0.0f) continue;
        losses.push_back({top.value, top.loss_weight * loss_scale});
        out.losses.push_back({top.blob, top.loss_weight});
      }
    }
    for (const caffe::LayerParameter& layer : model.net.layer()) {
      if (layer.propagate_down_size() == 0) continue;
      const CaffeLayer* record = model.FindLayer(layer.name());
      if (record == nullptr || record->nodes.empty()) continue;
      std::vector<bool> down(layer.propagate_down().begin(), layer.propagate_down().end());
      options.propagate_down[record->nodes[0]] = down;
    }
    if (losses.empty()) {
      return absl::InvalidArgumentError(
          "training: the TRAIN net has no loss (no top with a non-zero loss_weight)");
    }
    KILN_ASSIGN_OR_RETURN(std::vector<Value> grads, BuildBackward(graph, losses, wrt, options));
    for (size_t i = 0; i < grads.size(); ++i) {
      if (grads[i].node == nullptr) continue;  // no loss depends on it: Caffe leaves it as is
      out.params[i].gradient = absl::StrCat("grad/", out.params[i].node);
      KILN_RETURN_IF_ERROR(graph.AddOutput(out.params[i].gradient, grads[i]));
    }
    // The backward's own rewrites run on the finished graph: they may replace a node that makes
    // a parameter's gradient, which the outputs above then follow.
    if (passes != nullptr) {
      PassContext context;
      context.inference = false;
      KILN_RETURN_IF_ERROR(MakeTrainingBackwardPipeline(*passes).Run(graph, context).status());
    }
  }
  out.model = std::move(model);
  return out;
}

}  // namespace kiln
