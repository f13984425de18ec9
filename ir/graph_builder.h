// GraphBuilder: the C++ way to write a network. Every call adds nodes through Graph::AddNode, so
// shape inference runs at once and a bad shape or attribute is an InvalidArgument naming the
// node and the rule, returned from the call that caused it.
#ifndef KILN_IR_GRAPH_BUILDER_H_
#define KILN_IR_GRAPH_BUILDER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/graph.h"

namespace kiln {

struct ConvolutionOptions {
  std::vector<int64_t> stride = {1};
  std::vector<int64_t> pad = {0};
  std::vector<int64_t> dilation = {1};
  int64_t group = 1;
};

struct PoolingOptions {
  std::string mode = "max";  // "max", "avg", "avg_exclude_pad"
  std::vector<int64_t> kernel;
  std::vector<int64_t> stride = {1};
  std::vector<int64_t> pad = {0};
  bool global = false;
  bool ceil_rounding = false;  // Caffe's default rounding is ceil; cuDNN's is floor.
};

struct LrnOptions {
  int64_t local_size = 5;
  double alpha = 1.0;
  double beta = 0.75;
  double k = 1.0;
  bool within_channel = false;
};

class GraphBuilder {
 public:
  // Builds into a new graph over `registry` (which must outlive the graph).
  explicit GraphBuilder(const OpRegistry* registry);
  // Adds to an existing graph (used by passes and gradient functions).
  explicit GraphBuilder(Graph* graph);

  Graph& graph() { return *graph_; }
  // Hands over the graph built so far; the builder must not be used afterwards.
  std::unique_ptr<Graph> Finish();

  // Any registered op; the general form the named helpers below call.
  absl::StatusOr<std::vector<Value>> Op(absl::string_view op, std::vector<Value> inputs,
                                        const AttrMap& attrs = {}, absl::string_view name = "");
  // Single-output convenience for Op().
  absl::StatusOr<Value> Op1(absl::string_view op, std::vector<Value> inputs,
                            const AttrMap& attrs = {}, absl::string_view name = "");

  absl::StatusOr<Value> Input(absl::string_view name, const TensorType& type);
  absl::StatusOr<Value> Constant(absl::string_view name, HostTensor data);
  absl::Status Output(absl::string_view name, Value value);

  // Convolution with filter (and bias unless it is null) already added as values.
  absl::StatusOr<Value> Convolution(Value x, Value filter, const Value* bias,
                                    const ConvolutionOptions& options, absl::string_view name = "");
  absl::StatusOr<Value> Pooling(Value x, const PoolingOptions& options,
                                absl::string_view name = "");
  absl::StatusOr<Value> Lrn(Value x, const LrnOptions& options, absl::string_view name = "");
  absl::StatusOr<Value> Relu(Value x, double negative_slope = 0.0, absl::string_view name = "");
  absl::StatusOr<Value> InnerProduct(Value x, Value weight, const Value* bias,
                                     absl::string_view name = "");
  absl::StatusOr<Value> Softmax(Value x, int64_t axis = 1, absl::string_view name = "");

 private:
  std::unique_ptr<Graph> owned_;
  Graph* graph_;
};

}  // namespace kiln

#endif  // KILN_IR_GRAPH_BUILDER_H_
