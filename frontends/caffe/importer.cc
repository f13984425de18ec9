// The import driver: upgrade, filter, then walk the layers in file order keeping Caffe's blob
// namespace (name -> current value; in-place tops make a fresh value under the same name),
// supplying parameter blobs (weights file, net file, shared, filler) and recording what Caffe
// users need beyond the graph.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "frontends/caffe/blob_convert.h"
#include "frontends/caffe/caffe_model.h"
#include "frontends/caffe/filler.h"
#include "frontends/caffe/layers/layer_builder.h"
#include "frontends/caffe/net_state.h"
#include "frontends/caffe/upgrade.h"
#include "ops/shape_util.h"

namespace kiln {

namespace {

using google::protobuf::FieldDescriptor;

// The `*_param` sub-messages each supported type may carry. Any other one that is set is an
// error naming it, so no setting in a file is silently dropped.
const std::map<std::string, std::set<std::string>>& AllowedParams() {
  static const auto* const kAllowed = new std::map<std::string, std::set<std::string>>{
      {"AbsVal", {}},
      {"Accuracy", {"accuracy_param"}},
      {"ArgMax", {"argmax_param"}},
      {"BatchNorm", {"batch_norm_param"}},
      {"Bias", {"bias_param"}},
      {"CTCLoss", {"ctc_loss_param"}},
      {"Concat", {"concat_param"}},
      {"ContrastiveLoss", {"contrastive_loss_param", "loss_param"}},
      {"Convolution", {"convolution_param"}},
      {"ConvolutionDepthwise", {"convolution_param"}},
      {"Crop", {"crop_param"}},
      {"Data", {"data_param", "transform_param"}},
      {"Deconvolution", {"convolution_param"}},
      {"Dropout", {"dropout_param"}},
      {"ELU", {"elu_param"}},
      {"Eltwise", {"eltwise_param"}},
      {"Embed", {"embed_param"}},
      {"EuclideanLoss", {"loss_param"}},
      {"Flatten", {"flatten_param"}},
      {"HDF5Data", {"hdf5_data_param"}},
      {"ImageData", {"image_data_param", "transform_param"}},
      {"InnerProduct", {"inner_product_param"}},
      {"Input", {"input_param"}},
      {"LRN", {"lrn_param"}},
      {"LSTM", {"recurrent_param"}},
      {"LSTMUnit", {}},
      {"MemoryData", {"memory_data_param", "transform_param"}},
      {"PReLU", {"prelu_param"}},
      {"Pooling", {"pooling_param"}},
      {"Power", {"power_param"}},
      {"RNN", {"recurrent_param"}},
      {"ReLU", {"relu_param"}},
      {"Reduction", {"reduction_param"}},
      {"Reshape", {"reshape_param"}},
      {"Scale", {"scale_param"}},
      {"ShuffleChannel", {"shuffle_channel_param"}},
      {"Sigmoid", {"sigmoid_param"}},
      {"SigmoidCrossEntropyLoss", {"loss_param"}},
      {"Silence", {}},
      {"Slice", {"slice_param"}},
      {"Softmax", {"softmax_param"}},
      {"SoftmaxWithLoss", {"softmax_param", "loss_param"}},
      {"Split", {}},
      {"TanH", {"tanh_param"}},
      {"Tile", {"tile_param"}},
  };
  return *kAllowed;
}

absl::Status CheckLayerFields(const caffe::LayerParameter& layer, const std::string& where) {
  auto allowed = AllowedParams().find(layer.type());
  if (allowed == AllowedParams().end()) {
    return absl::UnimplementedError(
        absl::StrCat(where, "layer type \"", layer.type(), "\" is not supported"));
  }
  std::vector<const FieldDescriptor*> fields;
  layer.GetReflection()->ListFields(layer, &fields);
  for (const FieldDescriptor* field : fields) {
    const std::string& name = field->name();
    const bool is_param = field->type() == FieldDescriptor::TYPE_MESSAGE && !field->is_repeated() &&
                          name.size() > 6 && name.compare(name.size() - 6, 6, "_param") == 0;
    if (is_param && allowed->second.count(name) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "field '", name, "' does not apply to a ", layer.type(), " layer"));
    }
  }
  if (layer.propagate_down_size() > 0 && layer.propagate_down_size() != layer.bottom_size()) {
    return absl::InvalidArgumentError(absl::StrCat(where, layer.propagate_down_size(),
                                                   " propagate_down values for ",
                                                   layer.bottom_size(), " bottoms"));
  }
  return absl::OkStatus();
}

class Importer;

class Builder : public LayerBuilder {
 public:
  Builder(Importer& importer, const caffe::LayerParameter& layer, std::vector<Value> bottoms,
          CaffeLayer& record)
      : importer_(importer), layer_(layer), bottoms_(std::move(bottoms)), record_(record) {}

  const caffe::LayerParameter& layer() const override { return layer_; }
  const std::vector<Value>& bottoms() const override { return bottoms_; }
  caffe::Phase phase() const override;
  uint64_t seed() const override;
  std::string Where() const override {
    return absl::StrCat("import: layer '", layer_.name(), "' (", layer_.type(), "): ");
  }
  absl::StatusOr<Node*> AddNode(absl::string_view op, absl::string_view suffix,
                                std::vector<Value> inputs, const AttrMap& attrs) override;
  absl::StatusOr<Value> Param(int index, const std::vector<int64_t>& shape,
                              const caffe::FillerParameter& filler, bool learnable,
                              absl::string_view role,
                              const std::vector<int64_t>& kiln_shape) override;
  void ExpectParams(int count) override { expected_params_ = count; }
  void SetTops(std::vector<Value> tops) override {
    tops_ = std::move(tops);
    tops_set_ = true;
  }
  absl::StatusOr<Value> AddInput(int top, const std::vector<int64_t>& dims,
                                 absl::string_view hint) override;
  bool carry_recurrent_state() const override;
  absl::StatusOr<Value> CarriedStateInput(absl::string_view state, const TensorType& type) override;
  absl::Status CarryOut(absl::string_view state, const Value& next) override;

  int expected_params() const { return expected_params_; }
  bool tops_set() const { return tops_set_; }
  const std::vector<Value>& tops() const { return tops_; }

 private:
  Importer& importer_;
  const caffe::LayerParameter& layer_;
  std::vector<Value> bottoms_;
  CaffeLayer& record_;
  int expected_params_ = 0;
  bool tops_set_ = false;
  std::vector<Value> tops_;
};

class Importer {
 public:
  Importer(const CaffeImportOptions& options, const OpRegistry& registry)
      : options_(options), registry_(registry) {}

  absl::StatusOr<CaffeModel> Run(const caffe::NetParameter& file) {
    caffe::NetParameter net = file;
    KILN_RETURN_IF_ERROR(UpgradeNet(net));
    caffe::NetState state;
    state.set_phase(options_.phase);
    state.set_level(options_.level);
    for (const std::string& stage : options_.stages) state.add_stage(stage);
    KILN_ASSIGN_OR_RETURN(model_.net, FilterNet(net, state));
    if (options_.weights != nullptr) {
      weights_net_ = *options_.weights;
      absl::Status upgraded = UpgradeNet(weights_net_);
      if (!upgraded.ok()) return Annotate(upgraded, "weights");
      for (const caffe::LayerParameter& layer : weights_net_.layer()) {
        weights_by_layer_[layer.name()] = &layer;
      }
    }
    model_.graph = std::make_unique<Graph>(&registry_);
    // Caffe allows two layers of one name (weights then go to both); so do we.
    for (const caffe::LayerParameter& layer : model_.net.layer()) {
      KILN_RETURN_IF_ERROR(ImportLayer(layer));
    }
    // Outputs: the blobs whose latest value no layer read, in the order they were produced.
    for (const Produced& p : produced_) {
      if (consumed_.count(p.value) || current_.at(p.blob) != p.value) continue;
      model_.outputs.push_back(p.blob);
      KILN_RETURN_IF_ERROR(model_.graph->AddOutput(p.blob, p.value));
    }
    return std::move(model_);
  }

  caffe::Phase phase() const { return options_.phase; }
  uint64_t fill_seed() const { return options_.fill_seed; }
  bool carry_recurrent_state() const { return options_.carry_recurrent_state; }

  // "carried/<layer>/<state>": the graph input of a carried state; its next value is the graph
  // output of the same name plus "_next".
  absl::StatusOr<Value> AddCarriedStateInput(const std::string& layer, absl::string_view state,
                                             const TensorType& type) {
    const std::string name = UniqueName(absl::StrCat("carried/", layer, "/", state));
    KILN_ASSIGN_OR_RETURN(Value value, model_.graph->AddParameter(name, type));
    model_.carried_states.push_back({name, ""});
    pending_carried_[absl::StrCat(layer, "/", state)] = model_.carried_states.size() - 1;
    return value;
  }
  absl::Status AddCarriedStateOutput(const std::string& layer, absl::string_view state,
                                     const Value& next) {
    auto pending = pending_carried_.find(absl::StrCat(layer, "/", state));
    if (pending == pending_carried_.end()) {
      return absl::InternalError(absl::StrCat("no carried state ", state, " of ", layer));
    }
    auto& [input, output] = model_.carried_states[pending->second];
    output = absl::StrCat(input, "_next");
    pending_carried_.erase(pending);
    return model_.graph->AddOutput(output, next);
  }
  Graph& graph() { return *model_.graph; }

  std::string UniqueName(const std::string& base) {
    std::string name = base;
    for (int i = 1; model_.graph->FindNode(name) != nullptr; ++i) name = absl::StrCat(base, "_", i);
    return name;
  }

  absl::StatusOr<Value> MakeParam(const caffe::LayerParameter& layer, CaffeLayer& record,
                                  const std::string& where, int index,
                                  const std::vector<int64_t>& shape,
                                  const caffe::FillerParameter& filler, bool learnable,
                                  absl::string_view role, const std::vector<int64_t>& kiln_shape);

  absl::StatusOr<Value> MakeInput(const caffe::LayerParameter& layer, const std::string& where,
                                  int top, const std::vector<int64_t>& dims,
                                  absl::string_view hint);

 private:
  struct Produced {
    std::string blob;
    Value value;
  };

  absl::Status ImportLayer(const caffe::LayerParameter& layer);

  const CaffeImportOptions& options_;
  const OpRegistry& registry_;
  CaffeModel model_;
  caffe::NetParameter weights_net_;
  std::map<std::string, const caffe::LayerParameter*> weights_by_layer_;
  std::map<std::string, Value> current_;  // blob name -> its latest value
  std::set<Value> consumed_;
  std::vector<Produced> produced_;
  std::map<std::string, int> param_by_share_name_;
  // Carried states whose input is made and output not yet (layer/state -> carried_states index).
  std::map<std::string, size_t> pending_carried_;
};

caffe::Phase Builder::phase() const {
  return layer_.has_phase() ? layer_.phase() : importer_.phase();
}

uint64_t Builder::seed() const { return BlobSeed(importer_.fill_seed(), layer_.name(), -1); }

absl::StatusOr<Node*> Builder::AddNode(absl::string_view op, absl::string_view suffix,
                                       std::vector<Value> inputs, const AttrMap& attrs) {
  const std::string base =
      suffix.empty() ? layer_.name() : absl::StrCat(layer_.name(), "/", suffix);
  absl::StatusOr<Node*> node =
      importer_.graph().AddNode(op, importer_.UniqueName(base), std::move(inputs), attrs);
  if (!node.ok()) {
    return absl::Status(node.status().code(), absl::StrCat(Where(), node.status().message()));
  }
  record_.nodes.push_back((*node)->name());
  return node;
}

absl::StatusOr<Value> Builder::Param(int index, const std::vector<int64_t>& shape,
                                     const caffe::FillerParameter& filler, bool learnable,
                                     absl::string_view role,
                                     const std::vector<int64_t>& kiln_shape) {
  return importer_.MakeParam(layer_, record_, Where(), index, shape, filler, learnable, role,
                             kiln_shape);
}

absl::StatusOr<Value> Builder::AddInput(int top, const std::vector<int64_t>& dims,
                                        absl::string_view hint) {
  return importer_.MakeInput(layer_, Where(), top, dims, hint);
}

bool Builder::carry_recurrent_state() const { return importer_.carry_recurrent_state(); }

absl::StatusOr<Value> Builder::CarriedStateInput(absl::string_view state, const TensorType& type) {
  absl::StatusOr<Value> value = importer_.AddCarriedStateInput(layer_.name(), state, type);
  if (!value.ok()) return Annotate(value.status(), Where());
  return value;
}

absl::Status Builder::CarryOut(absl::string_view state, const Value& next) {
  absl::Status s = importer_.AddCarriedStateOutput(layer_.name(), state, next);
  return s.ok() ? s : Annotate(s, Where());
}

absl::StatusOr<Value> Importer::MakeParam(const caffe::LayerParameter& layer, CaffeLayer& record,
                                          const std::string& where, int index,
                                          const std::vector<int64_t>& shape,
                                          const caffe::FillerParameter& filler, bool learnable,
                                          absl::string_view role,
                                          const std::vector<int64_t>& kiln_shape) {
  CaffeParam param;
  param.layer = layer.name();
  param.index = index;
  param.shape = shape;
  param.learnable = learnable;
  if (index < layer.param_size()) {
    const caffe::ParamSpec& spec = layer.param(index);
    param.lr_mult = spec.lr_mult();
    param.decay_mult = spec.decay_mult();
    param.share_name = spec.name();
  }
  int64_t count = 1;
  for (int64_t d : shape) {
    if (d < 0 || (d > 0 && count > options_.max_param_elements / d)) {
      return absl::ResourceExhaustedError(absl::StrCat(where, role, " blob ", DimsToString(shape),
                                                       " has more than ",
                                                       options_.max_param_elements, " elements"));
    }
    count *= d;
  }
  if (learnable) record.learnable_count += count;
  const std::vector<int64_t>& dims = kiln_shape.empty() ? shape : kiln_shape;

  // A named param seen before is the same blob.
  if (!param.share_name.empty()) {
    auto shared = param_by_share_name_.find(param.share_name);
    if (shared != param_by_share_name_.end()) {
      const CaffeParam& owner = model_.params[shared->second];
      if (owner.shape != shape) {
        const bool permissive = layer.param(index).share_mode() == caffe::ParamSpec::PERMISSIVE;
        return absl::Status(
            permissive ? absl::StatusCode::kUnimplemented : absl::StatusCode::kInvalidArgument,
            absl::StrCat(
                where, "param '", param.share_name, "' is shared with layer '", owner.layer,
                "' whose blob is ", DimsToString(owner.shape), ", but this layer needs ",
                DimsToString(shape),
                permissive ? " (PERMISSIVE sharing of different shapes is not supported)" : ""));
      }
      param.node = owner.node;
      param.shared_with = shared->second;
      param.source = "shared";
      record.params.push_back(static_cast<int>(model_.params.size()));
      model_.params.push_back(param);
      return model_.graph->FindNode(param.node)->output(0);
    }
  }

  KILN_ASSIGN_OR_RETURN(TensorType type, TensorType::Create(DataType::kF32, dims));
  HostTensor tensor(type);
  const caffe::BlobProto* blob = nullptr;
  auto from_weights = weights_by_layer_.find(layer.name());
  const caffe::LayerParameter* source_layer = nullptr;
  if (from_weights != weights_by_layer_.end()) {
    source_layer = from_weights->second;
    param.source = "weights";
  } else if (layer.blobs_size() > 0) {
    source_layer = &layer;
    param.source = "net file";
  }
  if (source_layer != nullptr) {
    if (index < source_layer->blobs_size()) blob = &source_layer->blobs(index);
  }
  if (blob != nullptr) {
    KILN_RETURN_IF_ERROR(
        BlobToTensor(*blob, shape, absl::StrCat(where, role, " blob ", index), tensor));
  } else if (options_.init == ParamInit::kFillers) {
    HostTensor caffe_view = tensor;
    if (!kiln_shape.empty()) {
      KILN_ASSIGN_OR_RETURN(TensorType caffe_type, TensorType::Create(DataType::kF32, shape));
      caffe_view = HostTensor(caffe_type);
    }
    KILN_RETURN_IF_ERROR(
        FillBlob(filler, BlobSeed(options_.fill_seed, layer.name(), index), where, caffe_view));
    if (!kiln_shape.empty()) {
      std::copy(caffe_view.data_as<float>(), caffe_view.data_as<float>() + count,
                tensor.data_as<float>());
    }
    param.source = absl::StrCat("filler ", filler.type());
  } else {
    param.source = "zeros";
  }
  const std::string node_name = UniqueName(absl::StrCat(layer.name(), "/", role));
  KILN_ASSIGN_OR_RETURN(Value value, model_.graph->AddConstant(node_name, std::move(tensor)));
  param.node = node_name;
  const int param_index = static_cast<int>(model_.params.size());
  if (!param.share_name.empty()) param_by_share_name_[param.share_name] = param_index;
  record.params.push_back(param_index);
  model_.params.push_back(param);
  return value;
}

absl::StatusOr<Value> Importer::MakeInput(const caffe::LayerParameter& layer,
                                          const std::string& where, int top,
                                          const std::vector<int64_t>& dims,
                                          absl::string_view hint) {
  CaffeInput input;
  input.name = layer.top(top);
  input.layer = layer.name();
  input.layer_type = layer.type();
  input.transform = layer.transform_param();
  auto user = options_.input_shapes.find(input.name);
  if (user != options_.input_shapes.end()) {
    input.dims = user->second;
    input.shape_from = "user";
  } else if (!dims.empty()) {
    input.dims = dims;
    input.shape_from = "file";
  } else if (options_.fallback_input_shapes.count(input.name)) {
    input.dims = options_.fallback_input_shapes.at(input.name);
    input.shape_from = "user";
  } else {
    return absl::InvalidArgumentError(absl::StrCat(where, "the shape of top '", input.name,
                                                   "' is unknown: ", hint, " (kiln: --input-shape ",
                                                   input.name, "=D0,D1,...)"));
  }
  for (int64_t d : input.dims) {
    if (d <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(where, "top '", input.name, "' has shape ",
                                                     DimsToString(input.dims),
                                                     ": every dim must be > 0"));
    }
  }
  absl::StatusOr<TensorType> type = TensorType::Create(DataType::kF32, input.dims);
  if (!type.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "top '", input.name, "': ", type.status().message()));
  }
  input.node = UniqueName(input.name);
  absl::StatusOr<Value> value = model_.graph->AddParameter(input.node, *type);
  if (!value.ok()) return Annotate(value.status(), where);
  model_.inputs.push_back(input);
  return *value;
}

absl::Status Importer::ImportLayer(const caffe::LayerParameter& layer) {
  const std::string where =
      absl::StrCat("import: layer '", layer.name(), "' (", layer.type(), "): ");
  KILN_RETURN_IF_ERROR(CheckLayerFields(layer, where));
  LayerConverter convert = FindLayerConverter(layer.type());
  if (convert == nullptr) {
    return absl::UnimplementedError(
        absl::StrCat(where, "layer type \"", layer.type(), "\" is not supported"));
  }
  std::vector<Value> bottoms;
  for (const std::string& name : layer.bottom()) {
    auto it = current_.find(name);
    if (it == current_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "bottom '", name, "' names no blob produced by an earlier layer"));
    }
    bottoms.push_back(it->second);
  }
  CaffeLayer record;
  record.name = layer.name();
  record.type = layer.type();
  Builder builder(*this, layer, bottoms, record);
  KILN_RETURN_IF_ERROR(convert(builder));
  if (!builder.tops_set() || builder.tops().size() != static_cast<size_t>(layer.top_size())) {
    return absl::InternalError(absl::StrCat(where, "converter produced ", builder.tops().size(),
                                            " tops for ", layer.top_size()));
  }
  // Parameter blob counts must match what a weights file or the net file supplies.
  const caffe::LayerParameter* source = nullptr;
  auto w = weights_by_layer_.find(layer.name());
  if (w != weights_by_layer_.end()) {
    source = w->second;
  } else if (layer.blobs_size() > 0) {
    source = &layer;
  }
  if (source != nullptr && source->blobs_size() != builder.expected_params()) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, source == &layer ? "the net file" : "the weights file", " has ",
        source->blobs_size(), " blobs for this layer, which needs ", builder.expected_params()));
  }
  if (layer.param_size() > builder.expected_params()) {
    return absl::InvalidArgumentError(absl::StrCat(where, layer.param_size(), " param specs for ",
                                                   builder.expected_params(), " parameter blobs"));
  }
  if (layer.loss_weight_size() > layer.top_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, layer.loss_weight_size(), " loss_weight values for ", layer.top_size(), " tops"));
  }
  for (const Value& v : bottoms) consumed_.insert(v);
  for (int t = 0; t < layer.top_size(); ++t) {
    const std::string& name = layer.top(t);
    const bool in_place = t < layer.bottom_size() && layer.bottom(t) == name;
    if (current_.count(name) && !in_place) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "top '", name, "' is produced by an earlier layer too"));
    }
    for (int u = 0; u < t; ++u) {
      if (layer.top(u) == name) {
        return absl::InvalidArgumentError(absl::StrCat(where, "top '", name, "' appears twice"));
      }
    }
    const Value value = builder.tops()[t];
    current_[name] = value;
    produced_.push_back({name, value});
    CaffeTop top;
    top.blob = name;
    top.value = value;
    top.loss_weight = t < layer.loss_weight_size()
                          ? layer.loss_weight(t)
                          : (t == 0 && IsLossLayerType(layer.type()) ? 1.0f : 0.0f);
    record.tops.push_back(top);
  }
  model_.layers.push_back(std::move(record));
  return absl::OkStatus();
}

}  // namespace

int64_t CaffeModel::LearnableParams() const {
  int64_t total = 0;
  for (const CaffeLayer& layer : layers) total += layer.learnable_count;
  return total;
}

const CaffeLayer* CaffeModel::FindLayer(const std::string& name) const {
  for (const CaffeLayer& layer : layers) {
    if (layer.name == name) return &layer;
  }
  return nullptr;
}

const HostTensor& ParamTensor(const CaffeModel& model, const CaffeParam& param) {
  return *model.graph->FindNode(param.node)->constant();
}

absl::StatusOr<CaffeModel> ImportCaffeNet(const caffe::NetParameter& file,
                                          const CaffeImportOptions& options,
                                          const OpRegistry& registry) {
  Importer importer(options, registry);
  return importer.Run(file);
}

}  // namespace kiln
