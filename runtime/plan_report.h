// What a compiled plan is, for people and for programs: each step with the source layers it
// covers (several when fused), the rewrites the optimizer declined, and the activation arena over
// the steps; as rows, JSON pieces, graphviz and SVG. Shared by the CLI (`kiln compile`, `kiln
// dump`, `kiln time`) and the C API (kiln_engine_report_json, kiln_engine_graph_dot,
// kiln_engine_memory_svg), so both say the same of a plan.
#ifndef KILN_RUNTIME_PLAN_REPORT_H_
#define KILN_RUNTIME_PLAN_REPORT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/execution_plan.h"

namespace kiln {

// Which source layers a plan step stands for. A step's node keeps the names of the nodes it
// replaced (Node::origins); a frontend maps those to its layers (frontends/caffe/plan_layers.h
// for a Caffe model's prototxt layers).
class LayerIndex {
 public:
  // No layers: a step stands for its node's origins, the source graph's own node names.
  LayerIndex() = default;
  // `layer_of_node`: each source node's layer; `type_of_layer`: each layer's type.
  LayerIndex(std::map<std::string, std::string> layer_of_node,
             std::map<std::string, std::string> type_of_layer);
  // The distinct layers of `node`'s origins, in order; {node.name()} when none is a layer's (a
  // step the compiler added, a dtype/layout Convert, keeps its own name). With no layers, the
  // distinct origins.
  std::vector<std::string> LayersOf(const Node& node) const;
  // The layer's type, or "" for a name that is not a layer.
  std::string TypeOf(const std::string& layer) const;

 private:
  std::map<std::string, std::string> layer_of_node_, type_of_layer_;
};

// One plan step as the reports show it.
struct StepRow {
  int index = 0;  // into plan.steps()
  std::string name, op, kernel;
  std::vector<std::string> layers;  // LayerIndex::LayersOf
  bool view = false;                // nothing runs (PlanStep::is_view)
  bool in_place = false;
  std::string description;  // what the kernel chose at plan time ("algo=implicit_gemm ...")
  std::string algorithm;    // the algorithm in it ("algo=X"), "" when the kernel has none
  int64_t workspace_bytes = 0;
  int64_t workspace_offset = -1;  // in the activation arena; -1: the separate workspace arena
};

// Every step of the plan, views included, in order.
std::vector<StepRow> StepRows(const ExecutionPlan& plan, const LayerIndex& layers);

// A step as a JSON object: name, kernel, layers and in_place (`kiln compile --json`); with
// `detail` also index, op, view, description, algorithm (when there is one), workspace_bytes and
// workspace_offset.
std::string StepJson(const StepRow& row, bool detail);

// The rewrites the optimizer declined (ExecutionPlan::remarks), under a count, one line each
// (`--why-not-fused`).
std::string DeclinedRewritesText(const ExecutionPlan& plan);
// The same as a JSON array of {"pass", "producer", "consumer", "reason"}.
std::string DeclinedRewritesJson(const ExecutionPlan& plan);

// A root buffer of the activation arena and the steps it is live over.
struct ArenaBuffer {
  int buffer = -1;   // into plan.buffers()
  std::string name;  // the value it holds: the graph input's name, or the node first writing it
  int64_t offset = 0, bytes = 0;
  // Its first write and last use, as step indices; -1 for a graph input (live from the start),
  // steps().size() for a graph output (live to the end).
  int first_step = 0, last_step = 0;
};

// Every root buffer of the activation arena that a step or the graph's edges touch, by index.
std::vector<ArenaBuffer> ArenaBuffers(const ExecutionPlan& plan);

// The arena with nothing shared: each of ArenaBuffers, and each step's workspace placed in the
// arena, in bytes of its own, aligned as the planner aligns (256). What the plan's values and
// workspaces take allocated one by one: the "naive" number of a plan with no model file to count
// from, an upper bound of activations_bytes().
int64_t UnsharedArenaBytes(const ExecutionPlan& plan);

// The plan's steps as a graphviz digraph, each fused kernel a cluster labelled with its layers.
std::string PlanToDot(const ExecutionPlan& plan, const LayerIndex& layers);
// The activation arena over the steps as a standalone SVG: one rectangle per buffer, from the
// step that first writes it to the last that reads it, at its byte range.
std::string MemoryToSvg(const ExecutionPlan& plan);

}  // namespace kiln

#endif  // KILN_RUNTIME_PLAN_REPORT_H_
