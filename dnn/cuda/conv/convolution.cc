// The convolution algorithms: how each direction maps onto the GEMM kernels, cuBLAS and the
// auxiliary kernels, and how much workspace each needs. This file holds the public API (names,
// support checks, workspace sizes, the descriptor entry points) and the dispatch: the implicit
// GEMM, small-channel and direct kernels are launched here; IMPLICIT_PRECOMP_GEMM, GEMM,
// GEMM_1X1 and WINOGRAD_NONFUSED run through their paths (conv_paths.h), FFT through conv_fft.h.
#include "dnn/cuda/conv/convolution.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "dnn/conv_gemm_views.h"
#include "dnn/cuda/conv/conv_depthwise_launch.h"
#include "dnn/cuda/conv/conv_fft.h"
#include "dnn/cuda/conv/conv_gemm_launch.h"
#include "dnn/cuda/conv/conv_paths.h"
#include "dnn/cuda/conv/conv_small_channels_launch.h"
#include "dnn/cuda/conv/conv_wgmma_launch.h"

namespace kiln {
namespace dnn {

namespace {

// The paths and helpers of conv_paths.h that the dispatch below calls.
using conv_internal::Aligned16;
using conv_internal::BackwardDataAsForward;
using conv_internal::BackwardDataFilterBytes;
using conv_internal::BackwardDataGemm;
using conv_internal::BackwardDataPrecomp;
using conv_internal::BackwardDataWinograd;
using conv_internal::BackwardFilter1x1;
using conv_internal::BackwardFilter1x1AsForward;
using conv_internal::BackwardFilterAsForward;
using conv_internal::BackwardFilterCopyBytes;
using conv_internal::BackwardFilterGemm;
using conv_internal::BackwardFilterPrecomp;
using conv_internal::BackwardFilterWinograd;
using conv_internal::ElementBytes;
using conv_internal::ElementOf;
using conv_internal::ForwardGemm;
using conv_internal::ForwardPrecomp;
using conv_internal::ForwardWinograd;
using conv_internal::Gemm1x1Serves;
using conv_internal::Gemm1x1WorkspaceBytes;
using conv_internal::GemmLaunch;
using conv_internal::Launched;
using conv_internal::Pixelwise1x1;
using conv_internal::PlanGemm;
using conv_internal::PlanPrecomp;
using conv_internal::PlanSubPixel;
using conv_internal::SubPixelPlan;
using conv_internal::WgmmaServes;
using conv_internal::WinogradBytes;
using conv_internal::WinogradChunks;
using conv_internal::WinogradServes;

using cuda::ConvGemmLaunch;

// The small-channel kernels' launch (conv_small_channels_launch.h): forward reads x and w into
// y; the filter gradient reads x and dy (y) with `partial` as workspace, and its caller sets dw.
cuda::SmallChannelsLaunch SmallChannelsLaunchOf(const Handle& h, const ConvProblem& p, float alpha,
                                                float beta, const void* x, const void* w, void* y,
                                                float* partial) {
  cuda::SmallChannelsLaunch l;
  l.problem = p;
  l.x = x;
  l.w = w;
  l.y = y;
  l.alpha = alpha;
  l.beta = beta;
  l.multiprocessors = h.multiprocessors();
  l.partial = partial;
  return l;
}

// The depthwise kernels' launch (conv_depthwise_launch.h), operands named as in forward.
cuda::DepthwiseLaunch DepthwiseLaunchOf(const Handle& h, const ConvProblem& p, float alpha,
                                        float beta, const void* x, const void* w, const void* y) {
  cuda::DepthwiseLaunch l;
  l.problem = p;
  l.element = ElementOf(p.dtype);
  l.x = x;
  l.w = w;
  l.y = y;
  l.alpha = alpha;
  l.beta = beta;
  l.multiprocessors = h.multiprocessors();
  return l;
}

// Split-K factor for backward filter: enough blocks for two waves, at least 8 k slices each.
int SplitsFor(const Handle& handle, const GemmView& v) {
  const int64_t tiles = ((v.m + 127) / 128) * ((v.n + 127) / 128) * v.groups;
  const int64_t k_tiles = (v.k + 31) / 32;
  int64_t splits = (2 * handle.multiprocessors() + tiles - 1) / tiles;
  splits = std::min<int64_t>(splits, std::max<int64_t>(1, k_tiles / 8));
  splits = std::min<int64_t>(splits, std::max<int64_t>(1, 65535 / v.groups));
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(splits, 64)));
}

// FFT and Winograd serve ungrouped problems, and the precomputed GEMM's backward filter serves
// ungrouped ones only. A grouped problem runs them group by group: each group is an ungrouped
// problem on slices of x, w and y (the groups' filters and outputs are disjoint), one after
// another on the stream, sharing the workspace. Worth it for a few wide groups (AlexNet's and
// CaffeNet's two), where one group's problem still fills the GPU; FFT and Winograd stop at
// kMaxGroupsOneByOne so that depthwise-like problems do not turn into thousands of launches.
constexpr int64_t kMaxGroupsOneByOne = 8;

bool RunsGroupByGroup(ConvDirection direction, const ConvProblem& p, ConvAlgo algo) {
  if (p.groups <= 1) return false;
  // Forward on the Hopper wgmma kernel, which takes one group: a few wide channels-last groups
  // (CaffeNet's conv2, conv4, conv5) run there one after another instead of on the mma.sync
  // kernel (measured 1.5x faster on the H100, docs/PERF.md).
  if (direction == ConvDirection::kForward &&
      (algo == ConvAlgo::kImplicitPrecompGemm || algo == ConvAlgo::kImplicitGemm) &&
      p.groups <= kMaxGroupsOneByOne && !cuda::SmallChannelsServes(p) &&
      WgmmaServes(OneGroupOf(p))) {
    return true;
  }
  if (algo == ConvAlgo::kImplicitPrecompGemm) return direction == ConvDirection::kBackwardFilter;
  return (algo == ConvAlgo::kFft || algo == ConvAlgo::kWinogradNonfused) &&
         p.groups <= kMaxGroupsOneByOne;
}

}  // namespace

absl::string_view ConvAlgoName(ConvAlgo algo) {
  switch (algo) {
    case ConvAlgo::kImplicitGemm:
      return "implicit_gemm";
    case ConvAlgo::kImplicitPrecompGemm:
      return "implicit_precomp_gemm";
    case ConvAlgo::kImplicitGemmSplitK:
      return "implicit_gemm_split_k";
    case ConvAlgo::kGemm:
      return "gemm";
    case ConvAlgo::kDirect:
      return "direct";
    case ConvAlgo::kGemm1x1:
      return "gemm_1x1";
    case ConvAlgo::kWinogradNonfused:
      return "winograd_nonfused";
    case ConvAlgo::kFft:
      return "fft";
  }
  return "unknown";
}

absl::StatusOr<ConvAlgo> ParseConvAlgo(absl::string_view name) {
  for (ConvAlgo a : kAllConvAlgos)
    if (ConvAlgoName(a) == name) return a;
  return absl::InvalidArgumentError(absl::StrCat("unknown convolution algorithm '", name, "'"));
}

absl::string_view ConvDirectionName(ConvDirection direction) {
  switch (direction) {
    case ConvDirection::kForward:
      return "fwd";
    case ConvDirection::kBackwardData:
      return "bwd_data";
    case ConvDirection::kBackwardFilter:
      return "bwd_filter";
  }
  return "unknown";
}

absl::Status CheckConvAlgoSupported(ConvDirection direction, const ConvProblem& p, ConvAlgo algo) {
  auto no = [&](absl::string_view why) {
    return absl::UnimplementedError(absl::StrCat("convolution ", ConvDirectionName(direction),
                                                 ": algorithm ", ConvAlgoName(algo), " ", why));
  };
  if (!p.PaddingIsSymmetric()) {
    // Asymmetric padding (a band of a convolution's output): the paths below that index every
    // output pixel from `out` and bound every input read serve it; those checked by the tests
    // (tests/ops/convolution/conv_cases). The FFT and the 1x1 GEMM size their work from the padded
    // input, and the backward directions assume symmetric windows.
    if (direction != ConvDirection::kForward) return no("serves symmetric padding only");
    if (algo == ConvAlgo::kFft || algo == ConvAlgo::kGemm1x1) {
      return no("serves symmetric padding only");
    }
  }
  if (RunsGroupByGroup(direction, p, algo)) {
    return CheckConvAlgoSupported(direction, OneGroupOf(p), algo);
  }
  const bool fwd = direction == ConvDirection::kForward;
  switch (algo) {
    case ConvAlgo::kImplicitGemm:
    case ConvAlgo::kGemm:
      return absl::OkStatus();
    case ConvAlgo::kImplicitPrecompGemm: {
      if (fwd) return absl::OkStatus();
      ConvProblem q;
      SubPixelPlan sub_pixel;
      if (direction == ConvDirection::kBackwardData &&
          (BackwardDataAsForward(p, &q) || PlanSubPixel(p, 1, &sub_pixel))) {
        return absl::OkStatus();
      }
      if (direction == ConvDirection::kBackwardFilter && BackwardFilterAsForward(p, &q)) {
        return absl::OkStatus();
      }
      return no(
          "serves forward, backward data with unit strides and pad <= dilation x (filter - 1) "
          "or ungrouped 2-d cross-correlation with unit dilation and stride <= filter, and "
          "ungrouped 2-d backward filter");
    }
    case ConvAlgo::kDirect:
      return direction != ConvDirection::kBackwardFilter || cuda::DepthwiseServes(p)
                 ? absl::OkStatus()
                 : no("serves backward filter of channels-last 2-d depthwise problems only");
    case ConvAlgo::kImplicitGemmSplitK:
      return direction == ConvDirection::kBackwardFilter ? absl::OkStatus()
                                                         : no("is backward-filter-only");
    case ConvAlgo::kWinogradNonfused: {
      const char* why = "serves f32 3x3 or 5x5 unit-stride, unit-dilation, ungrouped 2-d problems";
      // F(2x2, 5x5)'s transforms (points up to +-2, 1/24 in G) lose precision over backward
      // filter's long reduction over tiles: 0.2 % relative error on a 9 x 140 image's filter
      // gradient (2026-11-24, H100), beyond strict f32; the FFT serves 5x5 there.
      if (direction == ConvDirection::kBackwardFilter && p.filter[1] == 5) {
        return no("serves 5x5 filters forward and backward data only (precision)");
      }
      ConvProblem q = p;
      if (direction == ConvDirection::kBackwardData && !BackwardDataAsForward(p, &q)) {
        return no(why);
      }
      return WinogradServes(q) ? absl::OkStatus() : no(why);
    }
    case ConvAlgo::kFft: {
      const absl::Status fft = FftSupport(direction, p);
      return fft.ok() ? fft : no(fft.message());
    }
    case ConvAlgo::kGemm1x1: {
      if (!Gemm1x1Serves(p)) {
        return no(
            "needs a 1x1, unpadded, ungrouped convolution of packed NCHW tensors, or of packed "
            "NHWC ones at stride 1");
      }
      if (p.n * p.in[0] * p.in[1] * p.in[2] >= (int64_t{1} << 31) ||
          p.c * p.in[0] * p.in[1] * p.in[2] >= (int64_t{1} << 31) ||
          p.k * p.in[0] * p.in[1] * p.in[2] >= (int64_t{1} << 31)) {
        return no("needs fewer than 2^31 pixels, and of elements per image");
      }
      return absl::OkStatus();
    }
  }
  return no("is unknown");
}

absl::StatusOr<size_t> GetConvolutionWorkspaceSize(const Handle& handle, ConvDirection direction,
                                                   const ConvProblem& p, ConvAlgo algo) {
  KILN_RETURN_IF_ERROR(CheckConvAlgoSupported(direction, p, algo));
  if (RunsGroupByGroup(direction, p, algo)) {
    return GetConvolutionWorkspaceSize(handle, direction, OneGroupOf(p), algo);
  }
  switch (algo) {
    case ConvAlgo::kImplicitPrecompGemm: {
      if (direction == ConvDirection::kForward) {
        return PlanPrecomp(p, handle.multiprocessors()).bytes;
      }
      ConvProblem q;
      if (direction == ConvDirection::kBackwardFilter) {
        if (BackwardFilter1x1AsForward(p, &q))
          return PlanPrecomp(q, handle.multiprocessors()).bytes;
        BackwardFilterAsForward(p, &q);
        return BackwardFilterCopyBytes(q) + PlanPrecomp(q, handle.multiprocessors()).bytes;
      }
      if (!BackwardDataAsForward(p, &q)) {
        SubPixelPlan plan;
        PlanSubPixel(p, handle.multiprocessors(), &plan);
        return plan.bytes;
      }
      return BackwardDataFilterBytes(p) + PlanPrecomp(q, handle.multiprocessors()).bytes;
    }
    case ConvAlgo::kGemm:
      return PlanGemm(direction, p).bytes;
    case ConvAlgo::kGemm1x1:
      return Gemm1x1WorkspaceBytes(direction, p);
    case ConvAlgo::kWinogradNonfused: {
      if (direction != ConvDirection::kBackwardData) {
        return WinogradBytes(direction, p, WinogradChunks(direction, p, handle.multiprocessors()));
      }
      ConvProblem q;
      BackwardDataAsForward(p, &q);
      return BackwardDataFilterBytes(p) + WinogradBytes(ConvDirection::kForward, q, 1);
    }
    case ConvAlgo::kFft:
      return FftWorkspaceBytes(handle, direction, p);
    case ConvAlgo::kDirect:
      if (direction == ConvDirection::kBackwardFilter) {
        return static_cast<size_t>(cuda::DepthwiseFilterGradientBytes(p, handle.multiprocessors()));
      }
      return size_t{0};
    case ConvAlgo::kImplicitGemmSplitK: {
      if (cuda::WindowFilterGradientServes(p)) {
        return static_cast<size_t>(cuda::WindowFilterGradientBytes(p, handle.multiprocessors()));
      }
      const GemmView v = BackwardFilterGemmView(p, false);
      return static_cast<size_t>(cuda::ConvGemmPartialBytes(v, SplitsFor(handle, v)));
    }
    default:
      return size_t{0};
  }
}

namespace {

// RunConvolution, and for the forward direction with `epilogue` non-null its in-kernel epilogue
// where the path takes it (*applied says whether; see RunConvolutionForwardWithEpilogue).
absl::Status RunConvolutionImpl(Handle& handle, ConvDirection direction, const ConvProblem& p,
                                ConvAlgo algo, float alpha, float beta, void* x, void* w, void* y,
                                void* workspace, size_t workspace_bytes,
                                const ConvEpilogue* epilogue, bool* applied) {
  bool ignored = false;
  if (applied == nullptr) applied = &ignored;
  *applied = false;
  if (direction != ConvDirection::kForward) epilogue = nullptr;
  const std::string where =
      absl::StrCat("convolution ", ConvDirectionName(direction), " (", ConvAlgoName(algo), ")");
  KILN_RETURN_IF_ERROR(CheckConvAlgoSupported(direction, p, algo));
  if (x == nullptr || w == nullptr || y == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": a tensor pointer is null"));
  }
  KILN_ASSIGN_OR_RETURN(const size_t needed,
                        GetConvolutionWorkspaceSize(handle, direction, p, algo));
  if (workspace_bytes < needed || (needed > 0 && workspace == nullptr)) {
    return absl::ResourceExhaustedError(absl::StrCat(where, " needs ", needed,
                                                     " bytes of workspace, given ",
                                                     workspace == nullptr ? 0 : workspace_bytes));
  }
  char* ws = static_cast<char*>(workspace);
  if (RunsGroupByGroup(direction, p, algo)) {
    const ConvProblem q = OneGroupOf(p);
    const int64_t bytes = ElementBytes(p.dtype);
    for (int64_t g = 0; g < p.groups; ++g) {
      const GroupOffsets o = GroupOffsetsOf(p, g);
      // The group's filters are k = g kg ... (g + 1) kg - 1: its slice of the bias.
      ConvEpilogue group_epilogue;
      if (epilogue != nullptr) {
        group_epilogue = *epilogue;
        if (group_epilogue.bias != nullptr) group_epilogue.bias += g * q.k;
      }
      bool group_applied = false;
      const absl::Status status = RunConvolutionImpl(
          handle, direction, q, algo, alpha, beta, static_cast<char*>(x) + o.x * bytes,
          static_cast<char*>(w) + o.w * bytes, static_cast<char*>(y) + o.y * bytes, workspace,
          workspace_bytes, epilogue != nullptr ? &group_epilogue : nullptr, &group_applied);
      if (!status.ok()) {
        return absl::Status(status.code(),
                            absl::StrCat(status.message(), " (group ", g, " of ", p.groups, ")"));
      }
      // Every group takes the same path (their slices keep the first one's alignment), so the
      // epilogue is applied by all of them or by none; anything else would be a bug here.
      if (g == 0) {
        *applied = group_applied;
      } else if (group_applied != *applied) {
        return absl::InternalError(
            absl::StrCat(where, ": groups took different paths for the epilogue"));
      }
    }
    return absl::OkStatus();
  }
  if (algo == ConvAlgo::kFft) {
    return Annotate(RunFft(handle, direction, p, alpha, beta, x, w, y, ws), where);
  }
  absl::Status status;
  switch (direction) {
    case ConvDirection::kForward:
      switch (algo) {
        case ConvAlgo::kImplicitGemm: {
          // A first layer's few input channels: the kernel made for them, no workspace.
          if (cuda::SmallChannelsServes(p)) {
            cuda::SmallChannelsLaunch l =
                SmallChannelsLaunchOf(handle, p, alpha, beta, x, w, y, nullptr);
            if (epilogue != nullptr) {
              l.epilogue.bias = epilogue->bias;
              l.epilogue.relu = epilogue->relu;
              l.epilogue.slope = epilogue->relu_slope;
              *applied = true;
            }
            status = Launched(cuda::LaunchSmallChannelsForward(l, handle.stream()),
                              "small-channel implicit GEMM");
            break;
          }
          // Channels-last x and w that the Hopper kernel can read as they are: no workspace
          // needed, so it serves this algorithm too (without split-K).
          if (WgmmaServes(p) && Aligned16(x) && Aligned16(w)) {
            cuda::ConvWgmmaLaunch l;
            l.problem = p;
            l.x = x;
            l.w = w;
            l.y = y;
            l.alpha = alpha;
            l.beta = beta;
            if (epilogue != nullptr) {
              l.bias = epilogue->bias;
              l.relu = epilogue->relu;
              l.relu_slope = epilogue->relu_slope;
              *applied = true;
            }
            status = Launched(cuda::LaunchConvWgmma(l, handle.stream()), "implicit GEMM (wgmma)");
            break;
          }
          const GemmView v = ForwardGemmView(p, p.XChannelsLast());
          status = Launched(
              cuda::LaunchConvGemm(GemmLaunch(p, v, x, w, y, alpha, beta), handle.stream()),
              "implicit GEMM");
          break;
        }
        case ConvAlgo::kImplicitPrecompGemm:
          status = ForwardPrecomp(handle, p, alpha, beta, x, w, y, ws, epilogue, applied);
          break;
        case ConvAlgo::kGemm:
          status = ForwardGemm(handle, p, alpha, beta, x, w, y, ws);
          break;
        case ConvAlgo::kDirect:
          if (cuda::DepthwiseServes(p)) {
            cuda::DepthwiseLaunch l = DepthwiseLaunchOf(handle, p, alpha, beta, x, w, y);
            if (epilogue != nullptr) {
              l.epilogue.bias = epilogue->bias;
              l.epilogue.relu = epilogue->relu;
              l.epilogue.slope = epilogue->relu_slope;
              *applied = true;
            }
            status =
                Launched(cuda::LaunchDepthwiseForward(l, handle.stream()), "depthwise convolution");
            break;
          }
          status = Launched(
              cuda::LaunchConvDirect(p, ElementOf(p.dtype), x, w, alpha, beta, y, handle.stream()),
              "direct convolution");
          break;
        case ConvAlgo::kGemm1x1:
          status = Pixelwise1x1(handle, p, /*backward=*/false, alpha, beta, x, w, y, ws);
          break;
        case ConvAlgo::kWinogradNonfused:
          status = ForwardWinograd(handle, p, alpha, beta, x, w, y, ws, epilogue, applied);
          break;
        default:
          break;
      }
      break;
    case ConvDirection::kBackwardData:
      if (algo == ConvAlgo::kGemm1x1) {
        status = Pixelwise1x1(handle, p, /*backward=*/true, alpha, beta, y, w, x, ws);
      } else if (algo == ConvAlgo::kDirect && cuda::DepthwiseServes(p)) {
        status = Launched(cuda::LaunchDepthwiseBackwardData(
                              DepthwiseLaunchOf(handle, p, alpha, beta, x, w, y), handle.stream()),
                          "depthwise backward data");
      } else if (algo == ConvAlgo::kDirect) {
        status = Launched(cuda::LaunchConvDirectBackwardData(p, ElementOf(p.dtype), y, w, alpha,
                                                             beta, x, handle.stream()),
                          "direct backward data");
      } else if (algo == ConvAlgo::kWinogradNonfused) {
        status = BackwardDataWinograd(handle, p, alpha, beta, y, w, x, ws);
      } else if (algo == ConvAlgo::kImplicitPrecompGemm) {
        status = BackwardDataPrecomp(handle, p, alpha, beta, y, w, x, ws);
      } else if (algo == ConvAlgo::kImplicitGemm) {
        const GemmView v = BackwardDataGemmView(p, p.YChannelsLast());
        status =
            Launched(cuda::LaunchConvGemm(GemmLaunch(p, v, y, w, x, alpha, beta), handle.stream()),
                     "implicit GEMM");
      } else {
        status = BackwardDataGemm(handle, p, alpha, beta, y, w, x, ws);
      }
      break;
    case ConvDirection::kBackwardFilter:
      if (algo == ConvAlgo::kDirect) {
        cuda::DepthwiseLaunch l = DepthwiseLaunchOf(handle, p, alpha, beta, x, w, y);
        l.partial = reinterpret_cast<float*>(ws);
        status = Launched(cuda::LaunchDepthwiseBackwardFilter(l, handle.stream()),
                          "depthwise backward filter");
      } else if (algo == ConvAlgo::kGemm) {
        status = BackwardFilterGemm(handle, p, alpha, beta, x, y, w, ws);
      } else if (algo == ConvAlgo::kGemm1x1) {
        status = BackwardFilter1x1(handle, p, alpha, beta, x, y, w, ws);
      } else if (algo == ConvAlgo::kWinogradNonfused) {
        status = BackwardFilterWinograd(handle, p, alpha, beta, x, y, w, ws);
      } else if (algo == ConvAlgo::kImplicitPrecompGemm) {
        status = BackwardFilterPrecomp(handle, p, alpha, beta, x, y, w, ws);
      } else if (algo == ConvAlgo::kImplicitGemmSplitK && cuda::WindowFilterGradientServes(p)) {
        cuda::SmallChannelsLaunch l = SmallChannelsLaunchOf(handle, p, alpha, beta, x, nullptr, y,
                                                            reinterpret_cast<float*>(ws));
        l.dw = w;
        status = Launched(cuda::LaunchWindowFilterGradient(l, handle.stream()),
                          "small-channel filter gradient");
      } else {
        const GemmView v = BackwardFilterGemmView(p, p.XChannelsLast());
        ConvGemmLaunch l = GemmLaunch(p, v, y, x, w, alpha, beta);
        if (algo == ConvAlgo::kImplicitGemmSplitK) {
          l.splits = SplitsFor(handle, BackwardFilterGemmView(p, false));
          l.partial = reinterpret_cast<float*>(ws);
        }
        status = Launched(cuda::LaunchConvGemm(l, handle.stream()), "implicit GEMM");
      }
      break;
  }
  return Annotate(status, where);
}

}  // namespace

absl::Status RunConvolution(Handle& handle, ConvDirection direction, const ConvProblem& p,
                            ConvAlgo algo, float alpha, float beta, void* x, void* w, void* y,
                            void* workspace, size_t workspace_bytes) {
  return RunConvolutionImpl(handle, direction, p, algo, alpha, beta, x, w, y, workspace,
                            workspace_bytes, nullptr, nullptr);
}

absl::Status RunConvolutionForwardWithEpilogue(Handle& handle, const ConvProblem& p, ConvAlgo algo,
                                               float alpha, float beta, const void* x,
                                               const void* w, void* y, void* workspace,
                                               size_t workspace_bytes, const ConvEpilogue& epilogue,
                                               bool* applied) {
  if (applied == nullptr) {
    return absl::InvalidArgumentError(
        "RunConvolutionForwardWithEpilogue: `applied` is null (the caller must know whether to "
        "apply the epilogue itself)");
  }
  return RunConvolutionImpl(handle, ConvDirection::kForward, p, algo, alpha, beta,
                            const_cast<void*>(x), const_cast<void*>(w), y, workspace,
                            workspace_bytes, &epilogue, applied);
}

absl::Status ConvolutionForward(Handle& handle, float alpha, const TensorDescriptor& x_desc,
                                const void* x, const FilterDescriptor& w_desc, const void* w,
                                const ConvolutionDescriptor& conv, ConvAlgo algo, void* workspace,
                                size_t workspace_bytes, float beta, const TensorDescriptor& y_desc,
                                void* y) {
  KILN_ASSIGN_OR_RETURN(const ConvProblem p,
                        MakeConvProblem(x_desc, w_desc, conv, y_desc, "ConvolutionForward"));
  return RunConvolution(handle, ConvDirection::kForward, p, algo, alpha, beta, const_cast<void*>(x),
                        const_cast<void*>(w), y, workspace, workspace_bytes);
}

absl::Status ConvolutionBackwardData(Handle& handle, float alpha, const FilterDescriptor& w_desc,
                                     const void* w, const TensorDescriptor& dy_desc, const void* dy,
                                     const ConvolutionDescriptor& conv, ConvAlgo algo,
                                     void* workspace, size_t workspace_bytes, float beta,
                                     const TensorDescriptor& dx_desc, void* dx) {
  KILN_ASSIGN_OR_RETURN(const ConvProblem p,
                        MakeConvProblem(dx_desc, w_desc, conv, dy_desc, "ConvolutionBackwardData"));
  return RunConvolution(handle, ConvDirection::kBackwardData, p, algo, alpha, beta, dx,
                        const_cast<void*>(w), const_cast<void*>(dy), workspace, workspace_bytes);
}

absl::Status ConvolutionBackwardFilter(Handle& handle, float alpha, const TensorDescriptor& x_desc,
                                       const void* x, const TensorDescriptor& dy_desc,
                                       const void* dy, const ConvolutionDescriptor& conv,
                                       ConvAlgo algo, void* workspace, size_t workspace_bytes,
                                       float beta, const FilterDescriptor& dw_desc, void* dw) {
  KILN_ASSIGN_OR_RETURN(const ConvProblem p, MakeConvProblem(x_desc, dw_desc, conv, dy_desc,
                                                             "ConvolutionBackwardFilter"));
  return RunConvolution(handle, ConvDirection::kBackwardFilter, p, algo, alpha, beta,
                        const_cast<void*>(x), dw, const_cast<void*>(dy), workspace,
                        workspace_bytes);
}

absl::Status ConvolutionBackwardBias(Handle& handle, float alpha, const TensorDescriptor& dy_desc,
                                     const void* dy, float beta, const TensorDescriptor& db_desc,
                                     void* db) {
  KILN_RETURN_IF_ERROR(CheckBiasDescriptor(db_desc, dy_desc, "ConvolutionBackwardBias"));
  if (dy == nullptr || db == nullptr) {
    return absl::InvalidArgumentError("ConvolutionBackwardBias: a tensor pointer is null");
  }
  // A problem whose output is dy: a 1x1 convolution of dy's shape with itself.
  ConvProblem p;
  p.dtype = dy_desc.dtype;
  p.n = dy_desc.dims[0];
  p.k = p.c = dy_desc.dims[1];
  const int off = 5 - dy_desc.rank();
  p.y_stride[0] = dy_desc.strides[0];
  p.y_stride[1] = dy_desc.strides[1];
  for (int i = 0; i < 3; ++i) {
    const int j = 2 + i - off;
    p.out[i] = j >= 2 ? dy_desc.dims[j] : 1;
    p.y_stride[2 + i] = j >= 2 ? dy_desc.strides[j] : 0;
  }
  // db may be strided along K.
  if (db_desc.strides[1] != 1) {
    return absl::UnimplementedError("ConvolutionBackwardBias: db must have unit channel stride");
  }
  return Launched(cuda::LaunchBiasGrad(p, ElementOf(p.dtype), dy, alpha, beta, db, handle.stream()),
                  "bias gradient");
}

}  // namespace dnn
}  // namespace kiln
