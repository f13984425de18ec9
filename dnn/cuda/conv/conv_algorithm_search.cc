// Algorithm choice: the heuristic order (Get) and the timed search (Find).
#include <cuda_runtime_api.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "dnn/cuda/conv/conv_small_channels_launch.h"
#include "dnn/cuda/conv/convolution.h"
#include "dnn/cuda/cuda_status.h"

namespace kiln {
namespace dnn {

namespace {

// Candidates, most promising first. The GEMM-based paths come before the direct kernel except
// for grouped convolutions with few channels per group, where a matrix product has almost no
// reduction to work with, and (backward data) strided deconvolutions with few channels.
std::vector<ConvAlgo> GemmFirstOrder(ConvDirection direction, const ConvProblem& p) {
  const bool thin_groups = p.groups > 1 && p.cg() <= 4;
  switch (direction) {
    case ConvDirection::kForward:
      if (thin_groups) {
        return {ConvAlgo::kDirect, ConvAlgo::kImplicitPrecompGemm, ConvAlgo::kImplicitGemm,
                ConvAlgo::kGemm};
      }
      return {ConvAlgo::kGemm1x1,
              ConvAlgo::kImplicitPrecompGemm,
              ConvAlgo::kWinogradNonfused,
              ConvAlgo::kImplicitGemm,
              ConvAlgo::kGemm,
              ConvAlgo::kDirect};
    case ConvDirection::kBackwardData:
      // A strided deconvolution with few channels on both sides (FCN's upsampling layers): the
      // GEMM formulations multiply mostly padding, the direct gather reads only the taps of each
      // element's phase.
      if (thin_groups || (p.cg() <= 32 && p.kg() <= 32 && p.stride[1] * p.stride[2] > 1)) {
        return {
            ConvAlgo::kDirect,           ConvAlgo::kGemm1x1,      ConvAlgo::kImplicitPrecompGemm,
            ConvAlgo::kWinogradNonfused, ConvAlgo::kImplicitGemm, ConvAlgo::kGemm};
      }
      return {ConvAlgo::kGemm1x1,
              ConvAlgo::kImplicitPrecompGemm,
              ConvAlgo::kWinogradNonfused,
              ConvAlgo::kImplicitGemm,
              ConvAlgo::kGemm,
              ConvAlgo::kDirect};
    case ConvDirection::kBackwardFilter:
      // The depthwise kernel, where it serves (DIRECT is unsupported otherwise).
      if (thin_groups) {
        return {ConvAlgo::kDirect,
                ConvAlgo::kGemm1x1,
                ConvAlgo::kImplicitPrecompGemm,
                ConvAlgo::kWinogradNonfused,
                ConvAlgo::kImplicitGemmSplitK,
                ConvAlgo::kImplicitGemm,
                ConvAlgo::kGemm};
      }
      return {ConvAlgo::kGemm1x1,          ConvAlgo::kImplicitPrecompGemm,
              ConvAlgo::kWinogradNonfused, ConvAlgo::kImplicitGemmSplitK,
              ConvAlgo::kImplicitGemm,     ConvAlgo::kGemm};
  }
  return {};
}

// The FFT goes first (after the 1x1 product) for strict-FP32 filters of 5x5 taps or more, where
// its cost no longer grows with the taps; otherwise last.
std::vector<ConvAlgo> HeuristicOrder(ConvDirection direction, const ConvProblem& p) {
  std::vector<ConvAlgo> order = GemmFirstOrder(direction, p);
  // A first layer's few input channels in f16/bf16: the small-channel kernels, which serve the
  // implicit-GEMM algorithms (forward) and split-K (backward filter), go first.
  if (direction != ConvDirection::kBackwardData && cuda::SmallChannelsServes(p)) {
    const ConvAlgo first = direction == ConvDirection::kForward ? ConvAlgo::kImplicitGemm
                                                                : ConvAlgo::kImplicitGemmSplitK;
    order.erase(std::find(order.begin(), order.end(), first));
    order.insert(order.begin(), first);
  }
  const bool large_filter =
      p.dtype == DataType::kF32 && p.math == MathMode::kFp32 && p.filter[1] * p.filter[2] >= 25;
  order.insert(large_filter ? order.begin() + 1 : order.end(), ConvAlgo::kFft);
  return order;
}

// Frees device memory at scope exit.
struct DeviceBuffer {
  void* ptr = nullptr;
  ~DeviceBuffer() {
    if (ptr != nullptr) cudaFree(ptr);
  }
};

}  // namespace

absl::StatusOr<std::vector<ConvAlgoPerf>> GetConvolutionAlgorithms(
    const Handle& handle, ConvDirection direction, const ConvProblem& p,
    ConvAlgoPreference preference, size_t workspace_limit, bool without_device) {
  std::vector<ConvAlgoPerf> out;
  for (ConvAlgo algo : HeuristicOrder(direction, p)) {
    if (!CheckConvAlgoSupported(direction, p, algo).ok()) continue;
    if (without_device && algo == ConvAlgo::kFft) continue;
    KILN_ASSIGN_OR_RETURN(const size_t bytes,
                          GetConvolutionWorkspaceSize(handle, direction, p, algo));
    if (preference == ConvAlgoPreference::kNoWorkspace && bytes > 0) continue;
    if (preference == ConvAlgoPreference::kSpecifyWorkspaceLimit && bytes > workspace_limit) {
      continue;
    }
    ConvAlgoPerf perf;
    perf.algo = algo;
    perf.workspace_bytes = bytes;
    out.push_back(perf);
  }
  if (out.empty()) {
    return absl::ResourceExhaustedError(absl::StrCat("convolution ", ConvDirectionName(direction),
                                                     ": no algorithm fits a workspace of ",
                                                     workspace_limit, " bytes"));
  }
  return out;
}

absl::StatusOr<std::vector<ConvAlgoPerf>> FindConvolutionAlgorithms(
    Handle& handle, ConvDirection direction, const ConvProblem& p, void* x, void* w, void* y,
    size_t workspace_limit, int repeats) {
  KILN_ASSIGN_OR_RETURN(
      std::vector<ConvAlgoPerf> candidates,
      GetConvolutionAlgorithms(handle, direction, p, ConvAlgoPreference::kSpecifyWorkspaceLimit,
                               workspace_limit));
  cudaStream_t stream = static_cast<cudaStream_t>(handle.stream());
  cudaEvent_t start, stop;
  KILN_CUDA_RETURN_IF_ERROR(cudaEventCreate(&start));
  KILN_CUDA_RETURN_IF_ERROR(cudaEventCreate(&stop));
  for (ConvAlgoPerf& perf : candidates) {
    DeviceBuffer ws;
    if (perf.workspace_bytes > 0 && cudaMalloc(&ws.ptr, perf.workspace_bytes) != cudaSuccess) {
      cudaGetLastError();
      perf.status = absl::ResourceExhaustedError(
          absl::StrCat("cannot allocate ", perf.workspace_bytes, " bytes of workspace"));
      continue;
    }
    auto run = [&]() {
      return RunConvolution(handle, direction, p, perf.algo, 1.0f, 0.0f, x, w, y, ws.ptr,
                            perf.workspace_bytes);
    };
    perf.status = run();  // warm-up (module load, cuBLAS heuristics)
    if (!perf.status.ok()) continue;
    std::vector<float> times;
    for (int i = 0; i < std::max(1, repeats) && perf.status.ok(); ++i) {
      cudaEventRecord(start, stream);
      perf.status = run();
      cudaEventRecord(stop, stream);
      float ms = 0;
      if (perf.status.ok()) {
        const cudaError_t e = cudaEventSynchronize(stop);
        if (e != cudaSuccess) {
          perf.status = CudaStatus(e, "cudaEventSynchronize", __FILE__, __LINE__);
          break;
        }
        cudaEventElapsedTime(&ms, start, stop);
        times.push_back(ms);
      }
    }
    if (!times.empty()) {
      std::sort(times.begin(), times.end());
      perf.time_ms = times[times.size() / 2];
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const ConvAlgoPerf& a, const ConvAlgoPerf& b) {
                     if (a.status.ok() != b.status.ok()) return a.status.ok();
                     return a.time_ms < b.time_ms;
                   });
  return candidates;
}

}  // namespace dnn
}  // namespace kiln
