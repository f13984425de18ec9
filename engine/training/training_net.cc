#include "engine/training/training_net.h"

#include <filesystem>
#include <random>

#include "absl/strings/str_cat.h"
#include "engine/status_macros.h"
#include "kernels/all_kernels.h"
#include "ops/all_ops.h"
#include "proto/net_state.h"
#include "proto/upgrade.h"

namespace kiln {

namespace {

int64_t BytesOf(const TensorType& t) { return t.span_bytes(); }

// A data source path as the user wrote it, resolved: the working directory first (Caffe runs
// from where it is started), then the solver's folder.
std::string ResolveSource(const std::string& source, const std::string& solver_dir) {
  namespace fs = std::filesystem;
  if (source.empty() || fs::path(source).is_absolute() || fs::exists(source)) return source;
  const fs::path beside = fs::path(solver_dir) / source;
  return !solver_dir.empty() && fs::exists(beside) ? beside.string() : source;
}

// The data layers the trainer feeds from a BatchSource.
bool IsFedDataLayer(const std::string& type) { return type == "Data" || type == "ImageData"; }

}  // namespace

TrainingNet::~TrainingNet() {
  if (ctx == nullptr) return;
  for (auto& [name, p] : data_buffers) ctx->device().Free(p);
  for (auto& [name, p] : output_buffers) ctx->device().Free(p);
  if (seed_staging != nullptr) ctx->device().FreeStaging(seed_staging);
}

absl::Status TrainingNet::Feed() {
  ++passes;
  if (dropout_seed != nullptr) {
    // Exact in f32 up to 2^24 passes; the masks then repeat with period 2^24. Staged in
    // page-locked memory so the copy queues behind the previous pass instead of waiting.
    *seed_staging = static_cast<float>(passes % (int64_t{1} << 24));
    KILN_RETURN_IF_ERROR(
        ctx->device().CopyToDeviceAsync(dropout_seed, seed_staging, sizeof(float)));
  }
  for (Source& s : sources) {
    if (s.source == nullptr) continue;  // synthetic data: filled once
    KILN_RETURN_IF_ERROR(s.source->Next(&batch));
    if (!s.data.empty()) {
      KILN_RETURN_IF_ERROR(ctx->device().CopyToDevice(data_buffers.at(s.data), batch.data.data(),
                                                      batch.data.size() * sizeof(float)));
    }
    if (!s.label.empty()) {
      KILN_RETURN_IF_ERROR(ctx->device().CopyToDevice(data_buffers.at(s.label), batch.labels.data(),
                                                      batch.labels.size() * sizeof(float)));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<double> TrainingNet::ReadScalar(const std::string& name) {
  const TensorType& t = plan->buffers()[plan->outputs().at(name)].type;
  if (t.dtype() != DataType::kF32) {
    return absl::InternalError(absl::StrCat("training: output '", name, "' is not f32"));
  }
  float v = 0;
  KILN_RETURN_IF_ERROR(ctx->device().CopyToHost(&v, output_buffers.at(name), sizeof(float)));
  return v;
}

absl::StatusOr<std::unique_ptr<TrainingNet>> LoadTrainingNet(const SolverNet& spec,
                                                             caffe::Phase phase,
                                                             const TrainerOptions& options,
                                                             uint64_t fill_seed, bool backward,
                                                             const std::vector<std::string>* only) {
  if (options.compile.split_for_memory) {
    // Its slices would need their own gradients; training runs --optimize on's rewrites.
    return absl::InvalidArgumentError(
        "--optimize memory (split_for_memory) is for inference plans; training and test nets "
        "take --optimize on or off");
  }
  auto net = std::make_unique<TrainingNet>();
  net->test_iter = spec.test_iter;
  caffe::NetParameter upgraded = spec.net;
  KILN_RETURN_IF_ERROR(UpgradeNet(upgraded));
  KILN_ASSIGN_OR_RETURN(caffe::NetParameter filtered, FilterNet(upgraded, spec.state));
  CaffeImportOptions import;
  import.phase = phase;
  import.level = spec.state.level();
  import.stages.assign(spec.state.stage().begin(), spec.state.stage().end());
  import.weights = options.weights;
  import.init = ParamInit::kFillers;
  import.fill_seed = fill_seed;
  for (const caffe::LayerParameter& layer : filtered.layer()) {
    if (!IsFedDataLayer(layer.type())) {
      if (layer.type() == "HDF5Data" || layer.type() == "MemoryData" ||
          layer.type() == "WindowData") {
        return absl::UnimplementedError(
            absl::StrCat("training: data layer '", layer.name(), "' of type ", layer.type(),
                         " (Kiln reads Data layers, LMDB or LevelDB of Datum records, and "
                         "ImageData layers, lists of JPEG/PNG files; see kiln convert)"));
      }
      continue;
    }
    std::unique_ptr<BatchSource> source;
    std::vector<int64_t> dims;
    if (!options.synthetic_data.empty()) {
      auto given = options.synthetic_data.find(layer.top_size() > 0 ? layer.top(0) : "");
      if (given == options.synthetic_data.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("training: synthetic data has no shape for the top of data layer '",
                         layer.name(), "'"));
      }
      dims = given->second;
    } else {
      caffe::LayerParameter resolved = layer;
      if (layer.type() == "ImageData") {
        caffe::ImageDataParameter& image = *resolved.mutable_image_data_param();
        image.set_source(ResolveSource(image.source(), options.solver_dir));
        // Image paths are relative to root_folder, or to the working directory without one.
        if (!image.root_folder().empty()) {
          image.set_root_folder(ResolveSource(image.root_folder(), options.solver_dir));
        }
      } else {
        resolved.mutable_data_param()->set_source(
            ResolveSource(layer.data_param().source(), options.solver_dir));
      }
      const bool sharded = phase == caffe::TRAIN;  // TEST passes read the whole database
      KILN_ASSIGN_OR_RETURN(
          source, BatchSource::OpenDataLayer(resolved, phase, "", options.data_seed, false,
                                             sharded ? options.data_shard : 0,
                                             sharded ? options.data_shards : 1));
      dims = source->data_dims();
    }
    if (layer.top_size() > 0) import.input_shapes[layer.top(0)] = dims;
    if (layer.top_size() > 1) import.input_shapes[layer.top(1)] = {dims[0]};
    TrainingNet::Source s;
    s.source = std::move(source);
    s.data = layer.top_size() > 0 ? layer.top(0) : "";
    s.label = layer.top_size() > 1 ? layer.top(1) : "";
    net->sources.push_back(std::move(s));
  }
  KILN_ASSIGN_OR_RETURN(CaffeModel model, ImportCaffeNet(spec.net, import, DefaultOpRegistry()));
  // The graph input names of the data tops (the blob name unless a node had it already).
  for (TrainingNet::Source& s : net->sources) {
    for (const CaffeInput& in : model.inputs) {
      if (in.name == s.data) s.data = in.node;
      if (in.name == s.label) s.label = in.node;
    }
  }
  // The training rewrites follow the plan flags: on with the CLI's --optimize (its default),
  // off in the library's default CompileOptions; --disable-pass names them too.
  PassManagerOptions passes;
  passes.disabled = options.compile.disabled_passes;
  KILN_ASSIGN_OR_RETURN(net->tg,
                        MakeTrainingGraph(std::move(model), backward, only, options.loss_scale,
                                          options.compile.optimize ? &passes : nullptr));
  for (const CaffeInput& in : net->tg.model.inputs) {
    if (!IsFedDataLayer(in.layer_type)) {
      return absl::UnimplementedError(absl::StrCat("training: input '", in.name, "' (layer '",
                                                   in.layer, "', ", in.layer_type,
                                                   ") has no data source"));
    }
  }
  CompileOptions compile = options.compile;
  compile.optimize = false;        // the inference rewrites (BatchNorm folding...) do not train
  compile.device_bound_io = true;  // parameters, gradients and data live in the trainer's buffers
  absl::StatusOr<std::unique_ptr<ExecutionPlan>> plan =
      Compile(*net->tg.model.graph, DefaultKernelRegistry(), compile);
  if (!plan.ok()) {
    return absl::Status(plan.status().code(),
                        absl::StrCat(phase == caffe::TRAIN ? "TRAIN" : "TEST", " net (",
                                     spec.origin, "): ", plan.status().message()));
  }
  net->plan = std::move(*plan);
  KILN_ASSIGN_OR_RETURN(net->ctx, ExecutionContext::Create(*net->plan));
  Device& device = net->ctx->device();
  for (const TrainingNet::Source& s : net->sources) {
    for (const std::string& name : {s.data, s.label}) {
      if (name.empty() || !net->plan->inputs().count(name)) continue;
      const TensorType& t = net->plan->buffers()[net->plan->inputs().at(name)].type;
      if (t.dtype() != DataType::kF32 || !t.IsContiguous()) {
        return absl::InternalError(
            absl::StrCat("training: data input '", name, "' is ", t.ToString()));
      }
      KILN_ASSIGN_OR_RETURN(net->data_buffers[name], device.Allocate(BytesOf(t)));
      if (s.source == nullptr) {
        // Synthetic: images N(0, 1), labels 0..9, fixed for the whole run.
        std::mt19937 rng(static_cast<uint32_t>(options.data_seed));
        std::normal_distribution<float> normal;
        std::vector<float> values(static_cast<size_t>(t.num_elements()));
        for (size_t i = 0; i < values.size(); ++i) {
          values[i] = name == s.label ? static_cast<float>(i % 10) : normal(rng);
        }
        KILN_RETURN_IF_ERROR(device.CopyToDevice(net->data_buffers[name], values.data(),
                                                 values.size() * sizeof(float)));
      }
    }
  }
  if (!net->tg.dropout_seed_input.empty()) {
    KILN_ASSIGN_OR_RETURN(net->dropout_seed, device.Allocate(sizeof(float)));
    KILN_ASSIGN_OR_RETURN(void* staging, device.AllocateStaging(sizeof(float)));
    net->seed_staging = static_cast<float*>(staging);
    net->data_buffers[net->tg.dropout_seed_input] = net->dropout_seed;  // freed with the others
  }
  for (const auto& [name, buffer] : net->plan->outputs()) {
    if (name.rfind("grad/", 0) == 0) continue;
    KILN_ASSIGN_OR_RETURN(net->output_buffers[name],
                          device.Allocate(BytesOf(net->plan->buffers()[buffer].type)));
  }
  return net;
}

// test_iter batches through a TEST net: the mean of each scalar output (Caffe's test outputs).
absl::StatusOr<std::vector<NetOutput>> RunTestPasses(TrainingNet& net,
                                                     std::map<std::string, const void*> inputs) {
  for (const auto& [name, p] : net.data_buffers) inputs[name] = p;
  std::vector<NetOutput> out;
  std::map<std::string, double> weights;
  for (const CaffeLayer& layer : net.tg.model.layers) {
    for (const CaffeTop& top : layer.tops) weights[top.blob] = top.loss_weight;
  }
  for (const auto& [name, buffer] : net.plan->outputs()) {
    if (net.plan->buffers()[buffer].type.num_elements() != 1) continue;  // scalars only
    NetOutput o;
    o.name = name;
    o.loss_weight = weights.count(name) ? weights[name] : 0.0;
    out.push_back(o);
  }
  const int iterations = std::max(1, net.test_iter);
  for (int i = 0; i < iterations; ++i) {
    KILN_RETURN_IF_ERROR(net.Feed());
    KILN_RETURN_IF_ERROR(net.ctx->RunOnDevice(inputs, net.output_buffers));
    for (NetOutput& o : out) {
      KILN_ASSIGN_OR_RETURN(double v, net.ReadScalar(o.name));
      o.value += v / iterations;
    }
  }
  return out;
}

}  // namespace kiln
