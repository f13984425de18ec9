#include "training/training_net.h"

#include <random>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/all_kernels.h"

namespace kiln {

namespace {

int64_t BytesOf(const TensorType& t) { return t.span_bytes(); }

// Allocates the device buffer of each fed input; a synthetic feed's are filled here, once.
absl::Status AllocateFeeds(TrainingNet& net, uint64_t synthetic_seed) {
  Device& device = net.ctx->device();
  const ExecutionPlan& plan = *net.plan;
  for (const NetFeed& feed : net.feeds) {
    for (size_t k = 0; k < feed.inputs.size(); ++k) {
      const std::string& name = feed.inputs[k];
      if (name.empty() || !plan.inputs().count(name) || net.data_buffers.count(name)) continue;
      const TensorType& t = plan.buffers()[plan.inputs().at(name)].type;
      if (t.dtype() != DataType::kF32 || !t.IsContiguous()) {
        return absl::InternalError(
            absl::StrCat("training: data input '", name, "' is ", t.ToString()));
      }
      KILN_ASSIGN_OR_RETURN(net.data_buffers[name], device.Allocate(BytesOf(t)));
      net.data_elements[name] = t.num_elements();
      if (feed.source != nullptr) continue;
      // Synthetic: values N(0, 1) for the first input, labels 0..9 for the others (NetFeed).
      std::mt19937 rng(static_cast<uint32_t>(synthetic_seed));
      std::normal_distribution<float> normal;
      std::vector<float> values(static_cast<size_t>(t.num_elements()));
      const bool indices = k > 0 || feed.synthetic_indices_only;
      for (size_t i = 0; i < values.size(); ++i) {
        values[i] = indices ? static_cast<float>(i % 10) : normal(rng);
      }
      KILN_RETURN_IF_ERROR(device.CopyToDevice(net.data_buffers[name], values.data(),
                                               values.size() * sizeof(float)));
    }
  }
  return absl::OkStatus();
}

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
  for (NetFeed& feed : feeds) {
    if (feed.source == nullptr) continue;  // synthetic data: filled once
    KILN_RETURN_IF_ERROR(feed.source->NextBatch(batch));
    for (size_t k = 0; k < feed.inputs.size() && k < batch.size(); ++k) {
      auto buffer = data_buffers.find(feed.inputs[k]);
      if (buffer == data_buffers.end()) continue;
      // A source is the caller's code: a batch of another size would write past the buffer.
      const int64_t want = data_elements.at(feed.inputs[k]);
      if (static_cast<int64_t>(batch[k].size()) != want) {
        return absl::InvalidArgumentError(absl::StrCat("training: the batch source gave ",
                                                       batch[k].size(), " values for input '",
                                                       feed.inputs[k], "', which holds ", want));
      }
      KILN_RETURN_IF_ERROR(ctx->device().CopyToDevice(buffer->second, batch[k].data(),
                                                      batch[k].size() * sizeof(float)));
    }
  }
  return absl::OkStatus();
}

absl::Status TrainingNet::CarryState() {
  for (size_t i = 0; i < carried.size(); ++i) {
    KILN_RETURN_IF_ERROR(ctx->device().CopyWithinDevice(
        carried[i].first, output_buffers.at(tg.carried[i].output), carried[i].second));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::vector<float>>> TrainingNet::ReadCarriedState() {
  std::vector<std::vector<float>> values;
  for (const auto& [buffer, bytes] : carried) {
    std::vector<float> v(static_cast<size_t>(bytes) / sizeof(float));
    KILN_RETURN_IF_ERROR(ctx->device().CopyToHost(v.data(), buffer, bytes));
    values.push_back(std::move(v));
  }
  return values;
}

absl::Status TrainingNet::WriteCarriedState(const std::vector<std::vector<float>>& values) {
  if (values.size() != carried.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the net carries ", carried.size(), " recurrent states, the snapshot ", values.size()));
  }
  for (size_t i = 0; i < carried.size(); ++i) {
    const int64_t bytes = static_cast<int64_t>(values[i].size() * sizeof(float));
    if (bytes != carried[i].second) {
      return absl::InvalidArgumentError(
          absl::StrCat("carried state '", tg.carried[i].input, "' holds ",
                       carried[i].second / static_cast<int64_t>(sizeof(float)),
                       " values, the snapshot ", values[i].size()));
    }
  }
  for (size_t i = 0; i < carried.size(); ++i) {
    KILN_RETURN_IF_ERROR(
        ctx->device().CopyToDevice(carried[i].first, values[i].data(), carried[i].second));
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

absl::StatusOr<std::unique_ptr<TrainingNet>> CompileTrainingNet(TrainableGraph tg,
                                                                std::vector<NetFeed> feeds,
                                                                const CompileOptions& compile,
                                                                uint64_t synthetic_seed,
                                                                const std::string& what) {
  auto net = std::make_unique<TrainingNet>();
  net->tg = std::move(tg);
  net->feeds = std::move(feeds);
  CompileOptions options = compile;
  options.optimize = false;        // the inference rewrites (BatchNorm folding...) do not train
  options.device_bound_io = true;  // parameters, gradients and data live in the trainer's buffers
  absl::StatusOr<std::unique_ptr<ExecutionPlan>> plan =
      Compile(*net->tg.graph, DefaultKernelRegistry(), options);
  if (!plan.ok()) {
    return absl::Status(plan.status().code(), absl::StrCat(what, ": ", plan.status().message()));
  }
  net->plan = std::move(*plan);
  KILN_ASSIGN_OR_RETURN(net->ctx, ExecutionContext::Create(*net->plan));
  KILN_RETURN_IF_ERROR(AllocateFeeds(*net, synthetic_seed));
  Device& device = net->ctx->device();
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
  // Carried states start at zeros; the plan must keep their input and output of one f32 type.
  for (const CarriedState& c : net->tg.carried) {
    const ExecutionPlan& plan = *net->plan;
    if (!plan.inputs().count(c.input) || !plan.outputs().count(c.output)) {
      return absl::InternalError(
          absl::StrCat(what, ": the plan lost carried state '", c.input, "' -> '", c.output, "'"));
    }
    const TensorType& in = plan.buffers()[plan.inputs().at(c.input)].type;
    const TensorType& out = plan.buffers()[plan.outputs().at(c.output)].type;
    if (in.dtype() != DataType::kF32 || in != out || !in.IsContiguous()) {
      return absl::InternalError(absl::StrCat(what, ": carried state '", c.input, "' is ",
                                              in.ToString(), ", its next value ", out.ToString()));
    }
    const int64_t bytes = BytesOf(in);
    KILN_ASSIGN_OR_RETURN(void* buffer, device.Allocate(bytes));
    KILN_RETURN_IF_ERROR(device.Fill(buffer, 0, bytes));
    net->data_buffers[c.input] = buffer;  // freed with the others
    net->carried.push_back({buffer, bytes});
  }
  return net;
}

absl::StatusOr<std::vector<NetOutput>> RunEvaluation(TrainingNet& net,
                                                     std::map<std::string, const void*> inputs) {
  for (const auto& [name, p] : net.data_buffers) inputs[name] = p;
  std::vector<NetOutput> out;
  std::map<std::string, double> weights(net.tg.losses.begin(), net.tg.losses.end());
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
    KILN_RETURN_IF_ERROR(net.CarryState());
    for (NetOutput& o : out) {
      KILN_ASSIGN_OR_RETURN(double v, net.ReadScalar(o.name));
      o.value += v / iterations;
    }
  }
  return out;
}

}  // namespace kiln
