#include "training/trainer.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "dnn/cuda/solver_update.h"
#include "dnn/solver_update.h"
#include "runtime/executor.h"
#include "training/gradient_sync.h"
#include "training/producing_step.h"

namespace kiln {

namespace {

int64_t BytesOf(const TensorType& t) { return t.span_bytes(); }

}  // namespace

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::Create(
    std::unique_ptr<TrainingNet> train, std::vector<std::unique_ptr<TrainingNet>> evaluations,
    const OptimizerConfig& optimizer, const TrainingOptions& options) {
  std::unique_ptr<Trainer> t(new Trainer());
  KILN_RETURN_IF_ERROR(t->Init(std::move(train), std::move(evaluations), optimizer, options));
  return t;
}

absl::Status CheckTrainingOptions(const TrainingOptions& options) {
  if (!(options.loss_scale > 0) || !std::isfinite(options.loss_scale)) {
    return absl::InvalidArgumentError(
        absl::StrCat("training: loss scale must be a positive number, got ", options.loss_scale));
  }
  if (options.data_shards < 1 || options.data_shard < 0 ||
      options.data_shard >= options.data_shards) {
    return absl::InvalidArgumentError(absl::StrCat("training: data shard ", options.data_shard,
                                                   " of ", options.data_shards,
                                                   " is out of range"));
  }
  return absl::OkStatus();
}

absl::Status Trainer::Init(std::unique_ptr<TrainingNet> train,
                           std::vector<std::unique_ptr<TrainingNet>> evaluations,
                           const OptimizerConfig& optimizer, const TrainingOptions& options) {
  KILN_RETURN_IF_ERROR(CheckTrainingOptions(options));
  KILN_RETURN_IF_ERROR(CheckOptimizerConfig(optimizer));
  if (train == nullptr || train->plan == nullptr) {
    return absl::InvalidArgumentError("training: no compiled training net");
  }
  optimizer_ = optimizer;
  history_count_ = dnn::HistoryCount(optimizer.type);
  loss_scale_ = options.loss_scale;
  sync_ = options.gradient_sync;
  train_ = std::move(train);
  tests_ = std::move(evaluations);
  const bool accumulate = optimizer.iter_size > 1;
  KILN_RETURN_IF_ERROR(AllocateState(accumulate));
  Device& device = train_->ctx->device();
  const ExecutionPlan& plan = *train_->plan;
  if (device.kind() == DeviceKind::kCuda) {
    KILN_ASSIGN_OR_RETURN(norm_scratch_, device.Allocate(sizeof(double)));
  }
  if (sync_ != nullptr) {
    KILN_RETURN_IF_ERROR(BindGradientSync(accumulate));
    KILN_RETURN_IF_ERROR(ShareParameters());
  }
  int64_t batch = 0;
  for (const NetFeed& feed : train_->feeds) {
    if (feed.source != nullptr) {
      std::vector<std::vector<int64_t>> dims = feed.source->BatchDims();
      if (!dims.empty() && !dims[0].empty()) batch += dims[0][0];
    } else if (!feed.inputs.empty() && plan.inputs().count(feed.inputs[0])) {
      batch += plan.buffers()[plan.inputs().at(feed.inputs[0])].type.dim(0);
    }
  }
  images_per_iteration_ = batch * optimizer.iter_size;
  backend_ = absl::StrCat(BackendName(plan.backend()), " (", device.Describe(), "), precision ",
                          plan.precision(), ", layout ", plan.layout());
  if (!plan.backend_reason().empty()) absl::StrAppend(&backend_, "; ", plan.backend_reason());
  return absl::OkStatus();
}

absl::Status Trainer::AllocateState(bool accumulate) {
  Device& device = train_->ctx->device();
  const ExecutionPlan& plan = *train_->plan;
  for (const TrainableParam& param : train_->tg.params) {
    ParamState s;
    s.count = param.initial.type().num_elements();
    const int64_t bytes = s.count * static_cast<int64_t>(sizeof(float));
    if (param.initial.type().dtype() != DataType::kF32 || !param.initial.type().IsContiguous()) {
      return absl::InternalError(absl::StrCat("training: parameter '", param.node, "' is ",
                                              param.initial.type().ToString()));
    }
    KILN_ASSIGN_OR_RETURN(s.value, device.Allocate(bytes));
    KILN_RETURN_IF_ERROR(device.CopyToDevice(s.value, param.initial.data(), bytes));
    // With a GradientSync, the buffer the update reads (grad, or accum when accumulating) is
    // placed in the sync's block below instead.
    if (sync_ == nullptr || accumulate) {
      KILN_ASSIGN_OR_RETURN(s.grad, device.Allocate(bytes));
      KILN_RETURN_IF_ERROR(device.Fill(s.grad, 0, bytes));  // a parameter no loss reaches
    }
    if (accumulate) {
      if (sync_ == nullptr) {
        KILN_ASSIGN_OR_RETURN(s.accum, device.Allocate(bytes));
      }
      KILN_ASSIGN_OR_RETURN(s.scratch, device.Allocate(bytes));
      // The accumulating step reads it times momentum 0: fresh memory holding a NaN or an Inf
      // would poison the accumulator (0 x NaN), so it starts at zero.
      KILN_RETURN_IF_ERROR(device.Fill(s.scratch, 0, bytes));
    }
    for (int h = 0; h < history_count_; ++h) {
      KILN_ASSIGN_OR_RETURN(s.history[h], device.Allocate(bytes));
      KILN_RETURN_IF_ERROR(device.Fill(s.history[h], 0, bytes));
    }
    if (!param.gradient.empty()) {
      const TensorType& g = plan.buffers()[plan.outputs().at(param.gradient)].type;
      if (g.dtype() != DataType::kF32 || g.num_elements() != s.count) {
        return absl::InternalError(
            absl::StrCat("training: gradient of '", param.node, "' is ", g.ToString()));
      }
    }
    state_.push_back(s);
  }
  for (const RunningStat& r : train_->tg.running) {
    StatState s;
    s.count = r.initial.type().num_elements();
    const int64_t bytes = s.count * static_cast<int64_t>(sizeof(float));
    KILN_ASSIGN_OR_RETURN(s.value, device.Allocate(bytes));
    KILN_RETURN_IF_ERROR(device.CopyToDevice(s.value, r.initial.data(), bytes));
    KILN_ASSIGN_OR_RETURN(s.next, device.Allocate(bytes));
    stats_.push_back(s);
  }
  return absl::OkStatus();
}

Trainer::~Trainer() {
  tests_.clear();
  if (train_ == nullptr || train_->ctx == nullptr) return;
  Device& device = train_->ctx->device();
  auto in_block = [&](void* p) {
    const char* b = static_cast<const char*>(gradient_block_);
    const char* q = static_cast<const char*>(p);
    return b != nullptr && q >= b && q < b + gradient_block_bytes_;
  };
  for (ParamState& s : state_) {
    for (void* p : {s.value, s.grad, s.accum, s.scratch, s.history[0], s.history[1]}) {
      if (p != nullptr && !in_block(p)) device.Free(p);
    }
  }
  if (gradient_block_ != nullptr) device.Free(gradient_block_);
  for (StatState& s : stats_) {
    device.Free(s.value);
    device.Free(s.next);
  }
  if (norm_scratch_ != nullptr) device.Free(norm_scratch_);
}

absl::Status Trainer::Step(bool read_loss) {
  TrainingNet& net = *train_;
  Device& device = net.ctx->device();
  const int iter_size = optimizer_.iter_size;
  std::map<std::string, const void*> inputs;
  for (const auto& [name, p] : net.data_buffers) inputs[name] = p;
  std::map<std::string, void*> outputs = net.output_buffers;
  for (size_t i = 0; i < state_.size(); ++i) {
    const TrainableParam& param = net.tg.params[i];
    inputs[param.input] = state_[i].value;
    if (!param.gradient.empty()) outputs[param.gradient] = state_[i].grad;
  }
  for (size_t i = 0; i < stats_.size(); ++i) {
    inputs[net.tg.running[i].input] = stats_[i].value;
    outputs[net.tg.running[i].output] = stats_[i].next;
  }
  // A sync that reduces during backward hears of every step of the last pass (the gradients
  // of earlier passes are partial sums, still to be accumulated).
  StepObserver observer;
  if (sync_ != nullptr && sync_->ActsDuringBackward()) {
    observer.after_step = [&](int step, void*) { return sync_->OnStepEnqueued(device, step); };
    observer.call_after = sync_->ObservedSteps();
  }
  double loss = 0;
  for (int k = 0; k < iter_size; ++k) {
    KILN_RETURN_IF_ERROR(net.Feed());
    const bool last = k == iter_size - 1;
    KILN_RETURN_IF_ERROR(
        net.ctx->RunOnDevice(inputs, outputs, last && observer.after_step ? &observer : nullptr));
    double pass_loss = 0;
    for (const auto& [name, weight] : net.tg.losses) {
      if (!read_loss) break;
      KILN_ASSIGN_OR_RETURN(double value, net.ReadScalar(name));
      pass_loss += weight * value;
    }
    // A diverged pass changes nothing the trainer keeps (statistics, gradients, parameters), so
    // the state stays the last good one, for the caller to snapshot. Not with a gradient sync:
    // the other ranks are already reducing, and a rank that left them would hang them.
    diverged_ = read_loss && sync_ == nullptr && !std::isfinite(pass_loss);
    if (diverged_) {
      last_loss_ = pass_loss;
      return absl::FailedPreconditionError(
          absl::StrCat("the loss is ", pass_loss, " at iteration ", iter_,
                       " (diverged: lower base_lr, or use clip_gradients); that iteration's "
                       "update was not applied"));
    }
    loss += pass_loss;
    for (StatState& s : stats_) {
      KILN_RETURN_IF_ERROR(device.CopyWithinDevice(s.value, s.next, s.count * sizeof(float)));
    }
    KILN_RETURN_IF_ERROR(net.CarryState());
    if (iter_size > 1) KILN_RETURN_IF_ERROR(Accumulate(k));
  }
  last_loss_ = loss / iter_size;
  const int window = optimizer_.average_loss;
  recent_losses_.push_back(last_loss_);
  if (static_cast<int>(recent_losses_.size()) > window)
    recent_losses_.erase(recent_losses_.begin());
  if (sync_ != nullptr) {
    std::vector<DeviceSpan> stats;
    for (StatState& st : stats_) stats.push_back({static_cast<float*>(st.value), st.count});
    KILN_RETURN_IF_ERROR(sync_->ReduceStatistics(device, stats));
    KILN_RETURN_IF_ERROR(sync_->ReduceGradients(device));
  }
  KILN_RETURN_IF_ERROR(Update());
  return sync_ != nullptr ? sync_->FinishStep(device) : absl::OkStatus();
}

// accum += grad: an SGD step of rate -1 without momentum or decay adds the gradient to its
// "parameter" (its momentum buffer is scratch).
absl::Status Trainer::Accumulate(int pass) {
  Device& device = train_->ctx->device();
  for (ParamState& s : state_) {
    const int64_t bytes = s.count * static_cast<int64_t>(sizeof(float));
    if (pass == 0) KILN_RETURN_IF_ERROR(device.Fill(s.accum, 0, bytes));
    dnn::SolverStep add;
    add.local_rate = -1.0;
    if (device.kind() == DeviceKind::kCuda) {
      KILN_RETURN_IF_ERROR(dnn::SolverUpdateCuda(
          add, s.count, static_cast<float*>(s.accum), static_cast<float*>(s.grad),
          static_cast<float*>(s.scratch), nullptr, device.stream()));
    } else {
      KILN_RETURN_IF_ERROR(dnn::SolverUpdateHost(add, s.count, static_cast<float*>(s.accum),
                                                 static_cast<float*>(s.grad),
                                                 static_cast<float*>(s.scratch), nullptr));
    }
  }
  return absl::OkStatus();
}

absl::Status Trainer::BindGradientSync(bool accumulate) {
  const ExecutionPlan& plan = *train_->plan;
  Device& device = train_->ctx->device();
  std::vector<GradientSlot> slots;
  for (size_t i = 0; i < state_.size(); ++i) {
    const TrainableParam& param = train_->tg.params[i];
    GradientSlot slot;
    slot.node = param.node;
    slot.count = state_[i].count;
    slot.produced_at = accumulate ? -1 : ProducingStep(plan, param.gradient);
    slots.push_back(slot);
  }
  KILN_ASSIGN_OR_RETURN(GradientLayout layout, sync_->PlanGradients(slots));
  if (layout.offsets.size() != slots.size()) {
    return absl::InternalError(absl::StrCat("training: the gradient sync placed ",
                                            layout.offsets.size(), " gradients of ", slots.size()));
  }
  for (size_t i = 0; i < slots.size(); ++i) {
    const int64_t end = layout.offsets[i] + slots[i].count * static_cast<int64_t>(sizeof(float));
    if (layout.offsets[i] < 0 || layout.offsets[i] % 256 != 0 || end > layout.total_bytes) {
      return absl::InternalError(absl::StrCat("training: the gradient sync placed '", slots[i].node,
                                              "' at ", layout.offsets[i], " in a block of ",
                                              layout.total_bytes, " bytes"));
    }
  }
  gradient_block_bytes_ = std::max<int64_t>(layout.total_bytes, 1);
  KILN_ASSIGN_OR_RETURN(gradient_block_, device.Allocate(gradient_block_bytes_));
  KILN_RETURN_IF_ERROR(device.Fill(gradient_block_, 0, gradient_block_bytes_));
  for (size_t i = 0; i < state_.size(); ++i) {
    void* placed = static_cast<char*>(gradient_block_) + layout.offsets[i];
    (accumulate ? state_[i].accum : state_[i].grad) = placed;
  }
  return sync_->BindGradients(device, gradient_block_);
}

absl::Status Trainer::ShareParameters() {
  std::vector<DeviceSpan> params, stats;
  for (ParamState& s : state_) params.push_back({static_cast<float*>(s.value), s.count});
  for (StatState& s : stats_) stats.push_back({static_cast<float*>(s.value), s.count});
  return sync_->ShareParameters(train_->ctx->device(), params, stats);
}

absl::StatusOr<double> Trainer::TimeSteps(int iterations, int warmup) {
  Device& device = train_->ctx->device();
  for (int i = 0; i < warmup; ++i) KILN_RETURN_IF_ERROR(Step(false));
  KILN_RETURN_IF_ERROR(device.Synchronize());
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<DeviceTimer> timer, device.CreateTimer(iterations + 1));
  for (int i = 0; i < iterations; ++i) {
    KILN_RETURN_IF_ERROR(timer->Record(i));
    KILN_RETURN_IF_ERROR(Step(false));
  }
  KILN_RETURN_IF_ERROR(timer->Record(iterations));
  KILN_RETURN_IF_ERROR(device.Synchronize());
  std::vector<double> ms;
  for (int i = 0; i < iterations; ++i) {
    KILN_ASSIGN_OR_RETURN(double one, timer->ElapsedMs(i, i + 1));
    ms.push_back(one);
  }
  std::sort(ms.begin(), ms.end());
  return ms.empty() ? 0.0 : ms[ms.size() / 2];
}

absl::StatusOr<std::vector<Trainer::StepTime>> Trainer::ProfilePass() {
  KILN_ASSIGN_OR_RETURN(StepProfile profile, train_->ctx->ProfileSteps());
  std::vector<StepTime> out;
  const auto& steps = train_->plan->steps();
  for (size_t i = 0; i < steps.size() && i < profile.step_ms.size(); ++i) {
    const Node& node = *steps[i].node;
    out.push_back({node.op(), node.name(), steps[i].description,
                   node.num_inputs() > 0 ? node.input(0).type().ToString() : "",
                   profile.step_ms[i]});
  }
  return out;
}

TrainerMemory Trainer::Memory() const {
  TrainerMemory m;
  std::vector<const TrainingNet*> nets = {train_.get()};
  for (const auto& t : tests_) nets.push_back(t.get());
  for (const TrainingNet* net : nets) {
    m.weights += net->plan->weights_bytes();
    m.activations += net->plan->activations_bytes();
    m.workspace += net->plan->workspace_bytes();
    for (const auto& [name, buffer] : net->plan->inputs()) {
      if (net->data_buffers.count(name)) m.io += BytesOf(net->plan->buffers()[buffer].type);
    }
    for (const auto& [name, buffer] : net->plan->outputs()) {
      if (net->output_buffers.count(name)) m.io += BytesOf(net->plan->buffers()[buffer].type);
    }
  }
  for (const ParamState& s : state_) {
    const int64_t bytes = s.count * static_cast<int64_t>(sizeof(float));
    m.optimizer += bytes * (2 + history_count_ + (s.accum != nullptr ? 2 : 0));
  }
  for (const StatState& s : stats_)
    m.optimizer += 2 * s.count * static_cast<int64_t>(sizeof(float));
  return m;
}

namespace {

absl::StatusOr<NetProgress> ProgressOf(TrainingNet& net) {
  NetProgress p;
  p.passes = net.passes;
  for (const NetFeed& feed : net.feeds) {
    p.batches_served.push_back(feed.source != nullptr ? feed.source->BatchesServed() : -1);
  }
  KILN_ASSIGN_OR_RETURN(p.carried_state, net.ReadCarriedState());
  return p;
}

absl::Status Restore(TrainingNet& net, const NetProgress& p, const std::string& what,
                     bool carried_state) {
  if (p.batches_served.size() != net.feeds.size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("restore: the progress of ", what, " has ", p.batches_served.size(),
                     " batch sources, the net has ", net.feeds.size()));
  }
  if (p.passes < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("restore: ", what, " has a negative pass count (", p.passes, ")"));
  }
  for (size_t f = 0; f < net.feeds.size(); ++f) {
    BatchSource* source = net.feeds[f].source.get();
    if (source == nullptr || p.batches_served[f] < 0) continue;
    absl::Status s = source->Seek(p.batches_served[f]);
    if (!s.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("restore: ", what, ", batch source ", f, ": ", s.message()));
    }
  }
  // A snapshot written before nets carried state (or by a build that did not) has none: the
  // state then starts again at zeros, as in Caffe's resume.
  if (carried_state && (!p.carried_state.empty() || net.carried.empty())) {
    absl::Status s = net.WriteCarriedState(p.carried_state);
    if (!s.ok()) {
      return absl::FailedPreconditionError(absl::StrCat("restore: ", what, ": ", s.message()));
    }
  }
  net.passes = p.passes;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TrainingProgress> Trainer::Progress() const {
  KILN_RETURN_IF_ERROR(train_->ctx->device().Synchronize());
  TrainingProgress progress;
  KILN_ASSIGN_OR_RETURN(NetProgress trained, ProgressOf(*train_));
  progress.nets.push_back(std::move(trained));
  for (const auto& net : tests_) {
    KILN_ASSIGN_OR_RETURN(NetProgress tested, ProgressOf(*net));
    progress.nets.push_back(std::move(tested));
  }
  return progress;
}

absl::Status Trainer::RestoreProgress(const TrainingProgress& progress) {
  if (progress.nets.empty()) {
    return absl::FailedPreconditionError("restore: the progress records no net");
  }
  // A data-parallel rank other than 0 has no test nets (rank 0 reports): it takes the trained
  // net's progress and leaves the test nets' to rank 0.
  const size_t recorded_tests = progress.nets.size() - 1;
  if (!tests_.empty() && recorded_tests != tests_.size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("restore: the progress is for ", progress.nets.size(), " nets, this run has ",
                     tests_.size() + 1, " (the trained net and ", tests_.size(), " test nets)"));
  }
  // Data-parallel, only rank 0's carried state is in the snapshot; each rank's own is not, so
  // every rank starts its recurrent state again at zeros (docs/TRAINING.md).
  const bool carried = sync_ == nullptr;
  KILN_RETURN_IF_ERROR(Restore(*train_, progress.nets[0], "the trained net", carried));
  for (size_t t = 0; t < tests_.size(); ++t) {
    KILN_RETURN_IF_ERROR(
        Restore(*tests_[t], progress.nets[t + 1], absl::StrCat("test net ", t), carried));
  }
  return absl::OkStatus();
}

double Trainer::smoothed_loss() const {
  if (recent_losses_.empty()) return 0;
  return std::accumulate(recent_losses_.begin(), recent_losses_.end(), 0.0) /
         static_cast<double>(recent_losses_.size());
}

absl::Status Trainer::Update() {
  const OptimizerConfig& p = optimizer_;
  Device& device = train_->ctx->device();
  const bool cuda = device.kind() == DeviceKind::kCuda;
  const int iter_size = p.iter_size;
  auto gradient_of = [&](ParamState& s) {
    return static_cast<float*>(iter_size > 1 ? s.accum : s.grad);
  };
  // The gradients were computed from a loss scaled by loss_scale_ (and, data-parallel, summed
  // over the ranks): every use divides it out.
  const double divisor = loss_scale_ * (sync_ != nullptr ? sync_->gradient_divisor() : 1);
  double scale = 1.0 / (iter_size * divisor);
  if (p.clip_gradients > 0) {
    // Caffe clips the accumulated gradients by their global L2 norm, before anything else.
    double sum = 0;
    if (cuda) {
      KILN_RETURN_IF_ERROR(device.Fill(norm_scratch_, 0, sizeof(double)));
      for (ParamState& s : state_) {
        KILN_RETURN_IF_ERROR(dnn::SumOfSquaresCuda(
            s.count, gradient_of(s), static_cast<double*>(norm_scratch_), device.stream()));
      }
      // The copy waits for the reduced gradients: bound that wait by the sync's timeout first.
      if (sync_ != nullptr) KILN_RETURN_IF_ERROR(sync_->FinishStep(device));
      KILN_RETURN_IF_ERROR(device.CopyToHost(&sum, norm_scratch_, sizeof(double)));
    } else {
      for (ParamState& s : state_) sum += dnn::SumOfSquaresHost(s.count, gradient_of(s));
    }
    const double norm = std::sqrt(sum) / divisor;
    if (norm > p.clip_gradients) scale *= p.clip_gradients / norm;
  }
  last_rate_ = p.learning_rate.At(iter_);
  for (size_t i = 0; i < state_.size(); ++i) {
    const TrainableParam& param = train_->tg.params[i];
    ParamState& s = state_[i];
    dnn::SolverStep step;
    step.type = p.type;
    step.local_rate = last_rate_ * param.lr_mult;
    step.momentum = p.momentum;
    step.momentum2 = p.momentum2;
    step.delta = p.delta;
    step.rms_decay = p.rms_decay;
    step.regularization = p.regularization;
    step.local_decay = p.weight_decay * param.decay_mult;
    step.grad_scale = scale;
    step.iter = iter_;
    float* h1 = static_cast<float*>(s.history[1]);
    absl::Status status =
        cuda ? dnn::SolverUpdateCuda(step, s.count, static_cast<float*>(s.value), gradient_of(s),
                                     static_cast<float*>(s.history[0]), h1, device.stream())
             : dnn::SolverUpdateHost(step, s.count, static_cast<float*>(s.value), gradient_of(s),
                                     static_cast<float*>(s.history[0]), h1);
    if (!status.ok()) {
      return absl::Status(status.code(), absl::StrCat("update of '", param.node, "' (layer '",
                                                      param.layer, "'): ", status.message()));
    }
  }
  ++iter_;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<NetOutput>> Trainer::Test(int index) {
  if (index < 0 || index >= num_test_nets()) {
    return absl::InvalidArgumentError(absl::StrCat("no TEST net ", index));
  }
  TrainingNet& net = *tests_[index];
  KILN_RETURN_IF_ERROR(train_->ctx->device().Synchronize());
  std::map<std::string, const void*> inputs;
  // The TEST net's inputs are the TRAIN net's parameters and statistics, by node name.
  std::map<std::string, void*> by_node;
  for (size_t i = 0; i < train_->tg.params.size(); ++i) {
    by_node[train_->tg.params[i].node] = state_[i].value;
  }
  for (size_t i = 0; i < train_->tg.running.size(); ++i) {
    by_node[train_->tg.running[i].node] = stats_[i].value;
  }
  for (const TrainableParam& param : net.tg.params) inputs[param.input] = by_node.at(param.node);
  return RunEvaluation(net, inputs);
}

absl::StatusOr<std::map<std::string, HostTensor>> Trainer::ReadWeights() const {
  Device& device = train_->ctx->device();
  KILN_RETURN_IF_ERROR(device.Synchronize());
  std::map<std::string, HostTensor> out;
  for (size_t i = 0; i < state_.size(); ++i) {
    HostTensor value = train_->tg.params[i].initial.Clone();
    KILN_RETURN_IF_ERROR(
        device.CopyToHost(value.data(), state_[i].value, state_[i].count * sizeof(float)));
    out[train_->tg.params[i].node] = std::move(value);
  }
  for (size_t i = 0; i < stats_.size(); ++i) {
    HostTensor value = train_->tg.running[i].initial.Clone();
    KILN_RETURN_IF_ERROR(
        device.CopyToHost(value.data(), stats_[i].value, stats_[i].count * sizeof(float)));
    out[train_->tg.running[i].node] = std::move(value);
  }
  return out;
}

}  // namespace kiln
