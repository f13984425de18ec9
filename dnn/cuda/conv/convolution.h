// Convolution primitives, cuDNN-style: forward, backward data, backward filter and backward
// bias with selectable algorithms, per-algorithm workspace sizes, a heuristic Get and a timing
// Find. Every call blends: out = alpha * op + beta * out (out is not read when beta == 0).
// Pointers are device memory laid out as their descriptors say. All algorithms here are
// deterministic (no atomics; split-K partial sums are added in a fixed order).
#ifndef KILN_DNN_CUDA_CONV_CONVOLUTION_H_
#define KILN_DNN_CUDA_CONV_CONVOLUTION_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dnn/cuda/dnn_handle.h"
#include "dnn/conv_problem.h"
#include "dnn/descriptors.h"

namespace kiln {
namespace dnn {

enum class ConvDirection { kForward, kBackwardData, kBackwardFilter };

// The algorithms. Which directions each serves:
//   kImplicitGemm         all three: the convolution as a matrix product whose operands are
//                         gathered on the fly; no workspace; every configuration. Forward problems
//                         whose x and w are already channels-last in the layout the Hopper kernel
//                         reads run on it (sm_90, f16/bf16/TF32).
//   kImplicitPrecompGemm  forward; backward data at unit stride (the forward convolution of dy
//                         with the transposed, flipped filter) and, for ungrouped 2-d
//                         cross-correlations with stride <= filter, by sub-pixel phases; and
//                         ungrouped 2-d backward filter (a forward convolution over transposed
//                         copies, or straight on x and dy for NCHW 1x1). x/w are copied to
//                         zero-padded channels-last when that lets the kernel load 16-byte vectors.
//                         On an sm_90 GPU, f16/bf16 and TF32 problems whose channels fill at least
//                         half a 128-byte k tile run on the Hopper wgmma kernel (conv_wgmma.cu);
//                         the rest on the mma.sync/FFMA kernel with precomputed gather decodings.
//   kImplicitGemmSplitK   backward filter: the long N*P*Q reduction split over blocks, partial
//                         sums in the workspace, added in a fixed order.
//   kGemm                 all three: explicit im2col (or col2im) in the workspace + cuBLAS.
//   kDirect               forward and backward data: one thread per output (dx) element; best
//                         for depthwise/grouped convolutions with few channels per group, and
//                         for strided deconvolutions with few channels (backward data walks only
//                         the taps of the element's phase). Channels-last 2-d depthwise problems
//                         run the vectorized depthwise kernels (conv_depthwise_launch.h) in all
//                         three directions (backward filter: per-split sums in the workspace),
//                         forward with the bias/ReLU epilogue inside.
//   kGemm1x1              a 1x1, unpadded, ungrouped convolution of packed NCHW tensors (any
//                         stride) or packed NHWC ones (stride 1) as cuBLAS products: no copies at
//                         stride 1 (the NCHW filter gradient takes per-image f32 parts in the
//                         workspace); a larger stride runs over a packed copy of the pixels it
//                         reads (backward data: a packed dx spread onto x's grid).
//   kWinogradNonfused     all three directions of f32 3x3 or 5x5 unit-stride, unit-dilation,
//                         ungrouped 2-d problems: Winograd F(2x2, 3x3) / F(2x2, 5x5), the
//                         transformed operands and products in the workspace, the 16 / 36
//                         products on cuBLAS.
//   kFft                  all three directions of f32 ungrouped 2-d problems with unit dilation
//                         (any stride, padding, layout): cuFFT spectra of overlap-save tiles, a
//                         stride folded into phases, one complex GEMM per frequency on cuBLAS
//                         (conv_fft.h). Workspace: the filter's spectra plus a bounded pass.
enum class ConvAlgo {
  kImplicitGemm,
  kImplicitPrecompGemm,
  kImplicitGemmSplitK,
  kGemm,
  kDirect,
  kGemm1x1,
  kWinogradNonfused,
  kFft,
};
constexpr ConvAlgo kAllConvAlgos[] = {ConvAlgo::kImplicitGemm,
                                      ConvAlgo::kImplicitPrecompGemm,
                                      ConvAlgo::kImplicitGemmSplitK,
                                      ConvAlgo::kGemm,
                                      ConvAlgo::kDirect,
                                      ConvAlgo::kGemm1x1,
                                      ConvAlgo::kWinogradNonfused,
                                      ConvAlgo::kFft};

absl::string_view ConvAlgoName(ConvAlgo algo);  // "implicit_gemm", ...
absl::StatusOr<ConvAlgo> ParseConvAlgo(absl::string_view name);
absl::string_view ConvDirectionName(ConvDirection direction);  // "fwd", "bwd_data", "bwd_filter"

// OK when `algo` can run `direction` of `p`; otherwise Unimplemented saying why.
absl::Status CheckConvAlgoSupported(ConvDirection direction, const ConvProblem& p, ConvAlgo algo);

// Workspace bytes `algo` needs for `direction` of `p` (Unimplemented when unsupported).
absl::StatusOr<size_t> GetConvolutionWorkspaceSize(const Handle& handle, ConvDirection direction,
                                                   const ConvProblem& p, ConvAlgo algo);

// y = alpha conv(x, w) + beta y.
absl::Status ConvolutionForward(Handle& handle, float alpha, const TensorDescriptor& x_desc,
                                const void* x, const FilterDescriptor& w_desc, const void* w,
                                const ConvolutionDescriptor& conv, ConvAlgo algo, void* workspace,
                                size_t workspace_bytes, float beta, const TensorDescriptor& y_desc,
                                void* y);
// dx = alpha conv_backward_data(w, dy) + beta dx.
absl::Status ConvolutionBackwardData(Handle& handle, float alpha, const FilterDescriptor& w_desc,
                                     const void* w, const TensorDescriptor& dy_desc, const void* dy,
                                     const ConvolutionDescriptor& conv, ConvAlgo algo,
                                     void* workspace, size_t workspace_bytes, float beta,
                                     const TensorDescriptor& dx_desc, void* dx);
// dw = alpha conv_backward_filter(x, dy) + beta dw.
absl::Status ConvolutionBackwardFilter(Handle& handle, float alpha, const TensorDescriptor& x_desc,
                                       const void* x, const TensorDescriptor& dy_desc,
                                       const void* dy, const ConvolutionDescriptor& conv,
                                       ConvAlgo algo, void* workspace, size_t workspace_bytes,
                                       float beta, const FilterDescriptor& dw_desc, void* dw);
// db = alpha sum over (n, spatial) of dy + beta db; db is (1, K, 1, 1[, 1]).
absl::Status ConvolutionBackwardBias(Handle& handle, float alpha, const TensorDescriptor& dy_desc,
                                     const void* dy, float beta, const TensorDescriptor& db_desc,
                                     void* db);

// One direction on a checked problem, with the operands named as in forward: `x`, `w`, `y` are
// inputs or the output depending on `direction` (the output is y, x or w respectively).
absl::Status RunConvolution(Handle& handle, ConvDirection direction, const ConvProblem& p,
                            ConvAlgo algo, float alpha, float beta, void* x, void* w, void* y,
                            void* workspace, size_t workspace_bytes);

// What a forward convolution's kernel can apply to each output before its single store, as
// cudnnConvolutionBiasActivationForward does: y = act(alpha conv(x, w) + beta y + bias[k]), act
// = ReLU (negative values times relu_slope) when `relu`, identity otherwise. The blend is
// rounded to the output's type before the bias is added (in f32), so a 16-bit result is
// bit-equal to the plain convolution followed by a separate bias/ReLU pass.
struct ConvEpilogue {
  const float* bias = nullptr;  // f32, one per output channel, packed; null: no bias
  bool relu = false;
  float relu_slope = 0;
};

// The forward direction of RunConvolution with `epilogue` applied inside the convolution's
// kernel where the algorithm's path allows it (the Hopper wgmma kernel, which IMPLICIT_GEMM and
// IMPLICIT_PRECOMP_GEMM take for channels-last tensor-core problems; the small-channel first-layer
// kernels of IMPLICIT_GEMM; WINOGRAD_NONFUSED's output transform; DIRECT's depthwise kernel);
// *applied says whether it was.
// When false the plain convolution ran (y = alpha conv + beta y) and the epilogue is the caller's
// to apply.
absl::Status RunConvolutionForwardWithEpilogue(Handle& handle, const ConvProblem& p, ConvAlgo algo,
                                               float alpha, float beta, const void* x,
                                               const void* w, void* y, void* workspace,
                                               size_t workspace_bytes, const ConvEpilogue& epilogue,
                                               bool* applied);

struct ConvAlgoPerf {
  ConvAlgo algo = ConvAlgo::kImplicitGemm;
  absl::Status status;  // why it cannot run, for Find results that failed
  float time_ms = -1;   // -1 from Get (not timed)
  size_t workspace_bytes = 0;
  bool deterministic = true;
};

enum class ConvAlgoPreference { kPreferFastest, kNoWorkspace, kSpecifyWorkspaceLimit };

// The supported algorithms in the order a heuristic expects them to be fastest, filtered by the
// preference (kNoWorkspace: none needing workspace; kSpecifyWorkspaceLimit: within
// `workspace_limit` bytes). `without_device`: planning for a GPU that is not here, so the
// algorithms whose workspace size needs one (the FFT: cuFFT sizes its plans on the device) are
// left out.
absl::StatusOr<std::vector<ConvAlgoPerf>> GetConvolutionAlgorithms(
    const Handle& handle, ConvDirection direction, const ConvProblem& p,
    ConvAlgoPreference preference, size_t workspace_limit = 0, bool without_device = false);

// Runs every supported algorithm within `workspace_limit` on the caller's buffers (warm-up, then
// the median of `repeats` timed runs with CUDA events) and returns them fastest first; the
// output buffer's contents are overwritten (alpha = 1, beta = 0). Workspace is allocated here.
absl::StatusOr<std::vector<ConvAlgoPerf>> FindConvolutionAlgorithms(
    Handle& handle, ConvDirection direction, const ConvProblem& p, void* x, void* w, void* y,
    size_t workspace_limit, int repeats = 5);

}  // namespace dnn
}  // namespace kiln

#endif  // KILN_DNN_CUDA_CONV_CONVOLUTION_H_
