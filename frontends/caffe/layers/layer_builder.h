// The interface between the import driver (importer.cc) and the per-type layer converters
// (layer_converters.cc): a converter reads its layer and bottoms, asks for parameter blobs and
// adds nodes; the driver owns blob names, weights, fillers, sharing and bookkeeping.
#ifndef KILN_FRONTENDS_CAFFE_LAYERS_LAYER_BUILDER_H_
#define KILN_FRONTENDS_CAFFE_LAYERS_LAYER_BUILDER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "frontends/caffe/caffe.pb.h"
#include "ir/graph.h"

namespace kiln {

class LayerBuilder {
 public:
  virtual ~LayerBuilder() = default;

  virtual const caffe::LayerParameter& layer() const = 0;
  virtual const std::vector<Value>& bottoms() const = 0;
  virtual caffe::Phase phase() const = 0;
  // A seed for layers with randomness (Dropout), stable per layer name.
  virtual uint64_t seed() const = 0;

  // "import: layer 'name' (Type): " + what.
  virtual std::string Where() const = 0;
  absl::Status Invalid(absl::string_view what) const;
  absl::Status Unsupported(absl::string_view what) const;

  // Adds a node named after the layer (plus `suffix` when a layer makes several nodes).
  virtual absl::StatusOr<Node*> AddNode(absl::string_view op, absl::string_view suffix,
                                        std::vector<Value> inputs, const AttrMap& attrs) = 0;

  // Parameter blob `index` of the layer with Caffe shape `shape`, from the weights, the net file,
  // a shared param, or `filler`. `role` names it ("weight", "bias", "mean", ...). The Constant
  // gets `kiln_shape` when the op wants another shape of the same data (empty: same as Caffe's).
  virtual absl::StatusOr<Value> Param(int index, const std::vector<int64_t>& shape,
                                      const caffe::FillerParameter& filler, bool learnable,
                                      absl::string_view role,
                                      const std::vector<int64_t>& kiln_shape = {}) = 0;

  // Declares how many parameter blobs the layer has in total (checked against weights files).
  virtual void ExpectParams(int count) = 0;

  // The values of the layer's tops, in order.
  virtual void SetTops(std::vector<Value> tops) = 0;

  // For layers that become graph inputs: records the input; `dims` empty means the file does not
  // give the shape (the driver then uses the user's shape or reports `hint`).
  virtual absl::StatusOr<Value> AddInput(int top, const std::vector<int64_t>& dims,
                                         absl::string_view hint) = 0;

  // Whether recurrent layers carry their state between runs (CaffeImportOptions).
  virtual bool carry_recurrent_state() const = 0;
  // A state the layer carries from one run to the next, named `state` ("h", "c"): the graph
  // input holding its value at the start of the run. CarryOut names its value at the end (a
  // graph output); the pair goes to CaffeModel::carried_states.
  virtual absl::StatusOr<Value> CarriedStateInput(absl::string_view state,
                                                  const TensorType& type) = 0;
  virtual absl::Status CarryOut(absl::string_view state, const Value& next) = 0;
};

using LayerConverter = absl::Status (*)(LayerBuilder& builder);

// InvalidArgument unless the layer has min..max bottoms (tops); max -1 means no upper bound.
absl::Status NeedBottoms(LayerBuilder& b, int min, int max);
absl::Status NeedTops(LayerBuilder& b, int min, int max);

// The converter for a V2 type string, or null when Kiln does not support the type.
LayerConverter FindLayerConverter(const std::string& type);

// True for types whose top 0 carries loss weight 1 by default.
bool IsLossLayerType(const std::string& type);

}  // namespace kiln

#endif  // KILN_FRONTENDS_CAFFE_LAYERS_LAYER_BUILDER_H_
