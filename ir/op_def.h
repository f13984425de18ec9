// OpDef: the semantics of one op (ports, attributes with defaults, shape inference, the gradient
// hook). OpDefs describe; kernels (kernels/) implement. This header never includes kernels/.
#ifndef KILN_IR_OP_DEF_H_
#define KILN_IR_OP_DEF_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/attribute.h"
#include "ir/op_kind.h"
#include "ir/tensor_type.h"

namespace kiln {

class Node;
class GraphBuilder;
struct Value;

// One declared attribute. No default means the attribute is required.
struct AttrDef {
  std::string name;
  AttrKind kind;
  std::optional<AttrValue> default_value;
};

// What shape inference sees: the input types and the attributes, already checked against the
// AttrDefs and completed with defaults, so lookups of declared attributes cannot fail.
class InferContext {
 public:
  InferContext(const std::vector<TensorType>& inputs, const AttrMap& attrs)
      : inputs_(inputs), attrs_(attrs) {}
  const std::vector<TensorType>& inputs() const { return inputs_; }
  const TensorType& input(int i) const { return inputs_[i]; }
  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  const AttrMap& attrs() const { return attrs_; }

  int64_t GetInt(const std::string& name) const;
  double GetFloat(const std::string& name) const;
  bool GetBool(const std::string& name) const;
  const std::string& GetString(const std::string& name) const;
  const std::vector<int64_t>& GetInts(const std::string& name) const;
  const std::vector<double>& GetFloats(const std::string& name) const;

 private:
  const std::vector<TensorType>& inputs_;
  const AttrMap& attrs_;
};

// Returns the output types, one per output; the count may depend on attributes (Slice, Split).
using InferTypesFn = std::function<absl::StatusOr<std::vector<TensorType>>(const InferContext&)>;

struct GradientRequest;  // ops/gradients/gradient_request.h

// Builds the gradients of a node's inputs from the gradients of its outputs, as graph nodes
// added through `builder`: one Value per input, a null Value (node == nullptr) for an input that
// gets none. Set for every differentiable op by ops/gradients/ (OpRegistry::SetGradient).
using GradientFn = std::function<absl::StatusOr<std::vector<Value>>(
    GraphBuilder& builder, const GradientRequest& request)>;

struct OpDef {
  std::string name;               // "Convolution"
  OpKind kind = OpKind::kCustom;  // set from `name` by OpRegistry::Register
  std::string family;             // the ops/ file that defines it: "convolution", "pooling", ...
  std::vector<std::string> input_names;  // Port names; optional ports come last.
  int min_inputs = 1;
  int max_inputs = 1;  // -1: variadic.
  std::vector<AttrDef> attrs;
  InferTypesFn infer_types;
  // True when gradients flow through this op (its `gradient` builds them).
  bool differentiable = false;
  GradientFn gradient;
  // Which inputs may hold learnable weights (Convolution's filter and bias, ...).
  std::vector<int> weight_inputs;
  // Inputs that only give their type (Crop's reference): no kernel reads their values, so the
  // memory planner does not keep their bytes alive for this node.
  std::vector<int> shape_only_inputs;
  std::string summary;  // One line shown by `kiln ops`.

  const AttrDef* FindAttr(absl::string_view attr_name) const;
};

// A differentiable one-input ("x") OpDef; callers adjust ports and weight inputs afterwards.
// Most families start from this.
OpDef MakeOpDef(std::string name, std::string family, std::vector<AttrDef> attrs,
                InferTypesFn infer, std::string summary);

// Checks `attrs` against `def` (unknown names, wrong kinds, missing required) and returns the
// map completed with defaults and coerced to the declared kinds.
absl::StatusOr<AttrMap> NormalizeAttrs(const OpDef& def, const AttrMap& attrs);

// Runs the full check for one node: input count, attributes, then InferTypes. Errors are
// InvalidArgument and name the op and rule; callers add the node name.
absl::StatusOr<std::vector<TensorType>> InferNodeTypes(const OpDef& def,
                                                       const std::vector<TensorType>& inputs,
                                                       const AttrMap& normalized_attrs);

}  // namespace kiln

#endif  // KILN_IR_OP_DEF_H_
