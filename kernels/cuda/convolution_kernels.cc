// Convolution, Deconvolution and the convolution's two backward ops as graph kernels over the
// convolution primitives.
//
// Convolution is the forward direction of its ConvProblem; Deconvolution is the backward-data
// direction of the convolution whose output is the deconvolution's input (Caffe's definition),
// so both share one problem builder (kernels/dnn_plans/convolution.h, shared with the reference
// kernels) and one algorithm choice.
//
// The epilogue (bias; for a fused Convolution also the residual and the ReLU of
// passes/fuse_conv_epilogue): the residual enters through the convolution's own blend
// (y = conv + 1 * y, with y holding the residual: the planner writes the output over the residual
// when the residual dies here, else it is copied into y first). Forward, bias and ReLU are
// applied by the convolution kernel before its store where the algorithm's path allows it
// (dnn::RunConvolutionForwardWithEpilogue: wgmma, small-channel, Winograd, depthwise);
// otherwise, and for Deconvolution, they are one per-feature affine pass over y afterwards
// (without a ReLU the bias is one broadcast add). Measuring charges that pass to the algorithms
// that need it (ChargeEpiloguePasses).
//
// Algorithm choice, at plan time:
//   heuristic  the primitive library's order (GetConvolutionAlgorithms) within the workspace limit.
//   measure    every applicable algorithm timed on buffers of the node's shapes (as cudnnFind),
//              the fastest kept; the result is remembered in the compile's TuningCache under a
//              key of (direction, problem, dtype, math mode, GPU), so a later compile with the
//              same tuning file measures nothing.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "dnn/cuda/conv/convolution.h"
#include "dnn/cuda/primitive_call.h"
#include "dnn/cuda/primitive_launch.h"
#include "dnn/cuda/tensor_ops.h"
#include "kernels/cuda/convolution_in_dead_bytes.h"
#include "kernels/cuda/graph_kernel.h"
#include "kernels/cuda/graph_kernels.h"
#include "kernels/dnn_plans/convolution.h"
#include "kernels/tuning_cache.h"

namespace kiln {

namespace {

// The heuristic never takes more workspace than this for one convolution, whatever the limit:
// beyond it the faster algorithms gain little and the memory is better left to activations.
constexpr int64_t kHeuristicWorkspaceCap = int64_t{256} << 20;

using dnn_plans::kOutput;

// The node's problem (kernels/dnn_plans/convolution.h, shared with the reference kernels) with
// the direction and the offset of x as the CUDA calls take them.
struct ConvSetup {
  dnn::ConvDirection direction = dnn::ConvDirection::kForward;
  dnn::ConvProblem problem;
  int x_at = 0, w_at = 1, y_at = kOutput;  // as in dnn_plans::ConvPlan
  int64_t x_offset_bytes = 0;
};

const TensorType& TypeAt(const Node& node, int at) {
  return at == kOutput ? node.output_types()[0] : node.input(at).type();
}

void* DataAt(const KernelArgs& a, int at) {
  return at == kOutput ? a.outputs[0].data : a.inputs[at].data;
}

// The problem's x: the node's x, from the window's start.
void* XOf(const ConvSetup& s, const KernelArgs& a) {
  return static_cast<char*>(DataAt(a, s.x_at)) + s.x_offset_bytes;
}

absl::StatusOr<ConvSetup> SetupOf(const Node& node, const KernelOptions& options) {
  const TensorType& x = node.input(0).type();
  // The plan runs 1-d as 2-d; the algorithms here have not been measured or tested on such
  // problems, so the adapter keeps refusing them.
  if (x.rank() - 2 != 2 && x.rank() - 2 != 3) {
    return absl::UnimplementedError("2-d and 3-d convolutions only");
  }
  const dnn::MathMode math = options.allow_tf32 && x.dtype() == DataType::kF32
                                 ? dnn::MathMode::kTf32
                                 : dnn::MathMode::kFp32;
  KILN_ASSIGN_OR_RETURN(dnn_plans::ConvPlan plan,
                        dnn_plans::PlanConvolution(node, dnn_plans::OperandTypes::Of(node), math));
  ConvSetup setup;
  switch (plan.role) {
    case dnn_plans::ConvRole::kForward:
      setup.direction = dnn::ConvDirection::kForward;
      break;
    case dnn_plans::ConvRole::kBackwardData:
      setup.direction = dnn::ConvDirection::kBackwardData;
      break;
    case dnn_plans::ConvRole::kBackwardFilter:
      setup.direction = dnn::ConvDirection::kBackwardFilter;
      break;
  }
  setup.problem = plan.problem;
  setup.x_at = plan.x_at;
  setup.w_at = plan.w_at;
  setup.y_at = plan.y_at;
  setup.x_offset_bytes =
      plan.x_offset * static_cast<int64_t>(DataTypeSize(TypeAt(node, plan.x_at).dtype()));
  return setup;
}

std::string TuningKey(const ConvSetup& s, const TensorType& x, bool tf32,
                      const KernelOptions& options) {
  return absl::StrCat("conv ", dnn::ConvDirectionName(s.direction), " ", s.problem.Key(), " ",
                      DataTypeName(x.dtype()), tf32 ? "/tf32" : "", " @ ", options.device_name);
}

// A device buffer of `bytes` holding uniform values in [-1, 1) of `dtype`, for timing: zeros
// would let some kernels run faster than real data does.
absl::StatusOr<void*> RandomDeviceBuffer(DataType dtype, int64_t elements, uint32_t seed) {
  const size_t element_size = DataTypeSize(dtype);
  std::vector<uint8_t> host(static_cast<size_t>(elements) * element_size);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int64_t i = 0; i < elements; ++i) {
    const float v = dist(rng);
    if (dtype == DataType::kF32) {
      std::memcpy(&host[i * 4], &v, 4);
    } else {
      const uint16_t h = dtype == DataType::kF16 ? FloatToHalf(v) : FloatToBFloat16(v);
      std::memcpy(&host[i * 2], &h, 2);
    }
  }
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, std::max<size_t>(host.size(), 256));
  if (e == cudaSuccess) e = cudaMemcpy(p, host.data(), host.size(), cudaMemcpyHostToDevice);
  if (e != cudaSuccess) {
    cudaGetLastError();
    if (p != nullptr) cudaFree(p);
    return absl::ResourceExhaustedError(
        absl::StrCat("measuring convolution algorithms: ", host.size(),
                     " bytes of test data: ", cudaGetErrorString(e)));
  }
  return p;
}

// A fused bias/ReLU that an algorithm's kernel cannot take runs as a pass over y after it
// (RunEpilogue, which reads and writes y). FindConvolutionAlgorithms times the convolutions
// alone, so each candidate that leaves its epilogue to that pass is charged with the time of a
// pass over y's bytes (a device-to-device copy of them, median of 5): the choice is then the
// fastest convolution with its epilogue (a cuBLAS 1x1 product a little ahead of a kernel that
// applies the ReLU in its store is not, once the extra pass is paid).
absl::Status ChargeEpiloguePasses(dnn::Handle& handle, const ConvSetup& s, void* const buffers[3],
                                  size_t y_bytes, std::vector<dnn::ConvAlgoPerf>* found) {
  cudaStream_t stream = static_cast<cudaStream_t>(handle.stream());
  void* bias = nullptr;
  void* copy = nullptr;
  void* workspace = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  auto release = [&] {
    for (void* b : {bias, copy, workspace})
      if (b != nullptr) cudaFree(b);
    if (start != nullptr) cudaEventDestroy(start);
    if (stop != nullptr) cudaEventDestroy(stop);
  };
  auto check = [&](cudaError_t e, const char* what) {
    return e == cudaSuccess
               ? absl::OkStatus()
               : absl::InternalError(absl::StrCat("measuring the epilogue pass: ", what, ": ",
                                                  cudaGetErrorString(e)));
  };
  absl::Status status = check(cudaMalloc(&bias, static_cast<size_t>(s.problem.k) * 4), "bias");
  if (status.ok()) status = check(cudaMemsetAsync(bias, 0, s.problem.k * 4, stream), "bias");
  if (status.ok()) status = check(cudaMalloc(&copy, y_bytes), "copy of y");
  if (status.ok()) status = check(cudaEventCreate(&start), "event");
  if (status.ok()) status = check(cudaEventCreate(&stop), "event");
  std::vector<float> times;
  for (int i = 0; i < 6 && status.ok(); ++i) {
    status = check(cudaEventRecord(start, stream), "event");
    if (status.ok()) {
      status = check(cudaMemcpyAsync(copy, buffers[2], y_bytes, cudaMemcpyDeviceToDevice, stream),
                     "copy");
    }
    if (status.ok()) status = check(cudaEventRecord(stop, stream), "event");
    if (status.ok()) status = check(cudaEventSynchronize(stop), "event");
    float ms = 0;
    if (status.ok()) status = check(cudaEventElapsedTime(&ms, start, stop), "event");
    if (status.ok() && i > 0) times.push_back(ms);  // the first is a warm-up
  }
  if (!status.ok()) {
    release();
    return status;
  }
  std::sort(times.begin(), times.end());
  const float pass_ms = times[times.size() / 2];
  dnn::ConvEpilogue probe;
  probe.bias = static_cast<const float*>(bias);
  probe.relu = true;
  for (dnn::ConvAlgoPerf& perf : *found) {
    if (!perf.status.ok()) continue;
    if (workspace != nullptr) cudaFree(workspace);
    workspace = nullptr;
    if (perf.workspace_bytes > 0 && cudaMalloc(&workspace, perf.workspace_bytes) != cudaSuccess) {
      cudaGetLastError();
      perf.time_ms += pass_ms;  // unknown: counted as not applied
      continue;
    }
    bool applied = false;
    const absl::Status run = dnn::RunConvolutionForwardWithEpilogue(
        handle, s.problem, perf.algo, 1.0f, 0.0f, buffers[0], buffers[1], buffers[2], workspace,
        perf.workspace_bytes, probe, &applied);
    if (!run.ok() || !applied) perf.time_ms += pass_ms;
  }
  const cudaError_t synced = cudaStreamSynchronize(stream);
  release();
  return check(synced, "synchronize");
}

// Times every algorithm on buffers shaped like the node's (the plan's own arenas do not exist
// yet at compile time; the timing depends only on shapes, strides and dtypes).
absl::StatusOr<dnn::ConvAlgoPerf> Measure(const ConvSetup& s, const Node& node,
                                          size_t workspace_limit) {
  const TensorType& x = TypeAt(node, s.x_at);
  const TensorType& w = TypeAt(node, s.w_at);
  const TensorType& y = TypeAt(node, s.y_at);
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<dnn::Handle> handle, dnn::Handle::Create());
  void* buffers[3] = {nullptr, nullptr, nullptr};
  auto release = [&] {
    for (void* b : buffers)
      if (b != nullptr) cudaFree(b);
  };
  const TensorType* types[3] = {&x, &w, &y};
  for (int i = 0; i < 3; ++i) {
    auto b = RandomDeviceBuffer(types[i]->dtype(), types[i]->span_elements(), 17 + i);
    if (!b.ok()) {
      release();
      return b.status();
    }
    buffers[i] = *b;
  }
  auto found = dnn::FindConvolutionAlgorithms(*handle, s.direction, s.problem, buffers[0],
                                              buffers[1], buffers[2], workspace_limit);
  if (found.ok() && s.direction == dnn::ConvDirection::kForward) {
    auto epilogue = dnn_plans::PlanConvEpilogue(node, dnn_plans::OperandTypes::Of(node));
    if (epilogue.ok() && (epilogue->bias || epilogue->relu)) {
      const absl::Status charged =
          ChargeEpiloguePasses(*handle, s, buffers, y.span_bytes(), &*found);
      if (!charged.ok()) {
        release();
        return charged;
      }
    }
  }
  release();
  if (!found.ok()) return found.status();
  // The fastest, unless one within 5% of it (timing noise is about that) needs less workspace:
  // a plan's workspace is shared by all its steps, so memory saved here is memory saved for
  // the whole net (an FFT barely ahead of a GEMM can cost gigabytes).
  const dnn::ConvAlgoPerf* best = nullptr;
  for (const dnn::ConvAlgoPerf& perf : *found) {
    if (perf.status.ok() && (best == nullptr || perf.time_ms < best->time_ms)) best = &perf;
  }
  if (best != nullptr) {
    const dnn::ConvAlgoPerf* chosen = best;
    for (const dnn::ConvAlgoPerf& perf : *found) {
      if (perf.status.ok() && perf.time_ms <= 1.05f * best->time_ms &&
          perf.workspace_bytes < chosen->workspace_bytes) {
        chosen = &perf;
      }
    }
    return *chosen;
  }
  return absl::UnimplementedError(
      absl::StrCat("no convolution algorithm ran within ", workspace_limit, " workspace bytes"));
}

absl::StatusOr<dnn::ConvAlgoPerf> ChooseAlgorithm(const ConvSetup& s, const Node& node,
                                                  const KernelOptions& options) {
  const bool tf32 = s.problem.math == dnn::MathMode::kTf32;
  if (options.measure_algorithms && options.without_device) {
    return absl::FailedPreconditionError(
        "measuring convolution algorithms needs the GPU; a plan for an absent one takes the "
        "heuristic's choice");
  }
  if (options.measure_algorithms) {
    const std::string key = TuningKey(s, node.input(0).type(), tf32, options);
    if (options.tuning != nullptr) {
      if (std::optional<std::string> saved = options.tuning->Lookup(key)) {
        // "algorithm workspace_bytes time_ms"
        std::vector<std::string> parts = absl::StrSplit(*saved, ' ');
        dnn::ConvAlgoPerf perf;
        uint64_t bytes = 0;
        auto algo =
            parts.empty() ? absl::InvalidArgumentError("empty") : dnn::ParseConvAlgo(parts[0]);
        if (algo.ok() && parts.size() >= 2 && absl::SimpleAtoi(parts[1], &bytes) &&
            static_cast<int64_t>(bytes) <= options.workspace_limit &&
            dnn::CheckConvAlgoSupported(s.direction, s.problem, *algo).ok()) {
          perf.algo = *algo;
          perf.workspace_bytes = bytes;
          // Entries written before times were kept have none: measured = unknown.
          double ms = -1;
          perf.time_ms =
              parts.size() >= 3 && absl::SimpleAtod(parts[2], &ms) ? static_cast<float>(ms) : -1;
          return perf;
        }
        // A stale or foreign entry is measured again and overwritten.
      }
    }
    KILN_ASSIGN_OR_RETURN(dnn::ConvAlgoPerf perf,
                          Measure(s, node, static_cast<size_t>(options.workspace_limit)));
    if (options.tuning != nullptr && options.save_tuning) {
      options.tuning->Insert(key, absl::StrCat(dnn::ConvAlgoName(perf.algo), " ",
                                               perf.workspace_bytes, " ", perf.time_ms));
    }
    return perf;
  }
  dnn::Handle probe(nullptr, nullptr,
                    options.without_device && options.multiprocessors > 0
                        ? options.multiprocessors
                        : cuda_graph::CurrentDeviceMultiprocessors());
  KILN_ASSIGN_OR_RETURN(
      std::vector<dnn::ConvAlgoPerf> algos,
      dnn::GetConvolutionAlgorithms(
          probe, s.direction, s.problem, dnn::ConvAlgoPreference::kSpecifyWorkspaceLimit,
          static_cast<size_t>(std::min(options.workspace_limit, kHeuristicWorkspaceCap)),
          options.without_device));
  if (algos.empty()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("no convolution algorithm fits the workspace limit of ",
                     options.workspace_limit, " bytes"));
  }
  return algos.front();
}

// What runs after the convolution's products (kernels/dnn_plans/convolution.h), and where a
// bias that is not packed f32 is staged.
struct Epilogue : dnn_plans::ConvEpiloguePlan {
  // A 16-bit bias is converted to packed f32 (the affine pass's parameter type) in the
  // workspace, after the convolution's own bytes.
  bool stage_bias = false;
  dnn::TensorDescriptor bias_f32_d;
  size_t bias_offset = 0;
};

absl::StatusOr<Epilogue> EpilogueOf(const Node& node, size_t conv_workspace) {
  Epilogue e;
  KILN_ASSIGN_OR_RETURN(static_cast<dnn_plans::ConvEpiloguePlan&>(e),
                        dnn_plans::PlanConvEpilogue(node, dnn_plans::OperandTypes::Of(node)));
  if (e.bias) {
    // The f32 packed bias that the affine pass and the convolution kernel's own epilogue read.
    e.stage_bias = e.bias_d.dtype != DataType::kF32 || e.bias_d.strides[1] != 1;
    if (e.stage_bias) {
      std::vector<int64_t> packed(e.bias_d.rank(), 1);
      KILN_ASSIGN_OR_RETURN(e.bias_f32_d,
                            dnn::TensorDescriptor::Create(DataType::kF32, e.bias_d.dims, packed));
      e.bias_offset = (conv_workspace + 255) / 256 * 256;
    }
  }
  return e;
}

// The bias as packed f32 (staged into the workspace when it is not), or null without a bias.
absl::StatusOr<const float*> F32Bias(const Epilogue& e, dnn::Handle& handle, const KernelArgs& a) {
  if (!e.bias) return nullptr;
  if (!e.stage_bias) return static_cast<const float*>(a.inputs[2].data);
  void* staged = static_cast<char*>(a.workspace) + e.bias_offset;
  KILN_RETURN_IF_ERROR(
      dnn::TransformTensor(handle, 1.0f, e.bias_d, a.inputs[2].data, 0.0f, e.bias_f32_d, staged));
  return static_cast<const float*>(staged);
}

// The bias and ReLU as a forward kernel applies them before its store; `bias` from F32Bias.
dnn::ConvEpilogue InKernel(const Epilogue& e, const float* bias) {
  dnn::ConvEpilogue in_kernel;
  in_kernel.bias = bias;
  in_kernel.relu = e.relu;
  in_kernel.relu_slope = e.slope;
  return in_kernel;
}

// The epilogue as a pass over y after the convolution; `bias` from F32Bias.
absl::Status RunEpilogue(const Epilogue& e, dnn::Handle& handle, const KernelArgs& a,
                         const float* bias) {
  void* out = a.outputs[0].data;
  if (!e.relu) {
    return e.bias ? dnn::AddTensor(handle, 1.0f, e.bias_d, a.inputs[2].data, 1.0f, e.out_d, out)
                  : absl::OkStatus();
  }
  KILN_ASSIGN_OR_RETURN(const cuda_graph::IdentityParams* id,
                        cuda_graph::IdentityFor(a, e.channels));
  namespace in = dnn::internal;
  // y = act(1 * (y - 0) + bias), per output channel, in place.
  cuda::ElementwiseCall c =
      in::ElementwiseOver(cuda::ElementwiseOp::kAffine, e.out_d, out, 1.0f, 0.0f);
  in::AddInput(c, in::OperandOf(e.out_d, out));
  for (int d = 0; d < e.out_d.rank(); ++d) c.feature_strides[d] = d == 1 ? 1 : 0;
  c.params[0] = id->ones();
  c.params[1] = id->zeros();
  c.params[2] = bias != nullptr ? bias : id->zeros();
  c.params[3] = id->zeros();
  c.then_activation = true;
  c.act.kind = dnn::kActRelu;
  c.act.coef = e.slope;
  return in::LaunchStatus(cuda::LaunchElementwise(c, handle.stream()), "cuda Convolution");
}

absl::StatusOr<cuda_graph::PreparedKernel> PrepareConvolution(const Node& node,
                                                              const KernelOptions& options) {
  KILN_ASSIGN_OR_RETURN(ConvSetup s, SetupOf(node, options));
  KILN_ASSIGN_OR_RETURN(dnn::ConvAlgoPerf perf, ChooseAlgorithm(s, node, options));
  // The input dies here (the planner says so only when the workspace would lift its peak):
  // the same algorithm in two parts of the batch, with its scratch in dead bytes.
  std::optional<cuda_graph::DeadBytesSplit> dead;
  if (options.input_dies_here && perf.workspace_bytes > 0 &&
      s.direction == dnn::ConvDirection::kForward && s.x_at == 0 && s.y_at == kOutput &&
      node.num_inputs() <= 3) {
    dnn::Handle probe(nullptr, nullptr,
                      options.without_device && options.multiprocessors > 0
                          ? options.multiprocessors
                          : cuda_graph::CurrentDeviceMultiprocessors());
    dead = cuda_graph::SplitForDeadBytes(probe, s.problem, perf.algo, node.input(0).type(),
                                         node.output_types()[0]);
  }
  const size_t chosen_workspace = perf.workspace_bytes;
  if (dead) perf.workspace_bytes = 0;
  KILN_ASSIGN_OR_RETURN(Epilogue e, EpilogueOf(node, perf.workspace_bytes));
  cuda_graph::PreparedKernel k;
  const size_t conv_workspace = perf.workspace_bytes;
  k.workspace_bytes =
      e.bias && e.stage_bias ? e.bias_offset + static_cast<size_t>(e.channels) * 4 : conv_workspace;
  k.measured_ms = options.measure_algorithms ? perf.time_ms : -1;
  k.description = absl::StrCat(
      "algo=", dnn::ConvAlgoName(perf.algo), s.problem.math == dnn::MathMode::kTf32 ? " tf32" : "",
      e.residual ? " +residual" : "", e.relu ? " +relu" : "",
      // Which layers take workspace, for `kiln time`'s table.
      conv_workspace > 0 ? absl::StrFormat(" workspace %.1f MiB", conv_workspace / 1048576.0) : "",
      dead ? absl::StrFormat(" workspace %.1f MiB in dead bytes (the batch in two parts)",
                             chosen_workspace / 1048576.0)
           : "");
  // The output may take the residual's bytes: the blend reads each element before the same
  // launch writes it.
  if (e.residual) k.in_place_input = 3;
  const dnn::ConvAlgo algo = perf.algo;
  if (dead) {
    k.run = [s, algo, e, split = *dead](dnn::Handle& handle, const KernelArgs& a) {
      KILN_ASSIGN_OR_RETURN(const float* bias, F32Bias(e, handle, a));
      const dnn::ConvEpilogue in_kernel = InKernel(e, bias);
      bool applied = false;
      KILN_RETURN_IF_ERROR(cuda_graph::RunInDeadBytes(
          handle, split, algo, a.inputs[0].data, XOf(s, a), DataAt(a, s.w_at), a.outputs[0].data,
          e.bias || e.relu ? &in_kernel : nullptr, &applied));
      return applied ? absl::OkStatus() : RunEpilogue(e, handle, a, bias);
    };
    return k;
  }
  k.run = [s, algo, e, conv_workspace](dnn::Handle& handle, const KernelArgs& a) {
    void* out = a.outputs[0].data;
    float beta = 0.0f;
    if (e.residual) {
      if (a.inputs[3].data != out) {
        KILN_RETURN_IF_ERROR(
            dnn::TransformTensor(handle, 1.0f, e.residual_d, a.inputs[3].data, 0.0f, e.out_d, out));
      }
      beta = 1.0f;
    }
    if (s.direction != dnn::ConvDirection::kForward || (!e.bias && !e.relu)) {
      KILN_RETURN_IF_ERROR(dnn::RunConvolution(handle, s.direction, s.problem, algo, 1.0f, beta,
                                               XOf(s, a), DataAt(a, s.w_at), DataAt(a, s.y_at),
                                               a.workspace, conv_workspace));
      const float* bias = nullptr;  // only the ReLU's affine pass reads the f32 copy
      if (e.relu) {
        KILN_ASSIGN_OR_RETURN(bias, F32Bias(e, handle, a));
      }
      return RunEpilogue(e, handle, a, bias);
    }
    // Forward: bias and ReLU in the convolution kernel's store where its path takes them (the
    // staged bias sits past the convolution's workspace, so it survives the convolution).
    KILN_ASSIGN_OR_RETURN(const float* bias, F32Bias(e, handle, a));
    const dnn::ConvEpilogue in_kernel = InKernel(e, bias);
    bool applied = false;
    KILN_RETURN_IF_ERROR(dnn::RunConvolutionForwardWithEpilogue(
        handle, s.problem, algo, 1.0f, beta, XOf(s, a), DataAt(a, s.w_at), DataAt(a, s.y_at),
        a.workspace, conv_workspace, in_kernel, &applied));
    return applied ? absl::OkStatus() : RunEpilogue(e, handle, a, bias);
  };
  return k;
}

absl::Status CheckConvolution(const Node& node) { return SetupOf(node, KernelOptions()).status(); }

}  // namespace

absl::Status RegisterCudaConvolutionKernels(KernelRegistry& registry) {
  for (const char* op :
       {"Convolution", "Deconvolution", "ConvolutionBackwardData", "ConvolutionBackwardFilter"}) {
    KILN_RETURN_IF_ERROR(cuda_graph::RegisterGraphKernel(registry, op, "any", "dnn_conv",
                                                         CheckConvolution, PrepareConvolution));
  }
  return absl::OkStatus();
}

}  // namespace kiln
