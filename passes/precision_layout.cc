#include "passes/precision_layout.h"

#include <map>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ir/host_tensor.h"

namespace kiln {

namespace {

// What a port wants of the value it reads: a dtype and an order, or to be left alone.
struct Want {
  bool keep = false;  // labels, non-float data: as they are
  DataType dtype = DataType::kF32;
  bool channels_last = false;
};

// Ports that read class labels, similarity flags or table indices: numbers, never rounded to 16
// bits.
// The per-iteration seed offset of a training Dropout is a count: also never rounded.
bool IsLabelPort(OpKind op, int port) {
  switch (op) {
    case OpKind::kSoftmaxWithLoss:
    case OpKind::kAccuracy:
    case OpKind::kSoftmaxWithLossGradient:
    case OpKind::kDropout:
    case OpKind::kDropoutGradient:
      return port == 1;
    case OpKind::kContrastiveLoss:
    case OpKind::kContrastiveLossGradient:
      return port == 2;
    case OpKind::kEmbed:  // row indices
    case OpKind::kEmbedGradient:
      return port == 0;
    case OpKind::kCTCLoss:  // labels, input lengths, label lengths
    case OpKind::kCTCLossGradient:
      return port >= 1;
    default:
      return false;
  }
}

// Weight ports whose parameters the primitives read as f32 whatever the data's dtype (and which
// are small, so keeping them f32 costs nothing).
bool IsF32ParameterPort(const Node& node, int port) {
  switch (node.kind()) {
    case OpKind::kBatchNorm:
    case OpKind::kAffineBatchNorm:
    case OpKind::kScale:
      return port >= 1;
    case OpKind::kBatchNormGradient:
      return port >= 2;
    case OpKind::kAffineBatchNormGradient:
      return port == 2;
    case OpKind::kPReLU:
    case OpKind::kPReLUGradient:
    case OpKind::kBias:
      return port == 1;
    default:
      return false;
  }
}

// Ports that read the batch statistics an AffineBatchNorm forward saved: f32 by definition (the
// forward's shape inference makes them so), read by the backward primitive as they are.
bool IsSavedStatisticsPort(const std::string& op, int port) {
  return op == "AffineBatchNormGradient" && (port == 3 || port == 4);
}

Want WantFor(const Node& node, int port, const Value& source, const PlanTypes& types) {
  Want w;
  const TensorType& t = source.type();
  if (!IsFloatingPoint(t.dtype()) || IsLabelPort(node.kind(), port) ||
      IsSavedStatisticsPort(node.op(), port)) {
    w.keep = true;
    return w;
  }
  // Weights, and in a training graph the parameters bound as graph inputs, stay f32 there.
  const bool is_constant =
      source.node->kind() == OpKind::kConstant || source.node->kind() == OpKind::kParameter;
  if (is_constant && IsF32ParameterPort(node, port)) {
    w.dtype = DataType::kF32;
    w.channels_last = t.IsChannelsLast() && !t.IsContiguous();
    return w;
  }
  w.dtype = types.dtype;
  const bool spatial = t.rank() == 4 || t.rank() == 5;
  // Filters follow the data's order (KRSC beside NHWC) so the convolution reads both without a
  // copy; other constants and 4-d data go channels-last with the plan.
  w.channels_last = types.channels_last && spatial;
  return w;
}

bool Matches(const TensorType& t, const Want& w) {
  if (w.keep) return true;
  if (t.dtype() != w.dtype) return false;
  if (t.rank() != 4 && t.rank() != 5) return true;
  return w.channels_last ? (t.IsChannelsLast() || t.num_elements() <= 1)
                         : (t.IsContiguous() || t.num_elements() <= 1);
}

absl::StatusOr<HostTensor> ConvertConstant(const HostTensor& data, const Want& w) {
  KILN_ASSIGN_OR_RETURN(
      TensorType type,
      TensorType::CreateWithLayout(w.dtype, data.type().dims(),
                                   w.channels_last ? Layout::kChannelsLast : Layout::kRowMajor));
  HostTensor out(type);
  for (int64_t i = 0; i < type.num_elements(); ++i) out.SetFloat(i, data.GetFloat(i));
  return out;
}

class Rewriter {
 public:
  Rewriter(const Graph& source, const PlanTypes& types)
      : types_(types), out_(std::make_unique<Graph>(&source.registry())) {}

  absl::StatusOr<std::unique_ptr<Graph>> Run(const Graph& source) {
    KILN_ASSIGN_OR_RETURN(std::vector<Node*> order, source.TopologicalOrder());
    for (Node* n : order) {
      if (n->kind() == OpKind::kParameter) {
        KILN_ASSIGN_OR_RETURN(Value v, out_->AddParameter(n->name(), n->output_types()[0]));
        plain_[n->output(0)] = v;
      } else if (n->kind() == OpKind::kConstant) {
        constants_[n->output(0)] = n;  // converted per use, on demand
      } else {
        std::vector<Value> inputs;
        for (int i = 0; i < n->num_inputs(); ++i) {
          const Value& in = n->input(i);
          KILN_ASSIGN_OR_RETURN(Value v, Get(in, WantFor(*n, i, in, types_)));
          inputs.push_back(v);
        }
        KILN_ASSIGN_OR_RETURN(Node * added, out_->AddNode(n->op(), n->name(), inputs, n->attrs()));
        out_->SetOrigins(added, n->origins());  // what earlier rewrites fused into it
        for (int k = 0; k < n->num_outputs(); ++k) plain_[n->output(k)] = added->output(k);
      }
    }
    for (const GraphOutput& o : source.outputs()) {
      const TensorType& original = o.value.type();
      Want w;
      w.keep = !IsFloatingPoint(original.dtype());
      w.dtype = original.dtype();
      w.channels_last = original.IsChannelsLast() && !original.IsContiguous();
      KILN_ASSIGN_OR_RETURN(Value v, Get(o.value, w, absl::StrCat(o.name, "/to_output")));
      KILN_RETURN_IF_ERROR(out_->AddOutput(o.name, v));
    }
    return std::move(out_);
  }

 private:
  // `source`'s counterpart in the new graph in the wanted dtype and order, converting once per
  // (value, want) and sharing the result between all readers.
  absl::StatusOr<Value> Get(const Value& source, const Want& w, std::string name = "") {
    const auto key = std::make_tuple(source, w.keep, w.dtype, w.channels_last);
    auto done = converted_.find(key);
    if (done != converted_.end()) return done->second;
    Value result;
    auto constant = constants_.find(source);
    if (constant != constants_.end()) {
      const Node* c = constant->second;
      const HostTensor& data = *c->constant();
      HostTensor converted = data;
      if (!Matches(data.type(), w)) {
        KILN_ASSIGN_OR_RETURN(converted, ConvertConstant(data, w));
      }
      std::string constant_name = c->name();
      if (used_constant_names_.count(constant_name)) {
        constant_name = absl::StrCat(c->name(), "/", DataTypeName(w.dtype),
                                     w.channels_last ? "_channels_last" : "");
      }
      used_constant_names_.insert(constant_name);
      KILN_ASSIGN_OR_RETURN(result, out_->AddConstant(constant_name, converted));
    } else {
      auto plain = plain_.find(source);
      if (plain == plain_.end()) {
        return absl::InternalError("precision/layout: a value is read before it is made");
      }
      result = plain->second;
      if (!Matches(result.type(), w)) {
        AttrMap attrs;
        attrs["dtype"] = std::string(DataTypeName(w.dtype));
        const int rank = result.type().rank();
        attrs["layout"] = std::string(
            rank == 4 || rank == 5 ? (w.channels_last ? "channels_last" : "row_major") : "");
        if (name.empty()) {
          name = absl::StrCat(source.node->name(),
                              source.index > 0 ? absl::StrCat(":", source.index) : std::string(),
                              "/to_", DataTypeName(w.dtype), w.channels_last ? "_nhwc" : "");
        }
        if (out_->FindNode(name) != nullptr) name.clear();  // an automatic name then
        KILN_ASSIGN_OR_RETURN(Node * convert, out_->AddNode("Convert", name, {result}, attrs));
        result = convert->output(0);
      }
    }
    converted_[key] = result;
    return result;
  }

  PlanTypes types_;
  std::unique_ptr<Graph> out_;
  std::map<Value, Value> plain_;            // every non-constant value, as produced
  std::map<Value, const Node*> constants_;  // source constants by value
  std::map<std::tuple<Value, bool, DataType, bool>, Value> converted_;
  std::set<std::string> used_constant_names_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Graph>> ApplyPrecisionAndLayout(const Graph& graph,
                                                               const PlanTypes& types) {
  if (!IsFloatingPoint(types.dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat("precision: ", DataTypeName(types.dtype), " is not a float type"));
  }
  Rewriter rewriter(graph, types);
  absl::StatusOr<std::unique_ptr<Graph>> result = rewriter.Run(graph);
  if (!result.ok()) return Annotate(result.status(), "precision/layout");
  return result;
}

}  // namespace kiln
