#include "ir/graph.h"

#include <queue>
#include <set>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace kiln {

const TensorType& Value::type() const { return node->output_types()[index]; }

bool Value::operator<(const Value& o) const {
  if (node->id() != o.node->id()) return node->id() < o.node->id();
  return index < o.index;
}

namespace {
std::string NodeContext(absl::string_view name, absl::string_view op) {
  return absl::StrCat("node '", name, "' (", op, ")");
}
}  // namespace

Node* Graph::Insert(std::unique_ptr<Node> node) {
  Node* raw = node.get();
  if (raw->origins_.empty()) raw->origins_ = {raw->name_};
  by_name_[raw->name_] = raw;
  nodes_.push_back(std::move(node));
  return raw;
}

absl::StatusOr<Node*> Graph::AddNode(absl::string_view op, absl::string_view name,
                                     std::vector<Value> inputs, const AttrMap& attrs) {
  auto def = registry_->Find(op);
  if (!def.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("node '", name, "': ", def.status().message()));
  }
  const int id = next_id_;
  std::string node_name = name.empty() ? absl::StrCat(op, "_", id) : std::string(name);
  const std::string context = NodeContext(node_name, op);
  if (by_name_.count(node_name)) {
    return absl::InvalidArgumentError(absl::StrCat(context, ": name already used in the graph"));
  }
  if ((*def)->kind == OpKind::kConstant) {
    return absl::InvalidArgumentError(absl::StrCat(context, ": use AddConstant for weights"));
  }
  std::vector<TensorType> input_types;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value& v = inputs[i];
    if (v.node == nullptr || by_name_.find(v.node->name()) == by_name_.end() ||
        by_name_.find(v.node->name())->second != v.node) {
      return absl::InvalidArgumentError(
          absl::StrCat(context, ": input ", i, " is not a value of this graph"));
    }
    if (v.index < 0 || v.index >= v.node->num_outputs()) {
      return absl::InvalidArgumentError(absl::StrCat(context, ": input ", i, " refers to output ",
                                                     v.index, " of '", v.node->name(),
                                                     "', which has ", v.node->num_outputs()));
    }
    input_types.push_back(v.type());
  }
  auto normalized = NormalizeAttrs(**def, attrs);
  if (!normalized.ok()) return Annotate(normalized.status(), context);
  auto types = InferNodeTypes(**def, input_types, *normalized);
  if (!types.ok()) return Annotate(types.status(), context);

  auto node = std::make_unique<Node>();
  node->id_ = id;
  node->def_ = *def;
  node->name_ = std::move(node_name);
  node->inputs_ = std::move(inputs);
  node->attrs_ = *std::move(normalized);
  node->output_types_ = *std::move(types);
  ++next_id_;
  return Insert(std::move(node));
}

absl::StatusOr<Value> Graph::AddParameter(absl::string_view name, const TensorType& type) {
  AttrMap attrs = {{"dtype", std::string(DataTypeName(type.dtype()))}, {"shape", type.dims()}};
  if (!type.IsContiguous()) attrs["strides"] = type.strides();
  KILN_ASSIGN_OR_RETURN(Node * node, AddNode("Parameter", name, {}, attrs));
  return node->output(0);
}

absl::StatusOr<Value> Graph::AddConstant(absl::string_view name, HostTensor data) {
  auto def = registry_->Find("Constant");
  if (!def.ok()) return def.status();
  const int id = next_id_;
  std::string node_name = name.empty() ? absl::StrCat("Constant_", id) : std::string(name);
  if (by_name_.count(node_name)) {
    return absl::InvalidArgumentError(
        absl::StrCat(NodeContext(node_name, "Constant"), ": name already used in the graph"));
  }
  auto node = std::make_unique<Node>();
  node->id_ = id;
  node->def_ = *def;
  node->name_ = std::move(node_name);
  node->attrs_ = {
      {"dtype", std::string(DataTypeName(data.type().dtype()))},
      {"shape", data.type().dims()},
      {"strides", data.type().IsContiguous() ? std::vector<int64_t>{} : data.type().strides()}};
  node->output_types_ = {data.type()};
  node->constant_ = std::make_shared<const HostTensor>(std::move(data));
  ++next_id_;
  return Insert(std::move(node))->output(0);
}

absl::Status Graph::AddOutput(absl::string_view name, Value value) {
  for (const GraphOutput& o : outputs_) {
    if (o.name == name) {
      return absl::InvalidArgumentError(absl::StrCat("graph output '", name, "' added twice"));
    }
  }
  if (value.node == nullptr || FindNode(value.node->name()) != value.node || value.index < 0 ||
      value.index >= value.node->num_outputs()) {
    return absl::InvalidArgumentError(
        absl::StrCat("graph output '", name, "' is not a value of this graph"));
  }
  outputs_.push_back({std::string(name), value});
  return absl::OkStatus();
}

std::vector<Node*> Graph::nodes() const {
  std::vector<Node*> out;
  for (const auto& n : nodes_) out.push_back(n.get());
  return out;
}

std::vector<Node*> Graph::Parameters() const {
  std::vector<Node*> out;
  for (const auto& n : nodes_) {
    if (n->kind() == OpKind::kParameter) out.push_back(n.get());
  }
  return out;
}

Node* Graph::FindNode(absl::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

absl::StatusOr<std::vector<Node*>> Graph::TopologicalOrder() const {
  std::map<const Node*, int> pending;
  std::map<const Node*, std::vector<Node*>> users;
  for (const auto& n : nodes_) {
    std::set<const Node*> producers;
    for (const Value& v : n->inputs_) producers.insert(v.node);
    pending[n.get()] = static_cast<int>(producers.size());
    for (const Node* p : producers) users[p].push_back(n.get());
  }
  auto by_id = [](const Node* a, const Node* b) { return a->id() > b->id(); };
  std::priority_queue<Node*, std::vector<Node*>, decltype(by_id)> ready(by_id);
  // Nodes that read something but feed no node (they only write graph outputs: the Converts a
  // precision or layout pass adds in front of outputs, a training plan's gradients) go as soon
  // as they are ready. By creation id alone they would all wait for the end of the plan, since a
  // pass creates them after every other node: then no gradient would be written before backward
  // ends, and data-parallel training could not start reducing a bucket early. Running them early
  // also frees their input's buffer sooner.
  std::priority_queue<Node*, std::vector<Node*>, decltype(by_id)> ready_sinks(by_id);
  auto make_ready = [&](Node* n) {
    (!n->inputs_.empty() && users[n].empty() ? ready_sinks : ready).push(n);
  };
  for (const auto& n : nodes_) {
    if (pending[n.get()] == 0) make_ready(n.get());
  }
  std::vector<Node*> order;
  while (!ready.empty() || !ready_sinks.empty()) {
    auto& from = ready_sinks.empty() ? ready : ready_sinks;
    Node* n = from.top();
    from.pop();
    order.push_back(n);
    for (Node* u : users[n]) {
      if (--pending[u] == 0) make_ready(u);
    }
  }
  if (order.size() != nodes_.size()) {
    for (const auto& n : nodes_) {
      if (pending[n.get()] > 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            NodeContext(n->name(), n->op()), ": the graph has a cycle through this node"));
      }
    }
  }
  return order;
}

absl::Status Graph::ReplaceAllUsesWith(Value from, Value to) {
  if (from.type() != to.type()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ReplaceAllUsesWith: '", from.node->name(), "' output ", from.index,
                     " has type ", from.type().ToString(), " but '", to.node->name(), "' output ",
                     to.index, " has ", to.type().ToString()));
  }
  for (auto& n : nodes_) {
    if (n.get() == to.node) continue;  // The replacement may itself read `from`.
    for (Value& v : n->inputs_) {
      if (v == from) v = to;
    }
  }
  for (GraphOutput& o : outputs_) {
    if (o.value == from) o.value = to;
  }
  return absl::OkStatus();
}

int Graph::RemoveDeadNodes() {
  std::set<const Node*> live;
  std::vector<const Node*> stack;
  for (const GraphOutput& o : outputs_) stack.push_back(o.value.node);
  for (const auto& n : nodes_) {
    if (n->kind() == OpKind::kParameter) stack.push_back(n.get());
  }
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (!live.insert(n).second) continue;
    for (const Value& v : n->inputs_) stack.push_back(v.node);
  }
  const size_t before = nodes_.size();
  std::vector<std::unique_ptr<Node>> kept;
  for (auto& n : nodes_) {
    if (live.count(n.get())) {
      kept.push_back(std::move(n));
    } else {
      by_name_.erase(n->name());
    }
  }
  nodes_ = std::move(kept);
  return static_cast<int>(before - nodes_.size());
}

std::vector<std::pair<Node*, int>> Graph::Uses(Value value) const {
  std::vector<std::pair<Node*, int>> out;
  for (const auto& n : nodes_) {
    for (int i = 0; i < n->num_inputs(); ++i) {
      if (n->inputs_[i] == value) out.emplace_back(n.get(), i);
    }
  }
  return out;
}

absl::Status Graph::RenameNode(Node* node, absl::string_view name) {
  if (node->name_ == name) return absl::OkStatus();
  if (name.empty() || by_name_.count(name)) {
    return absl::AlreadyExistsError(absl::StrCat("renaming ", NodeContext(node->name_, node->op()),
                                                 " to '", name, "': name already used or empty"));
  }
  by_name_.erase(node->name_);
  node->name_ = std::string(name);
  by_name_[node->name_] = node;
  return absl::OkStatus();
}

void Graph::SetOrigins(Node* node, std::vector<std::string> origins) {
  node->origins_ = std::move(origins);
}

absl::Status Graph::SetOutputStrides(Node* node, int index, const std::vector<int64_t>& strides) {
  const std::string context = NodeContext(node->name(), node->op());
  if (index < 0 || index >= node->num_outputs() || node->kind() == OpKind::kConstant ||
      node->kind() == OpKind::kParameter) {
    return absl::InvalidArgumentError(
        absl::StrCat(context, ": output ", index, " cannot take other strides"));
  }
  const TensorType& old = node->output_types_[index];
  auto t = TensorType::CreateStrided(old.dtype(), old.dims(), strides);
  if (!t.ok()) return Annotate(t.status(), absl::StrCat(context, ": output ", index));
  node->output_types_[index] = *t;
  if (!node->HasStridedOutput(index)) node->strided_outputs_.push_back(index);
  // Readers' types follow their inputs' (an element-wise op writes channels-last after a
  // channels-last input); re-infer them so the graph stays verifiable.
  std::vector<Node*> stack;
  for (const auto& [reader, input] : Uses(node->output(index))) stack.push_back(reader);
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    std::vector<TensorType> inputs;
    for (const Value& v : n->inputs_) inputs.push_back(v.type());
    auto types = InferNodeTypes(*n->def_, inputs, n->attrs_);
    if (!types.ok()) return Annotate(types.status(), NodeContext(n->name(), n->op()));
    for (int i = 0; i < n->num_outputs(); ++i) {
      if (n->HasStridedOutput(i)) continue;  // kept as a pass set it
      if ((*types)[i] == n->output_types_[i]) continue;
      n->output_types_[i] = (*types)[i];
      for (const auto& [reader, input] : Uses(n->output(i))) stack.push_back(reader);
    }
  }
  return absl::OkStatus();
}

std::unique_ptr<Graph> Graph::Clone() const {
  auto copy = std::make_unique<Graph>(registry_);
  std::map<const Node*, Node*> mapped;
  for (const auto& n : nodes_) {
    auto c = std::make_unique<Node>(*n);
    mapped[n.get()] = c.get();
    copy->Insert(std::move(c));
  }
  for (auto& n : copy->nodes_) {
    for (Value& v : n->inputs_) v.node = mapped[v.node];
  }
  for (const GraphOutput& o : outputs_) {
    copy->outputs_.push_back({o.name, Value{mapped[o.value.node], o.value.index}});
  }
  copy->next_id_ = next_id_;
  return copy;
}

}  // namespace kiln
