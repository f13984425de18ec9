#include "frontends/caffe/training/blob_net.h"

#include <cstring>
#include <filesystem>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/file_identity.h"
#include "base/file_io.h"
#include "base/status_macros.h"
#include "frontends/caffe/blob_convert.h"
#include "frontends/caffe/caffe_io.h"
#include "frontends/caffe/net_state.h"
#include "frontends/caffe/training/solver_net.h"
#include "frontends/caffe/training/trainable_caffe_net.h"
#include "frontends/caffe/upgrade.h"
#include "kernels/all_kernels.h"
#include "ops/all_ops.h"

namespace kiln {

namespace {

constexpr char kBlobOutput[] = "blob/";
constexpr char kDiffOutput[] = "diff/";

// Copies `from` into `to` without moving `to`'s storage (callers hold views of it).
absl::Status CopyInto(const HostTensor& from, HostTensor& to, const std::string& what) {
  if (from.type().num_elements() != to.type().num_elements() ||
      from.type().dtype() != to.type().dtype()) {
    return absl::InternalError(absl::StrCat("net: ", what, " is ", from.type().ToString(),
                                            ", its blob ", to.type().ToString()));
  }
  const std::vector<float> values = from.ToF32Vector();
  std::memcpy(to.data(), values.data(), values.size() * sizeof(float));
  return absl::OkStatus();
}

HostTensor ZerosLike(const TensorType& type) {
  HostTensor t(type);
  std::memset(t.data(), 0, static_cast<size_t>(t.size_bytes()));
  return t;
}

}  // namespace

BlobNet::~BlobNet() = default;

BlobNet::Blob* BlobNet::FindBlob(const std::string& name) {
  for (Blob& b : blobs_) {
    if (b.name == name) return &b;
  }
  return nullptr;
}

absl::StatusOr<std::unique_ptr<BlobNet>> BlobNet::Load(const std::string& prototxt,
                                                       const std::string& weights,
                                                       const BlobNetOptions& options) {
  const std::string where = absl::StrCat("net ", prototxt);
  auto net = std::unique_ptr<BlobNet>(new BlobNet());
  net->origin_ = prototxt;
  net->compile_ = options.compile;
  net->compile_.optimize = false;  // every blob must exist
  net->compile_.device_bound_io = false;
  if (options.batch < 0) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": batch ", options.batch));
  }
  KILN_ASSIGN_OR_RETURN(caffe::NetParameter file, ReadNetParameter(prototxt));
  caffe::NetParameter trained;
  CaffeImportOptions import;
  import.phase = options.phase;
  import.init = ParamInit::kFillers;
  import.fill_seed = options.fill_seed;
  import.carry_recurrent_state = true;  // pycaffe's Net keeps it from forward to forward
  if (!weights.empty()) {
    KILN_ASSIGN_OR_RETURN(trained, ReadNetParameter(weights));
    import.weights = &trained;
  }
  caffe::NetParameter upgraded = file;
  KILN_RETURN_IF_ERROR(Annotate(UpgradeNet(upgraded), where));
  caffe::NetState state;
  state.set_phase(options.phase);
  KILN_ASSIGN_OR_RETURN(caffe::NetParameter filtered, FilterNet(upgraded, state));
  TrainerOptions data;
  data.solver_dir = std::filesystem::path(prototxt).parent_path().string();
  absl::StatusOr<std::vector<NetFeed>> feeds = OpenDataFeeds(filtered, options.phase, data, import);
  if (!feeds.ok()) return Annotate(feeds.status(), where);
  net->feeds_ = std::move(*feeds);
  if (options.batch > 0) {
    if (!net->feeds_.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": batch applies to Input layers; its data layers take their batch_size"));
    }
    CaffeImportOptions probe = import;
    probe.init = ParamInit::kZeros;
    absl::StatusOr<CaffeModel> shapes = ImportCaffeNet(file, probe, DefaultOpRegistry());
    if (!shapes.ok()) return Annotate(shapes.status(), where);
    for (const CaffeInput& input : shapes->inputs) {
      std::vector<int64_t> dims = input.dims;
      if (!dims.empty()) dims[0] = options.batch;
      import.input_shapes[input.name] = dims;
    }
  }
  net->file_ = file;
  absl::StatusOr<CaffeModel> imported = net->Import(import);
  if (!imported.ok()) return Annotate(imported.status(), where);
  net->model_ = std::move(*imported);
  net->import_ = import;
  net->import_.weights = nullptr;
  net->import_.init = ParamInit::kZeros;
  CaffeModel& model = net->model_;

  // The blobs: inputs first, then every top in production order (an in-place top is the last
  // value of its name).
  std::set<std::string> fed;
  for (const NetFeed& feed : net->feeds_) fed.insert(feed.inputs.begin(), feed.inputs.end());
  for (const CaffeInput& in : model.inputs) {
    KILN_ASSIGN_OR_RETURN(TensorType type, TensorType::Create(DataType::kF32, in.dims));
    net->blobs_.push_back({in.name, ZerosLike(type), ZerosLike(type), 0});
    net->input_nodes_[in.node] = in.name;
    (fed.count(in.name) ? net->fed_ : net->inputs_).push_back(in.name);
  }
  for (const GraphOutput& out : model.graph->outputs()) {
    if (!absl::StartsWith(out.name, kBlobOutput)) continue;
    const std::string name = out.name.substr(std::strlen(kBlobOutput));
    float loss_weight = 0;
    for (const CaffeLayer& layer : model.layers) {
      for (const CaffeTop& top : layer.tops) {
        if (top.blob == name) loss_weight = top.loss_weight;
      }
    }
    KILN_ASSIGN_OR_RETURN(TensorType type,
                          TensorType::Create(DataType::kF32, out.value.type().dims()));
    net->blobs_.push_back({name, ZerosLike(type), ZerosLike(type), loss_weight});
    net->has_loss_ = net->has_loss_ || loss_weight != 0.0f;
  }
  net->outputs_ = model.outputs;
  for (const auto& [input, output] : model.carried_states) {
    const Node* node = nullptr;
    for (const Node* n : model.graph->Parameters()) {
      if (n->name() == input) node = n;
    }
    if (node == nullptr) {
      return absl::InternalError(absl::StrCat(where, ": no graph input '", input, "'"));
    }
    net->carried_next_[input] = ZerosLike(node->output_types()[0]);
    net->carried_last_[input] = ZerosLike(node->output_types()[0]);
  }

  TrainableGraphOptions forward;
  forward.with_backward = false;
  forward.every_param_an_input = true;
  absl::StatusOr<TrainableGraph> tg = MakeTrainingGraph(model, forward);
  if (!tg.ok()) return Annotate(tg.status(), where);
  net->dropout_seed_input_ = tg->dropout_seed_input;

  // Parameters in the layers' order, one tensor per graph Constant (shared ones share it).
  std::map<std::string, HostTensor> by_node;
  for (const TrainableParam& p : tg->params) by_node[p.node] = p.initial.Clone();
  for (const RunningStat& r : tg->running) by_node[r.node] = r.initial.Clone();
  for (const auto& [node, value] : tg->fixed) by_node[node] = value.Clone();
  std::map<std::string, HostTensor> diffs;
  for (const CaffeLayer& layer : model.layers) {
    Layer out{layer.name, layer.type, {}};
    for (int index : layer.params) {
      const CaffeParam& cp = model.params[index];
      auto value = by_node.find(cp.node);
      if (value == by_node.end()) {
        return absl::InternalError(absl::StrCat(where, ": layer '", cp.layer, "' blob ", cp.index,
                                                " (node ", cp.node, ") has no tensor"));
      }
      if (!diffs.count(cp.node)) diffs[cp.node] = ZerosLike(value->second.type());
      out.params.push_back(static_cast<int>(net->params_.size()));
      net->params_.push_back(
          {cp.layer, cp.index, cp.shape, cp.node, value->second, diffs[cp.node]});
    }
    net->layers_.push_back(std::move(out));
  }

  KILN_ASSIGN_OR_RETURN(net->forward_plan_,
                        Compile(*tg->graph, DefaultKernelRegistry(), net->compile_));
  KILN_ASSIGN_OR_RETURN(net->forward_, ExecutionContext::Create(*net->forward_plan_));
  const ExecutionPlan& plan = *net->forward_plan_;
  net->description_ = absl::StrFormat(
      "%s (%s phase): %d blobs, %d parameter blobs, backend %s (%s), precision %s", prototxt,
      options.phase == caffe::TRAIN ? "TRAIN" : "TEST", net->blobs_.size(), net->params_.size(),
      std::string(BackendName(plan.backend())), plan.backend_reason(), plan.precision());
  return net;
}

absl::StatusOr<CaffeModel> BlobNet::Import(const CaffeImportOptions& import) const {
  KILN_ASSIGN_OR_RETURN(CaffeModel model, ImportCaffeNet(file_, import, DefaultOpRegistry()));
  std::set<std::string> inputs;
  for (const CaffeInput& in : model.inputs) inputs.insert(in.name);
  // Every top that is no input becomes a graph output, so none is fused away.
  std::map<std::string, Value> last;
  std::vector<std::string> order;
  for (const CaffeLayer& layer : model.layers) {
    for (const CaffeTop& top : layer.tops) {
      if (top.value.node == nullptr || inputs.count(top.blob)) continue;
      if (!last.count(top.blob)) order.push_back(top.blob);
      last[top.blob] = top.value;
    }
  }
  for (const std::string& name : order) {
    KILN_RETURN_IF_ERROR(model.graph->AddOutput(absl::StrCat(kBlobOutput, name), last[name]));
  }
  return model;
}

absl::StatusOr<std::map<std::string, HostTensor>> BlobNet::Run(ExecutionContext& context,
                                                               float seed) {
  std::map<std::string, HostTensor> inputs;
  for (const auto& [input, buffer] : context.plan().inputs()) {
    (void)buffer;
    if (input == dropout_seed_input_) {
      KILN_ASSIGN_OR_RETURN(TensorType one, TensorType::Create(DataType::kF32, {1}));
      HostTensor s(one);
      s.SetFloat(0, seed);
      inputs[input] = s;
      continue;
    }
    auto data = input_nodes_.find(input);
    if (data != input_nodes_.end()) {
      inputs[input] = FindBlob(data->second)->data;
      continue;
    }
    auto carried = carried_last_.find(input);
    if (carried != carried_last_.end()) {
      inputs[input] = carried->second;
      continue;
    }
    const std::string node = absl::StartsWith(input, "param/") ? input.substr(6) : std::string();
    bool bound = false;
    for (const Param& p : params_) {
      if (p.node == node) {
        inputs[input] = p.data;
        bound = true;
        break;
      }
    }
    if (!bound) {
      return absl::InternalError(absl::StrCat("net ", origin_, ": graph input '", input,
                                              "' is neither a blob nor a parameter"));
    }
  }
  return context.Run(inputs);
}

absl::Status BlobNet::Forward() {
  const std::string where = absl::StrCat("net ", origin_, ": forward");
  for (NetFeed& feed : feeds_) {
    std::vector<std::vector<float>> batch;
    KILN_RETURN_IF_ERROR(Annotate(feed.source->NextBatch(batch), where));
    for (size_t i = 0; i < feed.inputs.size() && i < batch.size(); ++i) {
      Blob* blob = FindBlob(feed.inputs[i]);
      if (blob == nullptr) continue;
      if (static_cast<int64_t>(batch[i].size()) != blob->data.type().num_elements()) {
        return absl::InternalError(absl::StrCat(where, ": data layer batch of ", batch[i].size(),
                                                " values for blob '", blob->name, "' of ",
                                                blob->data.type().ToString()));
      }
      std::memcpy(blob->data.data(), batch[i].data(), batch[i].size() * sizeof(float));
    }
  }
  last_seed_ = static_cast<float>(passes_++);
  for (auto& [input, value] : carried_next_) {
    KILN_RETURN_IF_ERROR(CopyInto(value, carried_last_.at(input), input));
  }
  absl::StatusOr<std::map<std::string, HostTensor>> outputs = Run(*forward_, last_seed_);
  if (!outputs.ok()) return Annotate(outputs.status(), where);
  for (const auto& [input, output] : model_.carried_states) {
    KILN_RETURN_IF_ERROR(CopyInto(outputs->at(output), carried_next_.at(input), output));
  }
  for (auto& [name, value] : *outputs) {
    if (absl::StartsWith(name, kBlobOutput)) {
      Blob* blob = FindBlob(name.substr(std::strlen(kBlobOutput)));
      if (blob != nullptr) KILN_RETURN_IF_ERROR(CopyInto(value, blob->data, name));
    } else if (absl::StartsWith(name, "stats/")) {
      const std::string node = name.substr(6);
      for (Param& p : params_) {
        if (p.node == node) {
          KILN_RETURN_IF_ERROR(CopyInto(value, p.data, name));
          break;  // shared parameters share the tensor
        }
      }
    }
  }
  return absl::OkStatus();
}

absl::Status BlobNet::CompileBackward() {
  const std::string where = absl::StrCat("net ", origin_, ": backward");
  absl::StatusOr<CaffeModel> model = Import(import_);
  if (!model.ok()) return Annotate(model.status(), where);
  TrainableGraphOptions options;
  options.with_backward = true;
  options.every_param_an_input = true;
  for (const Blob& b : blobs_) {
    const bool input = std::find(inputs_.begin(), inputs_.end(), b.name) != inputs_.end() ||
                       std::find(fed_.begin(), fed_.end(), b.name) != fed_.end();
    std::string source = absl::StrCat(kBlobOutput, b.name);
    if (input) {
      for (const auto& [node, blob] : input_nodes_) {
        if (blob == b.name) source = node;
      }
    }
    options.output_gradients.push_back({source, absl::StrCat(kDiffOutput, b.name)});
  }
  absl::StatusOr<TrainableGraph> tg = MakeTrainingGraph(*model, options);
  if (!tg.ok()) return Annotate(tg.status(), where);
  KILN_ASSIGN_OR_RETURN(backward_plan_, Compile(*tg->graph, DefaultKernelRegistry(), compile_));
  KILN_ASSIGN_OR_RETURN(backward_, ExecutionContext::Create(*backward_plan_));
  return absl::OkStatus();
}

absl::Status BlobNet::Backward() {
  const std::string where = absl::StrCat("net ", origin_, ": backward");
  if (!has_loss_) {
    return absl::FailedPreconditionError(
        absl::StrCat(where, ": the net has no loss (no top with a non-zero loss_weight)"));
  }
  if (passes_ == 0) {
    return absl::FailedPreconditionError(absl::StrCat(where, ": call forward first"));
  }
  if (backward_ == nullptr) KILN_RETURN_IF_ERROR(CompileBackward());
  absl::StatusOr<std::map<std::string, HostTensor>> outputs = Run(*backward_, last_seed_);
  if (!outputs.ok()) return Annotate(outputs.status(), where);
  for (Blob& b : blobs_) {
    auto diff = outputs->find(absl::StrCat(kDiffOutput, b.name));
    if (diff != outputs->end()) {
      KILN_RETURN_IF_ERROR(CopyInto(diff->second, b.diff, diff->first));
    } else {
      // No loss depends on it; a loss itself has d(loss)/d(loss) = its weight, as in Caffe.
      std::vector<float> fill(b.diff.type().num_elements(), static_cast<float>(b.loss_weight));
      std::memcpy(b.diff.data(), fill.data(), fill.size() * sizeof(float));
    }
  }
  std::set<std::string> done;
  for (Param& p : params_) {
    if (!done.insert(p.node).second) continue;
    auto grad = outputs->find(absl::StrCat("grad/", p.node));
    if (grad != outputs->end()) {
      KILN_RETURN_IF_ERROR(CopyInto(grad->second, p.diff, grad->first));
    } else {
      std::memset(p.diff.data(), 0, static_cast<size_t>(p.diff.size_bytes()));
    }
  }
  return absl::OkStatus();
}

absl::Status BlobNet::Save(const std::string& path, bool overwrite) const {
  // Never over the net's own prototxt, whatever `overwrite` says; over the weights it was
  // loaded from only when asked (they were read whole; the write is atomic).
  absl::Status writable =
      CheckOutputFiles({{"the net's prototxt", origin_}}, {{"path", path}},
                       overwrite ? ExistingOutput::kReplace : ExistingOutput::kRefuse, "overwrite");
  if (!writable.ok()) return Annotate(writable, "net save");
  caffe::NetParameter out;
  out.set_name(model_.net.name());
  for (const Layer& layer : layers_) {
    if (layer.params.empty()) continue;
    caffe::LayerParameter* l = out.add_layer();
    l->set_name(layer.name);
    l->set_type(layer.type);
    for (int index : layer.params) {
      TensorToBlob(params_[index].data, params_[index].shape, *l->add_blobs());
    }
  }
  std::string bytes;
  if (!out.SerializeToString(&bytes)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("net save: ", path, ": the weights could not be serialized"));
  }
  return WriteFileBytes(path, bytes);
}

absl::Status BlobNet::CopyFrom(const std::string& caffemodel) {
  KILN_ASSIGN_OR_RETURN(caffe::NetParameter file, ReadNetParameter(caffemodel));
  KILN_RETURN_IF_ERROR(Annotate(UpgradeNet(file), caffemodel));
  // Checked whole before anything is copied, so a mismatch leaves the net as it was.
  std::vector<std::pair<const caffe::BlobProto*, Param*>> copies;
  for (const caffe::LayerParameter& source : file.layer()) {
    const Layer* target = nullptr;
    for (const Layer& l : layers_) {
      if (l.name == source.name()) target = &l;
    }
    if (target == nullptr || source.blobs_size() == 0) continue;
    if (source.blobs_size() != static_cast<int>(target->params.size())) {
      return absl::InvalidArgumentError(absl::StrCat("copy_from ", caffemodel, ": layer '",
                                                     source.name(), "' has ", source.blobs_size(),
                                                     " blobs, the net's ", target->params.size()));
    }
    for (int i = 0; i < source.blobs_size(); ++i) {
      copies.push_back({&source.blobs(i), &params_[target->params[i]]});
    }
  }
  std::vector<HostTensor> values;
  for (const auto& [blob, param] : copies) {
    HostTensor value(param->data.type());
    KILN_RETURN_IF_ERROR(BlobToTensor(
        *blob, param->shape,
        absl::StrCat("copy_from ", caffemodel, ": layer '", param->layer, "' blob ", param->index),
        value));
    values.push_back(std::move(value));
  }
  for (size_t i = 0; i < copies.size(); ++i) {
    KILN_RETURN_IF_ERROR(CopyInto(values[i], copies[i].second->data, copies[i].second->layer));
  }
  return absl::OkStatus();
}

}  // namespace kiln
