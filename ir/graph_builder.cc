#include "ir/graph_builder.h"

#include "base/status_macros.h"

namespace kiln {

GraphBuilder::GraphBuilder(const OpRegistry* registry)
    : owned_(std::make_unique<Graph>(registry)), graph_(owned_.get()) {}

GraphBuilder::GraphBuilder(Graph* graph) : graph_(graph) {}

std::unique_ptr<Graph> GraphBuilder::Finish() { return std::move(owned_); }

absl::StatusOr<std::vector<Value>> GraphBuilder::Op(absl::string_view op, std::vector<Value> inputs,
                                                    const AttrMap& attrs, absl::string_view name) {
  KILN_ASSIGN_OR_RETURN(Node * node, graph_->AddNode(op, name, std::move(inputs), attrs));
  std::vector<Value> outputs;
  for (int i = 0; i < node->num_outputs(); ++i) outputs.push_back(node->output(i));
  return outputs;
}

absl::StatusOr<Value> GraphBuilder::Op1(absl::string_view op, std::vector<Value> inputs,
                                        const AttrMap& attrs, absl::string_view name) {
  KILN_ASSIGN_OR_RETURN(std::vector<Value> outputs, Op(op, std::move(inputs), attrs, name));
  return outputs[0];
}

absl::StatusOr<Value> GraphBuilder::Input(absl::string_view name, const TensorType& type) {
  return graph_->AddParameter(name, type);
}

absl::StatusOr<Value> GraphBuilder::Constant(absl::string_view name, HostTensor data) {
  return graph_->AddConstant(name, std::move(data));
}

absl::Status GraphBuilder::Output(absl::string_view name, Value value) {
  return graph_->AddOutput(name, value);
}

absl::StatusOr<Value> GraphBuilder::Convolution(Value x, Value filter, const Value* bias,
                                                const ConvolutionOptions& o,
                                                absl::string_view name) {
  std::vector<Value> inputs = {x, filter};
  if (bias != nullptr) inputs.push_back(*bias);
  return Op1("Convolution", inputs,
             {{"stride", o.stride}, {"pad", o.pad}, {"dilation", o.dilation}, {"group", o.group}},
             name);
}

absl::StatusOr<Value> GraphBuilder::Pooling(Value x, const PoolingOptions& o,
                                            absl::string_view name) {
  return Op1("Pooling", {x},
             {{"mode", o.mode},
              {"kernel", o.kernel},
              {"stride", o.stride},
              {"pad", o.pad},
              {"global", o.global},
              {"rounding", std::string(o.ceil_rounding ? "ceil" : "floor")}},
             name);
}

absl::StatusOr<Value> GraphBuilder::Lrn(Value x, const LrnOptions& o, absl::string_view name) {
  return Op1("LRN", {x},
             {{"local_size", o.local_size},
              {"alpha", o.alpha},
              {"beta", o.beta},
              {"k", o.k},
              {"region", std::string(o.within_channel ? "within_channel" : "across_channels")}},
             name);
}

absl::StatusOr<Value> GraphBuilder::Relu(Value x, double negative_slope, absl::string_view name) {
  return Op1("ReLU", {x}, {{"negative_slope", negative_slope}}, name);
}

absl::StatusOr<Value> GraphBuilder::InnerProduct(Value x, Value weight, const Value* bias,
                                                 absl::string_view name) {
  std::vector<Value> inputs = {x, weight};
  if (bias != nullptr) inputs.push_back(*bias);
  return Op1("InnerProduct", inputs, {}, name);
}

absl::StatusOr<Value> GraphBuilder::Softmax(Value x, int64_t axis, absl::string_view name) {
  return Op1("Softmax", {x}, {{"axis", axis}}, name);
}

}  // namespace kiln
