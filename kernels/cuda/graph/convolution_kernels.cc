// Convolution and Deconvolution as graph kernels over the convolution primitives.
//
// Convolution is the forward direction of its ConvProblem; Deconvolution is the backward-data
// direction of the convolution whose output is the deconvolution's input (Caffe's definition),
// so both share one problem builder and one algorithm choice. The bias is a broadcast add after
// the convolution.
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
#include "absl/strings/str_split.h"
#include "engine/status_macros.h"
#include "kernels/cuda/convolution.h"
#include "kernels/cuda/graph/graph_kernel.h"
#include "kernels/cuda/graph/graph_kernels.h"
#include "kernels/cuda/tensor_ops.h"
#include "kernels/tuning_cache.h"
#include "ops/convolution_params.h"

namespace kiln {

namespace {

// The heuristic never takes more workspace than this for one convolution, whatever the limit:
// beyond it the faster algorithms gain little and the memory is better left to activations.
constexpr int64_t kHeuristicWorkspaceCap = int64_t{256} << 20;

struct ConvSetup {
  dnn::ConvDirection direction = dnn::ConvDirection::kForward;
  dnn::ConvProblem problem;
  // Which of the node's values play the convolution's x and y (the filter is always input 1).
  bool x_is_output = false;  // Deconvolution: the problem's x is the node's output.
};

absl::StatusOr<ConvSetup> SetupOf(const Node& node, const KernelOptions& options) {
  const bool deconv = node.op() == "Deconvolution";
  const TensorType& in = node.input(0).type();
  const TensorType& w = node.input(1).type();
  const TensorType& out = node.output_types()[0];
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
  KILN_ASSIGN_OR_RETURN(dnn::ConvolutionDescriptor conv,
                        dnn::ConvolutionDescriptor::Create(
                            params.pad, params.stride, params.dilation, params.group,
                            params.flip_filter ? dnn::ConvolutionMode::kConvolution
                                               : dnn::ConvolutionMode::kCrossCorrelation,
                            math));
  ConvSetup setup;
  setup.x_is_output = deconv;
  setup.direction = deconv ? dnn::ConvDirection::kBackwardData : dnn::ConvDirection::kForward;
  KILN_ASSIGN_OR_RETURN(setup.problem,
                        dnn::MakeConvProblem(deconv ? outd : ind, wd, conv, deconv ? ind : outd,
                                             deconv ? "cuda Deconvolution" : "cuda Convolution"));
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
  const TensorType& x = s.x_is_output ? node.output_types()[0] : node.input(0).type();
  const TensorType& w = node.input(1).type();
  const TensorType& y = s.x_is_output ? node.input(0).type() : node.output_types()[0];
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
          return perf;
        }
        // A stale or foreign entry is measured again and overwritten.
      }
    }
    KILN_ASSIGN_OR_RETURN(dnn::ConvAlgoPerf perf,
                          Measure(s, node, static_cast<size_t>(options.workspace_limit)));
    if (options.tuning != nullptr) {
      options.tuning->Insert(key, absl::StrCat(dnn::ConvAlgoName(perf.algo), " ",
                                               perf.workspace_bytes, " ", perf.time_ms));
    }
    return perf;
  }
  dnn::Handle probe(nullptr, nullptr, cuda_graph::CurrentDeviceMultiprocessors());
  KILN_ASSIGN_OR_RETURN(
      std::vector<dnn::ConvAlgoPerf> algos,
      dnn::GetConvolutionAlgorithms(
          probe, s.direction, s.problem, dnn::ConvAlgoPreference::kSpecifyWorkspaceLimit,
          static_cast<size_t>(std::min(options.workspace_limit, kHeuristicWorkspaceCap))));
  if (algos.empty()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("no convolution algorithm fits the workspace limit of ",
                     options.workspace_limit, " bytes"));
  }
  return algos.front();
}

absl::StatusOr<cuda_graph::PreparedKernel> PrepareConvolution(const Node& node,
                                                              const KernelOptions& options) {
  KILN_ASSIGN_OR_RETURN(ConvSetup s, SetupOf(node, options));
  KILN_ASSIGN_OR_RETURN(dnn::ConvAlgoPerf perf, ChooseAlgorithm(s, node, options));
  const bool bias = node.num_inputs() > 2;
  dnn::TensorDescriptor bias_d, out_d;
  if (bias) {
    const TensorType& out = node.output_types()[0];
    std::vector<int64_t> dims(out.rank(), 1), strides(out.rank(), 1);
    dims[1] = out.dim(1);
    const TensorType& b = node.input(2).type();
    KILN_ASSIGN_OR_RETURN(bias_d, dnn::TensorDescriptor::Create(b.dtype(), dims, strides));
    KILN_ASSIGN_OR_RETURN(out_d, cuda_graph::DescriptorOf(out));
  }
  cuda_graph::PreparedKernel k;
  k.workspace_bytes = perf.workspace_bytes;
  k.description = absl::StrCat("algo=", dnn::ConvAlgoName(perf.algo),
                               s.problem.math == dnn::MathMode::kTf32 ? " tf32" : "");
  const dnn::ConvAlgo algo = perf.algo;
  k.run = [s, algo, bias, bias_d, out_d](dnn::Handle& handle, const KernelArgs& a) {
    void* in = a.inputs[0].data;
    void* out = a.outputs[0].data;
    KILN_RETURN_IF_ERROR(dnn::RunConvolution(
        handle, s.direction, s.problem, algo, 1.0f, 0.0f, s.x_is_output ? out : in,
        a.inputs[1].data, s.x_is_output ? in : out, a.workspace, a.workspace_bytes));
    if (!bias) return absl::OkStatus();
    return dnn::AddTensor(handle, 1.0f, bias_d, a.inputs[2].data, 1.0f, out_d, out);
  };
  return k;
}

absl::Status CheckConvolution(const Node& node) { return SetupOf(node, KernelOptions()).status(); }

}  // namespace

absl::Status RegisterCudaConvolutionKernels(KernelRegistry& registry) {
  for (const char* op : {"Convolution", "Deconvolution"}) {
    KILN_RETURN_IF_ERROR(cuda_graph::RegisterGraphKernel(registry, op, "any", "dnn_conv",
                                                         CheckConvolution, PrepareConvolution));
  }
  return absl::OkStatus();
}

}  // namespace kiln
