// A Caffe net imported into Kiln: the graph, plus what the graph does not say and a Caffe user
// needs (layer names, blob names, parameter specs for training, loss weights, data inputs).
#ifndef KILN_FRONTENDS_CAFFE_CAFFE_MODEL_H_
#define KILN_FRONTENDS_CAFFE_CAFFE_MODEL_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "frontends/caffe/caffe.pb.h"
#include "ir/graph.h"
#include "ir/op_registry.h"

namespace kiln {

// Where a layer's parameter blobs come from when the net has no weights for it.
enum class ParamInit {
  kZeros,    // all zero: for inspecting structure (`kiln info`), no random numbers drawn.
  kFillers,  // the layer's fillers, seeded by CaffeImportOptions::fill_seed.
};

struct CaffeImportOptions {
  caffe::Phase phase = caffe::TEST;
  int level = 0;
  std::vector<std::string> stages;
  // Shapes for graph inputs, by top name. They override shapes the file gives and are required
  // for inputs whose shape the file does not fully imply (a Data layer's channels and size).
  std::map<std::string, std::vector<int64_t>> input_shapes;
  // Shapes used only for inputs whose shape the file does not give (e.g. taken from the arrays
  // the user feeds); a file's own shape is then checked against the array instead.
  std::map<std::string, std::vector<int64_t>> fallback_input_shapes;
  // Trained weights (a .caffemodel's NetParameter, any format generation), matched to layers by
  // name as Caffe does. Blobs inside the net file itself are used when this has none for a layer.
  const caffe::NetParameter* weights = nullptr;
  ParamInit init = ParamInit::kFillers;
  uint64_t fill_seed = 1;
  // Largest parameter blob accepted, in elements. Caffe cannot store more than 2^31 values in
  // one blob; a smaller cap keeps untrusted files (and fuzzers) from exhausting memory.
  int64_t max_param_elements = int64_t{1} << 31;
  // Caffe's LSTM and RNN layers without expose_hidden keep their final h (and c) and start the
  // next forward from it (where cont is 1 at the first step). With this set, each such layer's
  // initial state becomes a graph input and its final state a graph output, listed in
  // CaffeModel::carried_states for the caller to carry from run to run (the trainer does).
  // Unset, every run starts from zeros, which is Caffe's first forward.
  bool carry_recurrent_state = false;
};

// One parameter blob of one layer.
struct CaffeParam {
  std::string layer;
  int index = 0;               // position in the layer's blobs
  std::string node;            // the Constant node holding it
  std::vector<int64_t> shape;  // Caffe's blob shape (what a .caffemodel stores)
  bool learnable = false;      // weights/biases (not BatchNorm statistics)
  // From the layer's ParamSpec (defaults when absent).
  float lr_mult = 1.0f;
  float decay_mult = 1.0f;
  std::string share_name;  // non-empty: shared with every param of that name
  int shared_with = -1;    // index of the first param of that name, or -1
  std::string source;      // "weights", "net file", "filler <type>", "zeros", "shared"
};

struct CaffeTop {
  std::string blob;
  Value value;
  float loss_weight = 0.0f;
};

struct CaffeLayer {
  std::string name;
  std::string type;
  std::vector<std::string> nodes;  // the Kiln nodes made for it (none for Input/Data/Silence)
  std::vector<CaffeTop> tops;
  std::vector<int> params;      // indices into CaffeModel::params
  int64_t learnable_count = 0;  // elements in its learnable blobs
};

// A graph input made from an Input or data layer.
struct CaffeInput {
  std::string name;  // the top blob: what the user binds
  std::string node;  // the graph Parameter (the blob name unless that was taken)
  std::string layer;
  std::string layer_type;
  std::vector<int64_t> dims;
  std::string shape_from;                    // "file" or "user"
  caffe::TransformationParameter transform;  // preprocessing Caffe would apply (data layers)
};

struct CaffeModel {
  std::unique_ptr<Graph> graph;
  caffe::NetParameter net;         // upgraded to V2 and filtered for the chosen state
  std::vector<CaffeLayer> layers;  // one per kept layer, in file order
  std::vector<CaffeParam> params;
  std::vector<CaffeInput> inputs;
  std::vector<std::string> outputs;  // blobs no layer consumes, in production order
  // With CaffeImportOptions::carry_recurrent_state: (graph input, graph output) per carried
  // state, in layer order (h, then c): the output's value is the input's for the next run.
  std::vector<std::pair<std::string, std::string>> carried_states;

  // Elements in all learnable blobs, counted per layer (a shared blob counts in each layer).
  int64_t LearnableParams() const;
  const CaffeLayer* FindLayer(const std::string& name) const;
};

// Upgrades `file` (any generation), applies include/exclude rules for the options' state and
// builds the graph. Errors name the layer: "import: layer 'conv2' (Convolution): ...".
absl::StatusOr<CaffeModel> ImportCaffeNet(const caffe::NetParameter& file,
                                          const CaffeImportOptions& options,
                                          const OpRegistry& registry);

// The HostTensor of a parameter, from its Constant node.
const HostTensor& ParamTensor(const CaffeModel& model, const CaffeParam& param);

}  // namespace kiln

#endif  // KILN_FRONTENDS_CAFFE_CAFFE_MODEL_H_
