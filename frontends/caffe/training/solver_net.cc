#include "frontends/caffe/training/solver_net.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "frontends/caffe/data/datum_batch_source.h"
#include "frontends/caffe/data/hdf5_batch_source.h"
#include "frontends/caffe/net_state.h"
#include "frontends/caffe/training/trainable_caffe_net.h"
#include "frontends/caffe/upgrade.h"
#include "ops/all_ops.h"

namespace kiln {

namespace {

// A data source path as the user wrote it, resolved: the working directory first (Caffe runs
// from where it is started), then the solver's folder.
std::string ResolveSource(const std::string& source, const std::string& solver_dir) {
  namespace fs = std::filesystem;
  if (source.empty() || fs::path(source).is_absolute() || fs::exists(source)) return source;
  const fs::path beside = fs::path(solver_dir) / source;
  return !solver_dir.empty() && fs::exists(beside) ? beside.string() : source;
}

// The data layers the trainer feeds from a BatchSource.
bool IsFedDataLayer(const std::string& type) {
  return type == "Data" || type == "ImageData" || type == "MemoryData" || type == "HDF5Data";
}

// A MemoryData layer's batches: the caller's source for it (TrainerOptions::memory_data), checked
// against the shape the layer declares.
absl::StatusOr<NetFeed> MemoryDataFeed(const caffe::LayerParameter& layer,
                                       const TrainerOptions& options) {
  auto make = options.memory_data.find(layer.name());
  if (make == options.memory_data.end() || !make->second) {
    return absl::FailedPreconditionError(absl::StrCat(
        "training: MemoryData layer '", layer.name(),
        "' has no arrays: give it a BatchSource through TrainerOptions::memory_data (the "
        "library's way of feeding it; kiln train reads Data and ImageData layers)"));
  }
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<BatchSource> source, make->second());
  if (source == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("training: MemoryData layer '", layer.name(), "': no source was made"));
  }
  const caffe::MemoryDataParameter& p = layer.memory_data_param();
  const std::vector<int64_t> data = {p.batch_size(), p.channels(), p.height(), p.width()};
  const std::vector<std::vector<int64_t>> dims = source->BatchDims();
  const bool labels = layer.top_size() > 1;
  if (dims.empty() || dims[0] != data ||
      (labels && (dims.size() < 2 || dims[1] != std::vector<int64_t>{p.batch_size()}))) {
    return absl::InvalidArgumentError(
        absl::StrCat("training: MemoryData layer '", layer.name(), "' declares batches of [",
                     absl::StrJoin(data, ","), "]", labels ? " with labels" : "",
                     "; its source gives [", dims.empty() ? "" : absl::StrJoin(dims[0], ","), "]",
                     dims.size() > 1 ? " with labels" : ""));
  }
  NetFeed feed;
  feed.source = std::move(source);
  for (int t = 0; t < layer.top_size() && t < 2; ++t) feed.inputs.push_back(layer.top(t));
  return feed;
}

// An HDF5Data layer's batches: every top is fed, each from the dataset of its name.
absl::StatusOr<NetFeed> Hdf5DataFeed(const caffe::LayerParameter& layer, caffe::Phase phase,
                                     const TrainerOptions& options, CaffeImportOptions& import) {
  const bool sharded = phase == caffe::TRAIN;  // TEST passes read every batch
  KILN_ASSIGN_OR_RETURN(
      std::unique_ptr<Hdf5BatchSource> source,
      Hdf5BatchSource::OpenDataLayer(
          layer, ResolveSource(layer.hdf5_data_param().source(), options.solver_dir),
          options.data_seed, sharded ? options.data_shard : 0, sharded ? options.data_shards : 1));
  const std::vector<std::vector<int64_t>> dims = source->BatchDims();
  NetFeed feed;
  for (int t = 0; t < layer.top_size(); ++t) {
    import.input_shapes[layer.top(t)] = dims[t];
    feed.inputs.push_back(layer.top(t));
  }
  feed.source = std::move(source);
  return feed;
}

// An HDF5Data layer with synthetic data (kiln time --train): each top needs its shape from
// TrainerOptions::synthetic_data, as the files that would give them are not read.
absl::StatusOr<NetFeed> SyntheticHdf5Feed(const caffe::LayerParameter& layer,
                                          const TrainerOptions& options,
                                          CaffeImportOptions& import) {
  NetFeed feed;
  feed.synthetic_indices_only = true;
  for (const std::string& top : layer.top()) {
    auto given = options.synthetic_data.find(top);
    if (given == options.synthetic_data.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "training: synthetic data has no shape for top '", top, "' of HDF5Data layer '",
          layer.name(), "' (every top of an HDF5Data layer needs one)"));
    }
    import.input_shapes[top] = given->second;
    feed.inputs.push_back(top);
  }
  return feed;
}

}  // namespace

absl::StatusOr<std::vector<NetFeed>> OpenDataFeeds(const caffe::NetParameter& filtered,
                                                   caffe::Phase phase,
                                                   const TrainerOptions& options,
                                                   CaffeImportOptions& import) {
  std::vector<NetFeed> feeds;
  for (const caffe::LayerParameter& layer : filtered.layer()) {
    if (!IsFedDataLayer(layer.type())) {
      if (layer.type() == "WindowData") {
        return absl::UnimplementedError(
            absl::StrCat("training: data layer '", layer.name(), "' of type ", layer.type(),
                         " (Kiln reads Data layers, LMDB or LevelDB of Datum records, "
                         "ImageData layers, lists of JPEG/PNG files, and HDF5Data layers; see "
                         "kiln convert)"));
      }
      continue;
    }
    if (layer.type() == "MemoryData" && options.synthetic_data.empty()) {
      KILN_ASSIGN_OR_RETURN(NetFeed feed, MemoryDataFeed(layer, options));
      feeds.push_back(std::move(feed));
      continue;
    }
    if (layer.type() == "HDF5Data" && options.synthetic_data.empty()) {
      KILN_ASSIGN_OR_RETURN(NetFeed feed, Hdf5DataFeed(layer, phase, options, import));
      feeds.push_back(std::move(feed));
      continue;
    }
    std::unique_ptr<DatumBatchSource> source;
    std::vector<int64_t> dims;
    if (layer.type() == "HDF5Data") {  // synthetic: every top, each with its own shape
      KILN_ASSIGN_OR_RETURN(NetFeed feed, SyntheticHdf5Feed(layer, options, import));
      feeds.push_back(std::move(feed));
      continue;
    }
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
          source, DatumBatchSource::OpenDataLayer(resolved, phase, "", options.data_seed, false,
                                                  sharded ? options.data_shard : 0,
                                                  sharded ? options.data_shards : 1));
      dims = source->data_dims();
    }
    if (layer.top_size() > 0) import.input_shapes[layer.top(0)] = dims;
    if (layer.top_size() > 1) import.input_shapes[layer.top(1)] = {dims[0]};
    NetFeed feed;
    feed.source = std::move(source);
    for (int t = 0; t < layer.top_size() && t < 2; ++t) feed.inputs.push_back(layer.top(t));
    feeds.push_back(std::move(feed));
  }
  return feeds;
}

absl::StatusOr<std::unique_ptr<TrainingNet>> LoadTrainingNet(
    const SolverNet& spec, caffe::Phase phase, const TrainerOptions& options, uint64_t fill_seed,
    bool backward, const std::vector<std::string>* only, CaffeModel* model_out) {
  if (options.compile.split_for_memory) {
    // Its slices would need their own gradients; training runs --optimize on's rewrites.
    return absl::InvalidArgumentError(
        "--optimize memory (split_for_memory) is for inference plans; training and test nets "
        "take --optimize on or off");
  }
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
  // As Caffe's solver: each net's LSTM and RNN layers go on from the state the last pass left
  // (the trainer carries it; TRAIN and TEST nets each their own).
  import.carry_recurrent_state = true;
  KILN_ASSIGN_OR_RETURN(std::vector<NetFeed> feeds,
                        OpenDataFeeds(filtered, phase, options, import));
  KILN_ASSIGN_OR_RETURN(CaffeModel model, ImportCaffeNet(spec.net, import, DefaultOpRegistry()));
  // The graph input names of the data tops (the blob name unless a node had it already).
  for (NetFeed& feed : feeds) {
    for (std::string& input : feed.inputs) {
      for (const CaffeInput& in : model.inputs) {
        if (in.name == input) {
          input = in.node;
          break;
        }
      }
    }
  }
  // The training rewrites follow the plan flags: on with the CLI's --optimize (its default),
  // off in the library's default CompileOptions; --disable-pass names them too.
  PassManagerOptions passes;
  passes.disabled = options.compile.disabled_passes;
  for (const CaffeInput& in : model.inputs) {
    if (!IsFedDataLayer(in.layer_type)) {
      return absl::UnimplementedError(absl::StrCat("training: input '", in.name, "' (layer '",
                                                   in.layer, "', ", in.layer_type,
                                                   ") has no data source"));
    }
  }
  KILN_ASSIGN_OR_RETURN(TrainableGraph tg,
                        MakeTrainingGraph(model, backward, only, options.loss_scale,
                                          options.compile.optimize ? &passes : nullptr));
  KILN_ASSIGN_OR_RETURN(
      std::unique_ptr<TrainingNet> net,
      CompileTrainingNet(
          std::move(tg), std::move(feeds), options.compile, options.data_seed,
          absl::StrCat(phase == caffe::TRAIN ? "TRAIN" : "TEST", " net (", spec.origin, ")")));
  net->test_iter = spec.test_iter;
  if (model_out != nullptr) *model_out = std::move(model);
  return net;
}

}  // namespace kiln
