// Convolution, Deconvolution and the convolution's two backward ops as graph kernels over the
// convolution primitives.
//
// Convolution is the forward direction of its ConvProblem; Deconvolution is the backward-data
// direction of the convolution whose output is the deconvolution's input (Caffe's definition),
// so both share one problem builder and one algorithm choice.
//
// The epilogue (bias; for a fused Convolution also the residual and the ReLU of
// passes/fuse_conv_epilogue): the residual enters through the convolution's own blend
// (y = conv + 1 * y, with y holding the residual: the planner writes the output over the residual
// when the residual dies here, else it is copied into y first). Forward, bias and ReLU are
// applied by the convolution kernel before its store where the algorithm's path allows it
// (dnn::RunConvolutionForwardWithEpilogue: wgmma, small-channel, Winograd); otherwise, and for
// Deconvolution, they are one per-feature affine pass over y afterwards (without a ReLU the bias
// is one broadcast add).
//
// Algorithm choice, at plan time:
//   heuristic  the primitive library's order (GetConvolutionAlgorithms) within the workspace limit.
//   measure    every applicable algorithm timed on buffers of the node's shapes (as cudnnFind),
//              the fastest kept; the result is remembered in the compile's TuningCache under a
//              key of (direction, problem, dtype, math mode, GPU), so a later compile with the
//              same tuning file measures nothing.
#include <cuda_runtime_api.h>

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
#include "kernels/tuning_cache.h"
#include "ops/convolution_params.h"

namespace kiln {

namespace {

// The heuristic never takes more workspace than this for one convolution, whatever the limit:
// beyond it the faster algorithms gain little and the memory is better left to activations.
constexpr int64_t kHeuristicWorkspaceCap = int64_t{256} << 20;

// Which of a node's values plays a role of the convolution: input i, or kOutput.
constexpr int kOutput = -1;

struct ConvSetup {
  dnn::ConvDirection direction = dnn::ConvDirection::kForward;
  dnn::ConvProblem problem;
  // Where the problem's x, w and y are among the node's values:
  //   Convolution                x = in0, w = in1, y = out (forward)
  //   Deconvolution              x = out, w = in1, y = in0 (backward data of the convolution
  //   ConvolutionBackwardData    x = out, w = in1, y = in0  from the output to the input)
  //   ConvolutionBackwardFilter  x = in0, w = out, y = in1 (backward filter)
  int x_at = 0, w_at = 1, y_at = kOutput;
  // Bytes from x's buffer to where the problem's x starts: a pad_end node's negative padding
  // is a window that starts inside x (the problem sees that window, with no padding there).
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

// A pad_end node's padding as the primitive takes it (>= 0 on both sides): negative padding
// before a dim moves x's start into the tensor, negative padding after it shortens x. The
// output is unchanged: it reads the same input positions.
absl::Status WindowOfX(const ConvolutionParams& params, const TensorType& x,
                       dnn::TensorDescriptor& xd, std::vector<int64_t>& pad,
                       std::vector<int64_t>& pad_end, int64_t& offset_bytes) {
  pad = params.pad;
  pad_end = params.pad_end;
  offset_bytes = 0;
  for (size_t i = 0; i < pad.size(); ++i) {
    const int d = 2 + static_cast<int>(i);
    if (pad[i] < 0) {
      offset_bytes += -pad[i] * x.stride(d) * static_cast<int64_t>(DataTypeSize(x.dtype()));
      xd.dims[d] += pad[i];
      pad[i] = 0;
    }
    if (pad_end[i] < 0) {
      xd.dims[d] += pad_end[i];
      pad_end[i] = 0;
    }
    if (xd.dims[d] < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("cuda Convolution: pads ", params.pad[i], " and ", params.pad_end[i],
                       " leave no input in spatial dim ", i, " of ", x.ToString()));
    }
  }
  return absl::OkStatus();
}

// The primitive's error prefix (a literal: the problem keeps the pointer).
const char* WhereOf(const Node& node) {
  if (node.kind() == OpKind::kDeconvolution) return "cuda Deconvolution";
  if (node.kind() == OpKind::kConvolutionBackwardData) return "cuda ConvolutionBackwardData";
  if (node.kind() == OpKind::kConvolutionBackwardFilter) return "cuda ConvolutionBackwardFilter";
  return "cuda Convolution";
}

absl::StatusOr<ConvSetup> SetupOf(const Node& node, const KernelOptions& options) {
  ConvSetup setup;
  if (node.kind() == OpKind::kDeconvolution || node.kind() == OpKind::kConvolutionBackwardData) {
    setup.direction = dnn::ConvDirection::kBackwardData;
    setup.x_at = kOutput;
    setup.y_at = 0;
  } else if (node.kind() == OpKind::kConvolutionBackwardFilter) {
    setup.direction = dnn::ConvDirection::kBackwardFilter;
    setup.w_at = kOutput;
    setup.y_at = 1;
  }
  const TensorType& in = TypeAt(node, setup.x_at);
  const TensorType& w = TypeAt(node, setup.w_at);
  const TensorType& out = TypeAt(node, setup.y_at);
  const int nd = in.rank() - 2;
  if (nd != 2 && nd != 3) return absl::UnimplementedError("2-d and 3-d convolutions only");
  KILN_ASSIGN_OR_RETURN(ConvolutionParams params, ConvolutionParams::FromAttrs(node.attrs(), nd));
  if (w.dtype() != in.dtype() || out.dtype() != in.dtype()) {
    return absl::UnimplementedError(absl::StrCat("input ", in.ToString(), ", filter ", w.ToString(),
                                                 " and output ", out.ToString(),
                                                 " must share a dtype"));
  }
  dnn::TensorFormat filter_format = dnn::TensorFormat::kNCHW;
  if (w.IsChannelsLast() && !w.IsContiguous()) {
    filter_format = dnn::TensorFormat::kNHWC;
  } else if (!w.IsContiguous()) {
    return absl::UnimplementedError(
        absl::StrCat("the filter must be packed KCRS or KRSC, got ", w.ToString()));
  }
  KILN_ASSIGN_OR_RETURN(dnn::FilterDescriptor wd,
                        dnn::FilterDescriptor::Create(w.dtype(), filter_format, w.dims()));
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor ind, cuda_graph::DescriptorOf(in));
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor outd, cuda_graph::DescriptorOf(out));
  const dnn::MathMode math = options.allow_tf32 && in.dtype() == DataType::kF32
                                 ? dnn::MathMode::kTf32
                                 : dnn::MathMode::kFp32;
  std::vector<int64_t> pad = params.pad, pad_end = params.pad_end;
  if (params.asymmetric) {
    if (setup.direction != dnn::ConvDirection::kForward) {
      return absl::UnimplementedError("cuda: asymmetric padding (pad_end) is forward-only");
    }
    KILN_RETURN_IF_ERROR(WindowOfX(params, in, ind, pad, pad_end, setup.x_offset_bytes));
  }
  KILN_ASSIGN_OR_RETURN(dnn::ConvolutionDescriptor conv,
                        dnn::ConvolutionDescriptor::Create(
                            pad, params.stride, params.dilation, params.group,
                            params.flip_filter ? dnn::ConvolutionMode::kConvolution
                                               : dnn::ConvolutionMode::kCrossCorrelation,
                            math));
  if (params.asymmetric) {
    KILN_ASSIGN_OR_RETURN(conv, conv.WithPadsEnd(pad_end));
  }
  KILN_ASSIGN_OR_RETURN(setup.problem, dnn::MakeConvProblem(ind, wd, conv, outd, WhereOf(node)));
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

// What runs after the convolution's products.
struct Epilogue {
  bool bias = false, residual = false, relu = false;
  float slope = 0;
  dnn::TensorDescriptor bias_d, out_d, residual_d;
  // A 16-bit bias is converted to packed f32 (the affine pass's parameter type) in the
  // workspace, after the convolution's own bytes.
  bool stage_bias = false;
  dnn::TensorDescriptor bias_f32_d;
  size_t bias_offset = 0;
  int64_t channels = 0;
};

absl::StatusOr<Epilogue> EpilogueOf(const Node& node, size_t conv_workspace) {
  Epilogue e;
  const TensorType& out = node.output_types()[0];
  e.bias = node.num_inputs() > 2;
  e.residual = node.num_inputs() > 3;
  e.relu = node.attrs().count("activation") && node.GetString("activation") == "relu";
  e.slope = e.relu ? static_cast<float>(node.GetFloat("negative_slope")) : 0.0f;
  e.channels = out.dim(1);
  KILN_ASSIGN_OR_RETURN(e.out_d, cuda_graph::DescriptorOf(out));
  if (e.residual) {
    KILN_ASSIGN_OR_RETURN(e.residual_d, cuda_graph::DescriptorOf(node.input(3).type()));
  }
  if (e.bias) {
    std::vector<int64_t> dims(out.rank(), 1), strides(out.rank(), 1);
    dims[1] = out.dim(1);
    const TensorType& b = node.input(2).type();
    strides[1] = b.rank() == 1 ? b.stride(0) : 1;
    KILN_ASSIGN_OR_RETURN(e.bias_d, dnn::TensorDescriptor::Create(b.dtype(), dims, strides));
    // The f32 packed bias that the affine pass and the convolution kernel's own epilogue read.
    e.stage_bias = b.dtype() != DataType::kF32 || strides[1] != 1;
    if (e.stage_bias) {
      std::vector<int64_t> packed(out.rank(), 1);
      KILN_ASSIGN_OR_RETURN(e.bias_f32_d,
                            dnn::TensorDescriptor::Create(DataType::kF32, dims, packed));
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
