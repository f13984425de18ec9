// The IR: a Graph owns Nodes at stable addresses; a Value is (producing node, output index).
// Graph inputs are Parameter nodes, weights are Constant nodes holding a HostTensor, and every
// other node is an op from the OpRegistry whose output types came from its InferTypes.
#ifndef KILN_IR_GRAPH_H_
#define KILN_IR_GRAPH_H_

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/attribute.h"
#include "ir/host_tensor.h"
#include "ir/op_def.h"
#include "ir/op_registry.h"
#include "ir/tensor_type.h"

namespace kiln {

class Node;

struct Value {
  Node* node = nullptr;
  int index = 0;

  const TensorType& type() const;
  bool operator==(const Value& o) const { return node == o.node && index == o.index; }
  bool operator!=(const Value& o) const { return !(*this == o); }
  bool operator<(const Value& o) const;
};

class Node {
 public:
  // Creation number: unique within the graph, never reused, orders ties when printing.
  int id() const { return id_; }
  const std::string& op() const { return def_->name; }
  // What the node is, for tests of identity: n->kind() == OpKind::kConvolution.
  OpKind kind() const { return def_->kind; }
  const OpDef& def() const { return *def_; }
  // The user-facing name (a Caffe layer name, a builder name). Unique within the graph.
  const std::string& name() const { return name_; }
  const std::vector<Value>& inputs() const { return inputs_; }
  const Value& input(int i) const { return inputs_[i]; }
  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  // Attributes completed with the OpDef's defaults.
  const AttrMap& attrs() const { return attrs_; }
  const std::vector<TensorType>& output_types() const { return output_types_; }
  int num_outputs() const { return static_cast<int>(output_types_.size()); }
  Value output(int i = 0) { return Value{this, i}; }
  // The data of a Constant node; null for every other op.
  const HostTensor* constant() const { return constant_.get(); }
  // The names of the nodes of the source graph this node stands for: itself until a pass fuses
  // or folds others into it. `kiln time` and `kiln compile` report fused kernels by these.
  const std::vector<std::string>& origins() const { return origins_; }
  // True when a pass gave output i other strides than shape inference does (it then writes a
  // sub-region of a larger buffer: Graph::SetOutputStrides).
  bool HasStridedOutput(int i) const {
    return std::find(strided_outputs_.begin(), strided_outputs_.end(), i) != strided_outputs_.end();
  }

  int64_t GetInt(const std::string& name) const { return std::get<int64_t>(attrs_.at(name)); }
  double GetFloat(const std::string& name) const { return std::get<double>(attrs_.at(name)); }
  bool GetBool(const std::string& name) const { return std::get<bool>(attrs_.at(name)); }
  const std::string& GetString(const std::string& name) const {
    return std::get<std::string>(attrs_.at(name));
  }
  const std::vector<int64_t>& GetInts(const std::string& name) const {
    return std::get<std::vector<int64_t>>(attrs_.at(name));
  }
  const std::vector<double>& GetFloats(const std::string& name) const {
    return std::get<std::vector<double>>(attrs_.at(name));
  }

 private:
  friend class Graph;
  int id_ = 0;
  const OpDef* def_ = nullptr;
  std::string name_;
  std::vector<Value> inputs_;
  AttrMap attrs_;
  std::vector<TensorType> output_types_;
  std::shared_ptr<const HostTensor> constant_;
  std::vector<std::string> origins_;
  std::vector<int> strided_outputs_;
};

// A named graph output.
struct GraphOutput {
  std::string name;
  Value value;
};

class Graph {
 public:
  explicit Graph(const OpRegistry* registry) : registry_(registry) {}
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  const OpRegistry& registry() const { return *registry_; }

  // Adds a node of `op`; validates attributes and runs InferTypes. An empty `name` gets
  // "<op>_<id>". Errors name the node: "node 'conv1' (Convolution): ...".
  absl::StatusOr<Node*> AddNode(absl::string_view op, absl::string_view name,
                                std::vector<Value> inputs, const AttrMap& attrs);
  // A graph input of the given type; its name is what Run binds.
  absl::StatusOr<Value> AddParameter(absl::string_view name, const TensorType& type);
  // A weight tensor; the graph shares `data` (no copy).
  absl::StatusOr<Value> AddConstant(absl::string_view name, HostTensor data);
  // Marks `value` as an output named `name` (unique among outputs).
  absl::Status AddOutput(absl::string_view name, Value value);

  // Nodes in creation order (use TopologicalOrder() for execution order).
  std::vector<Node*> nodes() const;
  // Producers before consumers; a node that feeds no node (it writes only graph outputs) as soon
  // as its inputs are ready; other ties by creation id, so the order is deterministic.
  // InvalidArgument naming a node on the cycle if there is one.
  absl::StatusOr<std::vector<Node*>> TopologicalOrder() const;
  const std::vector<GraphOutput>& outputs() const { return outputs_; }
  std::vector<Node*> Parameters() const;
  Node* FindNode(absl::string_view name) const;
  int num_nodes() const { return static_cast<int>(nodes_.size()); }

  // Points every use of `from` (node inputs and graph outputs) at `to`. The types must match.
  absl::Status ReplaceAllUsesWith(Value from, Value to);
  // Removes nodes whose outputs reach no graph output; Parameters stay. Returns how many.
  int RemoveDeadNodes();
  // Every (node, input index) that reads `value`.
  std::vector<std::pair<Node*, int>> Uses(Value value) const;
  // Renames `node`; AlreadyExists when another node has `name`.
  absl::Status RenameNode(Node* node, absl::string_view name);
  // Records which source nodes `node` stands for (see Node::origins).
  void SetOrigins(Node* node, std::vector<std::string> origins);
  // Gives output `index` of `node` these element strides (same dims and dtype; no two indices may
  // share an element), then re-infers the types of the nodes that read it, transitively.
  // InvalidArgument naming the node when the strides are not valid for the output.
  absl::Status SetOutputStrides(Node* node, int index, const std::vector<int64_t>& strides);

  // A deep copy sharing the registry and the constants' storage.
  std::unique_ptr<Graph> Clone() const;

 private:
  Node* Insert(std::unique_ptr<Node> node);

  const OpRegistry* registry_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::map<std::string, Node*, std::less<>> by_name_;
  std::vector<GraphOutput> outputs_;
  int next_id_ = 0;
};

}  // namespace kiln

#endif  // KILN_IR_GRAPH_H_
