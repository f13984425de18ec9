#include "frontends/caffe/training/solver_trainer.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "base/file_io.h"
#include "base/status_macros.h"
#include "frontends/caffe/blob_convert.h"
#include "frontends/caffe/caffe_io.h"
#include "frontends/caffe/solver_state.h"
#include "frontends/caffe/training/snapshot_manifest.h"
#include "frontends/caffe/upgrade.h"
#include "runtime/device.h"

namespace kiln {

absl::StatusOr<std::unique_ptr<SolverTrainer>> SolverTrainer::Create(
    const SolverConfig& solver, const TrainerOptions& options) {
  KILN_RETURN_IF_ERROR(CheckTrainingOptions(options));
  // From the parameter itself: a caller may have changed it after ResolveSolver.
  KILN_ASSIGN_OR_RETURN(const OptimizerConfig optimizer, OptimizerFromSolver(solver.param));
  std::unique_ptr<SolverTrainer> t(new SolverTrainer());
  t->solver_ = solver;
  const caffe::SolverParameter& p = solver.param;
  const uint64_t fill_seed = p.random_seed() >= 0 ? static_cast<uint64_t>(p.random_seed()) : 1;
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<TrainingNet> train,
                        LoadTrainingNet(solver.train, caffe::TRAIN, options, fill_seed, true,
                                        nullptr, &t->train_model_));
  std::vector<std::string> trained;
  for (const TrainableParam& param : train->tg.params) trained.push_back(param.node);
  for (const RunningStat& r : train->tg.running) trained.push_back(r.node);
  std::vector<std::unique_ptr<TrainingNet>> tests;
  for (const SolverNet& test : solver.tests) {
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<TrainingNet> net,
                          LoadTrainingNet(test, caffe::TEST, options, fill_seed, false, &trained));
    tests.push_back(std::move(net));
  }
  KILN_RETURN_IF_ERROR(t->Init(std::move(train), std::move(tests), optimizer, options));
  return t;
}

absl::StatusOr<std::vector<NetOutput>> TestNet(const caffe::NetParameter& net, int iterations,
                                               const TrainerOptions& options) {
  SolverNet spec;
  spec.net = net;
  spec.state.set_phase(caffe::TEST);
  spec.origin = "the model";
  spec.test_iter = iterations;
  const std::vector<std::string> none;
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<TrainingNet> loaded,
                        LoadTrainingNet(spec, caffe::TEST, options, 1, false, &none));
  return RunEvaluation(*loaded, {});
}

absl::StatusOr<caffe::NetParameter> SolverTrainer::WeightsAsNet() const {
  const TrainingNet& net = *train_;
  Device& device = net.ctx->device();
  KILN_RETURN_IF_ERROR(device.Synchronize());
  std::map<std::string, size_t> trained;
  for (size_t i = 0; i < net.tg.params.size(); ++i) trained[net.tg.params[i].node] = i;
  std::map<std::string, size_t> running;
  for (size_t i = 0; i < net.tg.running.size(); ++i) running[net.tg.running[i].node] = i;
  caffe::NetParameter out;
  out.set_name(train_model_.net.name());
  for (const CaffeLayer& layer : train_model_.layers) {
    if (layer.params.empty()) continue;
    caffe::LayerParameter* l = out.add_layer();
    l->set_name(layer.name);
    l->set_type(layer.type);
    for (int index : layer.params) {
      const CaffeParam& param = train_model_.params[index];
      auto r = running.find(param.node);
      auto t = trained.find(param.node);
      if (r != running.end()) {
        HostTensor value = net.tg.running[r->second].initial.Clone();
        KILN_RETURN_IF_ERROR(device.CopyToHost(value.data(), stats_[r->second].value,
                                               stats_[r->second].count * sizeof(float)));
        TensorToBlob(value, param.shape, *l->add_blobs());
      } else if (t != trained.end()) {
        HostTensor value = net.tg.params[t->second].initial.Clone();
        KILN_RETURN_IF_ERROR(device.CopyToHost(value.data(), state_[t->second].value,
                                               state_[t->second].count * sizeof(float)));
        TensorToBlob(value, param.shape, *l->add_blobs());
      } else {
        TensorToBlob(net.tg.fixed.at(param.node), param.shape, *l->add_blobs());
      }
    }
  }
  return out;
}

std::vector<SolverTrainer::ParamBlob> SolverTrainer::ParamBlobs() const {
  std::vector<ParamBlob> out;
  for (const CaffeLayer& layer : train_model_.layers) {
    for (int index : layer.params) {
      const CaffeParam& p = train_model_.params[index];
      out.push_back({p.layer, p.index, p.shape, p.node});
    }
  }
  return out;
}

absl::StatusOr<std::pair<void*, int64_t>> SolverTrainer::ParamBuffer(
    const std::string& node) const {
  for (size_t i = 0; i < train_->tg.params.size(); ++i) {
    if (train_->tg.params[i].node == node) return std::make_pair(state_[i].value, state_[i].count);
  }
  for (size_t i = 0; i < train_->tg.running.size(); ++i) {
    if (train_->tg.running[i].node == node) return std::make_pair(stats_[i].value, stats_[i].count);
  }
  if (train_->tg.fixed.count(node)) return std::make_pair(nullptr, int64_t{0});
  return absl::NotFoundError(absl::StrCat("parameter node '", node, "' is not in the TRAIN net"));
}

absl::StatusOr<std::vector<float>> SolverTrainer::ReadParam(const std::string& node) const {
  KILN_ASSIGN_OR_RETURN(auto buffer, ParamBuffer(node));
  if (buffer.first == nullptr) return train_->tg.fixed.at(node).ToF32Vector();
  std::vector<float> values(buffer.second);
  KILN_RETURN_IF_ERROR(
      train_->ctx->device().CopyToHost(values.data(), buffer.first, values.size() * sizeof(float)));
  return values;
}

absl::Status SolverTrainer::WriteParam(const std::string& node, const std::vector<float>& values) {
  KILN_ASSIGN_OR_RETURN(auto buffer, ParamBuffer(node));
  if (buffer.first == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("parameter node '", node,
                     "' is not trained (lr_mult 0): it is compiled into the plan and cannot be "
                     "changed after the trainer is made"));
  }
  if (static_cast<int64_t>(values.size()) != buffer.second) {
    return absl::InvalidArgumentError(absl::StrCat("parameter node '", node, "' has ",
                                                   buffer.second, " values, not ", values.size()));
  }
  return train_->ctx->device().CopyToDevice(buffer.first, values.data(),
                                            values.size() * sizeof(float));
}

absl::StatusOr<std::pair<std::string, std::string>> SolverTrainer::Snapshot(
    const std::string& prefix) {
  const std::string model_path = absl::StrCat(prefix, "_iter_", iter_, ".caffemodel");
  const std::string state_path = absl::StrCat(prefix, "_iter_", iter_, ".solverstate");
  KILN_ASSIGN_OR_RETURN(caffe::NetParameter net, WeightsAsNet());
  std::string bytes;
  if (!net.SerializeToString(&bytes)) {
    return absl::InternalError("snapshot: the weights could not be serialized");
  }
  SolverStateData state;
  state.iter = iter_;
  state.learned_net = model_path;
  state.current_step = optimizer_.learning_rate.StepsPassed(iter_);
  Device& device = train_->ctx->device();
  for (int h = 0; h < history_count_; ++h) {
    for (size_t i = 0; i < state_.size(); ++i) {
      std::vector<float> values(state_[i].count);
      KILN_RETURN_IF_ERROR(
          device.CopyToHost(values.data(), state_[i].history[h], values.size() * sizeof(float)));
      state.history.push_back(std::move(values));
      state.history_shapes.push_back(train_->tg.params[i].caffe_shape);
    }
  }
  absl::StatusOr<TrainingProgress> progress = Progress();
  if (!progress.ok()) return Annotate(progress.status(), state_path);
  state.progress = std::move(*progress);
  absl::StatusOr<std::string> state_bytes = SerializeSolverState(state);
  if (!state_bytes.ok()) return Annotate(state_bytes.status(), state_path);
  // The model, the state, then the manifest that makes them one unit (snapshot_manifest.h).
  KILN_RETURN_IF_ERROR(WriteFileBytes(model_path, bytes));
  KILN_RETURN_IF_ERROR(WriteFileBytes(state_path, *state_bytes));
  KILN_RETURN_IF_ERROR(WriteSnapshotManifest(model_path, bytes, state_path, *state_bytes));
  return std::make_pair(model_path, state_path);
}

absl::Status SolverTrainer::Restore(const std::string& solverstate_path,
                                    const std::string& weights_path) {
  KILN_ASSIGN_OR_RETURN(std::string state_bytes, ReadMessageBytes(solverstate_path));
  KILN_ASSIGN_OR_RETURN(SolverStateData state, ParseSolverState(state_bytes, solverstate_path));
  std::string path = weights_path.empty() ? state.learned_net : weights_path;
  if (!weights_path.empty() || !std::filesystem::exists(path)) {
    // Caffe stores the path as written when snapshotting; look beside the state file too.
    const std::filesystem::path beside = std::filesystem::path(solverstate_path).parent_path() /
                                         std::filesystem::path(path).filename();
    if (weights_path.empty() && std::filesystem::exists(beside)) path = beside.string();
  }
  KILN_ASSIGN_OR_RETURN(std::string weight_bytes, ReadMessageBytes(path));
  // A state Kiln wrote (it has a data position) comes with a manifest; checked before anything
  // is changed, so a torn pair is refused with the trainer as it was.
  if (state.progress.has_value()) {
    KILN_RETURN_IF_ERROR(CheckSnapshotManifest(solverstate_path, state_bytes, path, weight_bytes));
  }
  const size_t expected = state_.size() * static_cast<size_t>(history_count_);
  if (state.history.size() != expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        "restore: ", solverstate_path, " holds ", state.history.size(),
        " history blobs; this net and solver (", solver_.param.type(), ") need ", expected));
  }
  Device& device = train_->ctx->device();
  for (size_t k = 0; k < expected; ++k) {
    const ParamState& s = state_[k % state_.size()];
    if (static_cast<int64_t>(state.history[k].size()) != s.count) {
      return absl::InvalidArgumentError(absl::StrCat(
          "restore: history blob ", k, " of ", solverstate_path, " holds ", state.history[k].size(),
          " values, parameter '", train_->tg.params[k % state_.size()].node, "' has ", s.count));
    }
  }
  for (size_t k = 0; k < expected; ++k) {
    const ParamState& s = state_[k % state_.size()];
    KILN_RETURN_IF_ERROR(device.CopyToDevice(s.history[k / state_.size()], state.history[k].data(),
                                             s.count * sizeof(float)));
  }
  KILN_ASSIGN_OR_RETURN(caffe::NetParameter weights, ParseNetParameter(weight_bytes, path));
  KILN_RETURN_IF_ERROR(UpgradeNet(weights));
  // Each blob by (layer name, index), as Caffe matches weights.
  auto load = [&](const std::string& layer_name, int index, const std::vector<int64_t>& shape,
                  const HostTensor& like, void* dst, int64_t count) -> absl::Status {
    const caffe::LayerParameter* layer = nullptr;
    for (const caffe::LayerParameter& l : weights.layer()) {
      if (l.name() == layer_name) layer = &l;
    }
    if (layer == nullptr || layer->blobs_size() <= index) {
      return absl::NotFoundError(
          absl::StrCat("restore: ", path, " has no blob ", index, " for layer '", layer_name, "'"));
    }
    HostTensor value = like.Clone();
    KILN_RETURN_IF_ERROR(BlobToTensor(
        layer->blobs(index), shape,
        absl::StrCat("restore: ", path, ": layer '", layer_name, "' blob ", index), value));
    return device.CopyToDevice(dst, value.data(), count * sizeof(float));
  };
  for (size_t i = 0; i < state_.size(); ++i) {
    const TrainableParam& p = train_->tg.params[i];
    KILN_RETURN_IF_ERROR(
        load(p.layer, p.index, p.caffe_shape, p.initial, state_[i].value, state_[i].count));
  }
  for (size_t i = 0; i < stats_.size(); ++i) {
    const RunningStat& r = train_->tg.running[i];
    KILN_RETURN_IF_ERROR(
        load(r.layer, r.index, r.caffe_shape, r.initial, stats_[i].value, stats_[i].count));
  }
  iter_ = state.iter;
  restore_note_.clear();
  if (state.progress.has_value()) {
    KILN_RETURN_IF_ERROR(Annotate(RestoreProgress(*state.progress), solverstate_path));
  } else {
    restore_note_ = absl::StrCat(
        solverstate_path,
        " records no data position (a Caffe snapshot): the data layers start again at their "
        "first record and the dropout masks at their first pass, as Caffe's resume does, so the "
        "run does not continue exactly as an uninterrupted one would");
  }
  if (sync_ != nullptr) KILN_RETURN_IF_ERROR(ShareParameters());
  return absl::OkStatus();
}

}  // namespace kiln
