// WINOGRAD_NONFUSED: F(2x2, 3x3), F(4x4, 3x3) and F(2x2, 5x5) as separate kernels for the input,
// filter and output transforms around batched cuBLAS products, one per transform point; backward
// data runs as a forward convolution with the transposed filter, backward filter in chunks of
// tiles.
#include <cublas_v2.h>

#include <algorithm>
#include <cstdint>

#include "engine/status_macros.h"
#include "kernels/cuda/conv_paths.h"
#include "kernels/cuda/conv_winograd_launch.h"

namespace kiln {
namespace dnn {
namespace conv_internal {

namespace {

// The output tile M of F(MxM, RxR) for `direction`'s transforms (backward data: its forward
// view). Strict-f32 3x3 forward transforms take F(4x4, 3x3): 36 products per 16 outputs against
// F(2x2)'s 16 per 4, and 2.25 transformed values per input value against 4, so both the batched
// products and the memory passes shrink. Its transforms reach 8 and 1/24, so its products stay
// FFMA (TF32 keeps F(2x2, 3x3) and TF32 products), and backward filter, whose long reduction over
// tiles amplifies the transforms' rounding (F(2x2, 5x5), with the same points, loses 0.2 % there),
// keeps F(2x2).
int WinogradTile(ConvDirection direction, const ConvProblem& p) {
  return direction != ConvDirection::kBackwardFilter && p.filter[1] == 3 &&
                 p.math == MathMode::kFp32
             ? 4
             : 2;
}

// Transform points of Winograd F(MxM, RxR): (M + R - 1)^2.
int64_t WinogradPoints(int tile, const ConvProblem& p) {
  return (tile + p.filter[1] - 1) * (tile + p.filter[1] - 1);
}

int64_t TilesAlong(int tile, int64_t out) { return (out + tile - 1) / tile; }

// Tiles per chunk.
int64_t WinogradChunkTiles(int tile, const ConvProblem& p, int64_t chunks) {
  const int64_t tiles = p.n * TilesAlong(tile, p.out[1]) * TilesAlong(tile, p.out[2]);
  return (tiles + chunks - 1) / chunks;
}

// TF32 products only for F(2x2, 3x3): F(2x2, 5x5)'s transforms reach 5 and 1/24, and TF32's
// 10-bit rounding of the transformed operands then loses too much over long reductions (backward
// filter over 140-wide images: errors of 3 %), so its products stay FFMA in every math mode.
cublasComputeType_t WinogradCompute(const ConvProblem& p) {
  return p.filter[1] == 3 ? CublasCompute(p) : CUBLAS_COMPUTE_32F;
}

}  // namespace

// Winograd F(2x2, 3x3) and F(2x2, 5x5) serve f32 square 3x3 or 5x5, unit-stride, unit-dilation,
// ungrouped 2-d problems whose transformed planes index in 32 bits.
bool WinogradServes(const ConvProblem& p) {
  if (p.dtype != DataType::kF32 || p.groups != 1) return false;
  if (p.in[0] != 1 || p.filter[0] != 1 || p.out[0] != 1) return false;
  if ((p.filter[1] != 3 && p.filter[1] != 5) || p.filter[2] != p.filter[1]) return false;
  for (int i = 1; i < 3; ++i) {
    if (p.stride[i] != 1 || p.dilation[i] != 1) return false;
  }
  const int64_t tiles = p.n * ((p.out[1] + 1) / 2) * ((p.out[2] + 1) / 2);
  // Chunking pads the tiles by fewer than 16 x 256; backward filter keeps up to 16 partial sums.
  const int64_t limit = int64_t{1} << 31, padded = tiles + 16 * 256;
  return p.c * padded < limit && p.k * padded < limit && 16 * p.k * p.c < limit;
}

// How many chunks backward filter cuts the tiles into: enough batched products (one per point and
// chunk) for about
// two blocks per SM (counting one 128 x 128 output tile a block), each chunk at least 256 tiles.
// Forward and backward data take the tiles whole.
int64_t WinogradChunks(ConvDirection direction, const ConvProblem& p, int multiprocessors) {
  if (direction != ConvDirection::kBackwardFilter) return 1;
  const int64_t tiles = p.n * TilesAlong(2, p.out[1]) * TilesAlong(2, p.out[2]);
  const int64_t blocks = WinogradPoints(2, p) * ((p.c + 127) / 128) * ((p.k + 127) / 128);
  int64_t chunks = (2 * multiprocessors + blocks - 1) / blocks;
  chunks = std::min<int64_t>(chunks, std::max<int64_t>(1, tiles / 256));
  return std::max<int64_t>(1, std::min<int64_t>(chunks, 16));
}

// The transformed input V (points x chunks x C x chunk tiles), filter U (points x chunks x K x C;
// chunks partial sums in backward filter) and products M / dy transform G (points x chunks x K x
// chunk).
size_t WinogradBytes(ConvDirection direction, const ConvProblem& p, int64_t chunks) {
  const int tile = WinogradTile(direction, p);
  const int64_t padded = chunks * WinogradChunkTiles(tile, p, chunks);
  const int64_t points = WinogradPoints(tile, p);
  return Align256(static_cast<size_t>(points * p.c * padded * 4)) +
         Align256(static_cast<size_t>(points * chunks * p.k * p.c * 4)) +
         Align256(static_cast<size_t>(points * p.k * padded * 4));
}

absl::Status ForwardWinograd(Handle& h, const ConvProblem& p, float alpha, float beta,
                             const void* x, const void* w, void* y, char* ws,
                             const ConvEpilogue* epilogue, bool* applied) {
  cuda::OutputEpilogue e;
  if (epilogue != nullptr) {
    e.bias = epilogue->bias;
    e.relu = epilogue->relu;
    e.slope = epilogue->relu_slope;
  }
  if (applied != nullptr) *applied = epilogue != nullptr;
  const int tile = WinogradTile(ConvDirection::kForward, p);
  const int tiles_h = static_cast<int>(TilesAlong(tile, p.out[1]));
  const int tiles_w = static_cast<int>(TilesAlong(tile, p.out[2]));
  const int64_t tiles = p.n * tiles_h * tiles_w;
  float* v = reinterpret_cast<float*>(ws);
  const int64_t points = WinogradPoints(tile, p);
  float* u = reinterpret_cast<float*>(ws + Align256(static_cast<size_t>(points * p.c * tiles * 4)));
  float* m = reinterpret_cast<float*>(reinterpret_cast<char*>(u) +
                                      Align256(static_cast<size_t>(points * p.k * p.c * 4)));
  KILN_RETURN_IF_ERROR(
      Launched(cuda::LaunchWinogradInput(p, tile, static_cast<const float*>(x), tiles_h, tiles_w,
                                         static_cast<int>(tiles), v, h.stream()),
               "Winograd input transform"));
  KILN_RETURN_IF_ERROR(
      Launched(cuda::LaunchWinogradFilter(p, tile, static_cast<const float*>(w),
                                          p.mode == ConvolutionMode::kConvolution, u, h.stream()),
               "Winograd filter transform"));
  // Per transform point xi: M[xi] (tiles x K, column-major) = V[xi] (tiles x C) U[xi] (C x K).
  const float one = 1.0f, zero = 0.0f;
  KILN_RETURN_IF_ERROR(
      CublasOk(cublasGemmStridedBatchedEx(
                   static_cast<cublasHandle_t>(h.cublas()), CUBLAS_OP_N, CUBLAS_OP_N,
                   static_cast<int>(tiles), static_cast<int>(p.k), static_cast<int>(p.c), &one, v,
                   CUDA_R_32F, static_cast<int>(tiles), p.c * tiles, u, CUDA_R_32F,
                   static_cast<int>(p.c), p.k * p.c, &zero, m, CUDA_R_32F, static_cast<int>(tiles),
                   p.k * tiles, static_cast<int>(points), WinogradCompute(p), CUBLAS_GEMM_DEFAULT),
               "cublasGemmStridedBatchedEx (Winograd)"));
  return Launched(cuda::LaunchWinogradOutput(p, tile, m, tiles_h, tiles_w, alpha, beta,
                                             static_cast<float*>(y), h.stream(), e),
                  "Winograd output transform");
}

absl::Status BackwardDataWinograd(Handle& h, const ConvProblem& p, float alpha, float beta,
                                  const void* dy, const void* w, void* dx, char* ws) {
  ConvProblem q;
  BackwardDataAsForward(p, &q);
  KILN_RETURN_IF_ERROR(WriteBackwardDataFilter(h, p, w, ws));
  return ForwardWinograd(h, q, alpha, beta, dy, ws, dx, ws + BackwardDataFilterBytes(p));
}

// Backward filter: V from x as in forward, G from dy, dU[xi] = G[xi] V[xi]^T over the tiles,
// dw = G^T dU G. The workspace holds V, dU (where forward keeps U) and G (where forward keeps M):
// the same three sizes.
absl::Status BackwardFilterWinograd(Handle& h, const ConvProblem& p, float alpha, float beta,
                                    const void* x, const void* dy, void* dw, char* ws) {
  const int tiles_h = static_cast<int>(TilesAlong(2, p.out[1]));
  const int tiles_w = static_cast<int>(TilesAlong(2, p.out[2]));
  const int64_t chunks = WinogradChunks(ConvDirection::kBackwardFilter, p, h.multiprocessors());
  const int64_t chunk = WinogradChunkTiles(2, p, chunks);
  const int64_t points = WinogradPoints(2, p);
  float* v = reinterpret_cast<float*>(ws);
  float* du = reinterpret_cast<float*>(
      ws + Align256(static_cast<size_t>(points * p.c * chunks * chunk * 4)));
  float* g = reinterpret_cast<float*>(
      reinterpret_cast<char*>(du) + Align256(static_cast<size_t>(points * chunks * p.k * p.c * 4)));
  KILN_RETURN_IF_ERROR(
      Launched(cuda::LaunchWinogradInput(p, 2, static_cast<const float*>(x), tiles_h, tiles_w,
                                         static_cast<int>(chunk), v, h.stream()),
               "Winograd input transform"));
  KILN_RETURN_IF_ERROR(
      Launched(cuda::LaunchWinogradGradient(p, static_cast<const float*>(dy), tiles_h, tiles_w,
                                            static_cast<int>(chunk), g, h.stream()),
               "Winograd gradient transform"));
  // Per (xi, chunk s), batch xi chunks + s: dU[xi][s] (C x K, column-major) = V[xi][s]^T (C x
  // chunk) G[xi][s] (chunk x K).
  const float one = 1.0f, zero = 0.0f;
  KILN_RETURN_IF_ERROR(CublasOk(
      cublasGemmStridedBatchedEx(
          static_cast<cublasHandle_t>(h.cublas()), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(p.c),
          static_cast<int>(p.k), static_cast<int>(chunk), &one, v, CUDA_R_32F,
          static_cast<int>(chunk), p.c * chunk, g, CUDA_R_32F, static_cast<int>(chunk), p.k * chunk,
          &zero, du, CUDA_R_32F, static_cast<int>(p.c), p.k * p.c,
          static_cast<int>(points * chunks), WinogradCompute(p), CUBLAS_GEMM_DEFAULT),
      "cublasGemmStridedBatchedEx (Winograd backward filter)"));
  return Launched(cuda::LaunchWinogradFilterGradient(p, du, static_cast<int>(chunks),
                                                     p.mode == ConvolutionMode::kConvolution, alpha,
                                                     beta, static_cast<float*>(dw), h.stream()),
                  "Winograd filter-gradient transform");
}

}  // namespace conv_internal
}  // namespace dnn
}  // namespace kiln
