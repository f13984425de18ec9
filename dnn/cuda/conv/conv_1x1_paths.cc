// GEMM_1X1: 1x1, unpadded, ungrouped convolutions as cuBLAS products over the pixels. Packed
// NCHW or NHWC at stride 1 need no copies; packed NCHW at a larger stride runs as the stride-1
// product over a packed copy of the pixels the stride reads (backward data: into a packed dx on
// the output grid, then spread onto x's grid with zeros between). The NCHW filter gradient is a
// batch of per-image products into f32 parts, added in a fixed order.
#include <cublas_v2.h>

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "dnn/cuda/conv/conv_gemm_launch.h"
#include "dnn/cuda/conv/conv_paths.h"

namespace kiln {
namespace dnn {
namespace conv_internal {

namespace {

// The filter gradient's per-image parts take at most this many bytes at a time.
constexpr int64_t kPartBytes = int64_t{32} << 20;

// The depth stride of a 2-d problem (depth 1) is never used and may be anything.
bool PackedNchw(const int64_t* stride, int64_t channels, const int64_t* dims) {
  const int64_t spatial = dims[0] * dims[1] * dims[2];
  return stride[4] == 1 && stride[3] == dims[2] &&
         (dims[0] == 1 || stride[2] == dims[1] * dims[2]) && stride[1] == spatial &&
         stride[0] == channels * spatial;
}

// A 1x1, unpadded, ungrouped problem over packed NCHW x and y whose stride is above 1 somewhere.
bool Is1x1StridedNchw(const ConvProblem& p) {
  if (p.FilterTaps() != 1 || p.groups != 1) return false;
  bool strided = false;
  for (int i = 0; i < 3; ++i) {
    if (p.pad[i] != 0) return false;
    strided = strided || p.stride[i] != 1;
  }
  return strided && PackedNchw(p.x_stride, p.c, p.in) && PackedNchw(p.y_stride, p.k, p.out);
}

// The stride-1 problem over the subsampled x (packed NCHW on the output grid).
ConvProblem Subsampled(const ConvProblem& p) {
  ConvProblem q = p;
  const int64_t spatial = p.out[0] * p.out[1] * p.out[2];
  for (int i = 0; i < 3; ++i) {
    q.in[i] = p.out[i];
    q.stride[i] = 1;
  }
  q.x_stride[4] = 1;
  q.x_stride[3] = p.out[2];
  q.x_stride[2] = p.out[1] * p.out[2];
  q.x_stride[1] = spatial;
  q.x_stride[0] = p.c * spatial;
  q.x_span = p.n * p.c * spatial;
  return q;
}

int64_t SubsampledBytes(const ConvProblem& p) {
  return static_cast<int64_t>(
      Align256(p.n * p.c * p.out[0] * p.out[1] * p.out[2] * ElementBytes(p.dtype)));
}

// Images per batch of the NCHW filter gradient's parts.
int64_t PartImages(const ConvProblem& p) {
  return std::min(p.n, std::max<int64_t>(1, kPartBytes / std::max<int64_t>(1, p.k * p.c * 4)));
}

// Backward filter of a packed NCHW stride-1 1x1 problem: per image, dw^T (C x K, column-major)
// = x_n^T (C x HW) dy_n (HW x K), a batch of them into f32 parts, then added into dw.
absl::Status BackwardFilter1x1Nchw(Handle& h, const ConvProblem& p, float alpha, float beta,
                                   const void* x, const void* dy, void* dw, char* ws) {
  const cudaDataType_t t = CublasType(p.dtype);
  const int64_t hw = p.in[0] * p.in[1] * p.in[2], eb = ElementBytes(p.dtype);
  const int64_t images = PartImages(p);
  float* part = reinterpret_cast<float*>(ws);
  const float one = 1.0f, zero = 0.0f;
  for (int64_t n0 = 0; n0 < p.n; n0 += images) {
    const int64_t batch = std::min(images, p.n - n0);
    KILN_RETURN_IF_ERROR(
        CublasOk(cublasGemmStridedBatchedEx(
                     static_cast<cublasHandle_t>(h.cublas()), CUBLAS_OP_T, CUBLAS_OP_N,
                     static_cast<int>(p.c), static_cast<int>(p.k), static_cast<int>(hw), &one,
                     static_cast<const char*>(x) + n0 * p.c * hw * eb, t, static_cast<int>(hw),
                     p.c * hw, static_cast<const char*>(dy) + n0 * p.k * hw * eb, t,
                     static_cast<int>(hw), p.k * hw, &zero, part, CUDA_R_32F, static_cast<int>(p.c),
                     p.c * p.k, static_cast<int>(batch), CublasCompute(p), CUBLAS_GEMM_DEFAULT),
                 "cublasGemmStridedBatchedEx (1x1 NCHW backward filter)"));
    // The first batch blends into dw with the caller's beta, the later ones add to it.
    KILN_RETURN_IF_ERROR(
        Launched(cuda::LaunchSumParts(part, batch, p.k * p.c, ElementOf(p.dtype), alpha,
                                      n0 == 0 ? beta : 1.0f, dw, h.stream()),
                 "1x1 filter gradient sum"));
  }
  return absl::OkStatus();
}

}  // namespace

bool Is1x1Packed(const ConvProblem& p, bool* nhwc) {
  if (p.FilterTaps() != 1 || p.groups != 1) return false;
  for (int i = 0; i < 3; ++i)
    if (p.stride[i] != 1 || p.pad[i] != 0) return false;
  const int64_t hw = p.in[0] * p.in[1] * p.in[2];
  const bool x_nchw = p.x_stride[1] == hw && p.x_stride[0] == p.c * hw && p.x_stride[4] == 1 &&
                      p.x_stride[3] == p.in[2];
  const bool y_nchw = p.y_stride[1] == hw && p.y_stride[0] == p.k * hw && p.y_stride[4] == 1 &&
                      p.y_stride[3] == p.in[2];
  const bool x_nhwc = p.x_stride[1] == 1 && p.x_stride[4] == p.c &&
                      p.x_stride[3] == p.in[2] * p.c && p.x_stride[0] == hw * p.c;
  const bool y_nhwc = p.y_stride[1] == 1 && p.y_stride[4] == p.k &&
                      p.y_stride[3] == p.in[2] * p.k && p.y_stride[0] == hw * p.k;
  // The filter is packed KCRS or KRSC; with 1x1 taps both are K x C row-major.
  if (x_nchw && y_nchw) {
    *nhwc = false;
    return true;
  }
  if (x_nhwc && y_nhwc) {
    *nhwc = true;
    return true;
  }
  return false;
}

bool Gemm1x1Serves(const ConvProblem& p) {
  bool nhwc;
  return Is1x1Packed(p, &nhwc) || Is1x1StridedNchw(p);
}

size_t Gemm1x1WorkspaceBytes(ConvDirection direction, const ConvProblem& p) {
  bool nhwc = false;
  const bool packed = Is1x1Packed(p, &nhwc);
  int64_t bytes = packed ? 0 : SubsampledBytes(p);
  if (direction == ConvDirection::kBackwardFilter && !nhwc) {
    bytes += static_cast<int64_t>(Align256(PartImages(p) * p.k * p.c * 4));
  }
  return static_cast<size_t>(bytes);
}

namespace {
// A packed 1x1 problem's forward (out = x W^T per pixel, backward = false) or backward data
// (out = dy W, backward = true) on cuBLAS. W is K x C row-major, i.e. C x K column-major.
absl::Status Pixelwise1x1Packed(Handle& h, const ConvProblem& p, bool backward, float alpha,
                                float beta, const void* in, const void* w, void* out) {
  bool nhwc = false;
  Is1x1Packed(p, &nhwc);
  const cudaDataType_t t = CublasType(p.dtype);
  auto cublas = static_cast<cublasHandle_t>(h.cublas());
  const int64_t hw = p.in[0] * p.in[1] * p.in[2];
  const int64_t cin = backward ? p.k : p.c, cout = backward ? p.c : p.k;
  const char* what = backward ? "1x1 backward data" : "1x1 forward";
  if (nhwc) {
    // out^T (Cout x NHW, column-major) = W or W^T (Cout x Cin) in^T (Cin x NHW).
    return CublasOk(
        cublasGemmEx(cublas, backward ? CUBLAS_OP_N : CUBLAS_OP_T, CUBLAS_OP_N,
                     static_cast<int>(cout), static_cast<int>(p.n * hw), static_cast<int>(cin),
                     &alpha, w, t, static_cast<int>(p.c), in, t, static_cast<int>(cin), &beta, out,
                     t, static_cast<int>(cout), CublasCompute(p), CUBLAS_GEMM_DEFAULT),
        absl::StrCat("cublasGemmEx (", what, ", NHWC)"));
  }
  // Per image: out[n] (HW x Cout, column-major) = in[n] (HW x Cin) W^T or W (Cin x Cout).
  return CublasOk(
      cublasGemmStridedBatchedEx(
          cublas, CUBLAS_OP_N, backward ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(hw),
          static_cast<int>(cout), static_cast<int>(cin), &alpha, in, t, static_cast<int>(hw),
          cin * hw, w, t, static_cast<int>(p.c), 0, &beta, out, t, static_cast<int>(hw), cout * hw,
          static_cast<int>(p.n), CublasCompute(p), CUBLAS_GEMM_DEFAULT),
      absl::StrCat("cublasGemmStridedBatchedEx (", what, ", NCHW)"));
}

// Backward filter of a packed NHWC 1x1 problem on cuBLAS: one product over all pixels.
absl::Status BackwardFilter1x1Nhwc(Handle& h, const ConvProblem& p, float alpha, float beta,
                                   const void* x, const void* dy, void* dw) {
  const cudaDataType_t t = CublasType(p.dtype);
  const int64_t pixels = p.n * p.in[0] * p.in[1] * p.in[2];
  // dw^T (C x K, column-major) = x^T (C x NHW) dy (NHW x K).
  return CublasOk(
      cublasGemmEx(static_cast<cublasHandle_t>(h.cublas()), CUBLAS_OP_N, CUBLAS_OP_T,
                   static_cast<int>(p.c), static_cast<int>(p.k), static_cast<int>(pixels), &alpha,
                   x, t, static_cast<int>(p.c), dy, t, static_cast<int>(p.k), &beta, dw, t,
                   static_cast<int>(p.c), CublasCompute(p), CUBLAS_GEMM_DEFAULT),
      "cublasGemmEx (1x1 NHWC backward filter)");
}

}  // namespace

absl::Status Pixelwise1x1(Handle& h, const ConvProblem& p, bool backward, float alpha, float beta,
                          const void* in, const void* w, void* out, char* ws) {
  bool nhwc;
  if (Is1x1Packed(p, &nhwc)) return Pixelwise1x1Packed(h, p, backward, alpha, beta, in, w, out);
  const ConvProblem q = Subsampled(p);
  const ElementType e = ElementOf(p.dtype);
  if (!backward) {
    KILN_RETURN_IF_ERROR(
        Launched(cuda::LaunchSubsample1x1(p, e, in, ws, h.stream()), "1x1 subsample"));
    return Pixelwise1x1Packed(h, q, false, alpha, beta, ws, w, out);
  }
  KILN_RETURN_IF_ERROR(Pixelwise1x1Packed(h, q, true, 1.0f, 0.0f, in, w, ws));
  return Launched(cuda::LaunchExpand1x1(p, e, ws, alpha, beta, out, h.stream()), "1x1 expand");
}

absl::Status BackwardFilter1x1(Handle& h, const ConvProblem& p, float alpha, float beta,
                               const void* x, const void* dy, void* dw, char* ws) {
  bool nhwc;
  if (Is1x1Packed(p, &nhwc)) {
    if (nhwc) return BackwardFilter1x1Nhwc(h, p, alpha, beta, x, dy, dw);
    return BackwardFilter1x1Nchw(h, p, alpha, beta, x, dy, dw, ws);
  }
  KILN_RETURN_IF_ERROR(Launched(cuda::LaunchSubsample1x1(p, ElementOf(p.dtype), x, ws, h.stream()),
                                "1x1 subsample"));
  return BackwardFilter1x1Nchw(h, Subsampled(p), alpha, beta, ws, dy, dw, ws + SubsampledBytes(p));
}

}  // namespace conv_internal
}  // namespace dnn
}  // namespace kiln
