// WINOGRAD_NONFUSED: F(2x2, 3x3), F(4x4, 3x3) and F(2x2, 5x5) as separate kernels for the input,
// filter and output transforms around batched cuBLAS products, one per transform point; backward
// data runs as a forward convolution with the transposed filter, backward filter in chunks of
// tiles.
#include <cublas_v2.h>

#include <algorithm>
#include <cstdint>

#include "base/status_macros.h"
#include "dnn/cuda/conv/conv_paths.h"
#include "dnn/cuda/conv/conv_winograd_launch.h"
#include "dnn/cuda/conv/conv_winograd_passes.h"

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

// Forward's transformed input and products take (C + K) x points floats per tile: 2.2 GB for a
// 64-channel 3x3 layer over FCN-8s's four 698x698 planes, 276 MiB for DenseNet-121's first 3x3
// layers at batch 64, where that workspace set the plan's peak. Forward (and backward data, run
// as a forward) therefore goes in passes whose transformed data stays within this many bytes,
// as the FFT's do: whole images while they fit, else bands of tile rows of one image. A
// variable only so that tests can force several passes on small problems.
int64_t pass_bytes = int64_t{128} << 20;

// One forward pass: `images` whole images, or (images == 1) `tile_rows` rows of tiles of one;
// `tiles` is the most any pass holds. Passes are balanced so the last one is not a sliver.
struct WinogradPasses {
  int64_t images = 1, tile_rows = 1, tiles = 1, count = 1;
};

WinogradPasses PlanForwardPasses(int tile, const ConvProblem& p) {
  const int64_t tiles_h = TilesAlong(tile, p.out[1]), tiles_w = TilesAlong(tile, p.out[2]);
  const int64_t per_tile = WinogradPoints(tile, p) * (p.c + p.k) * 4;
  const int64_t fit = std::max<int64_t>(1, pass_bytes / per_tile);  // tiles one pass may hold
  WinogradPasses s;
  if (fit >= tiles_h * tiles_w) {
    const int64_t count = (p.n + fit / (tiles_h * tiles_w) - 1) / (fit / (tiles_h * tiles_w));
    s.images = (p.n + count - 1) / count;
    s.tile_rows = tiles_h;
    s.count = (p.n + s.images - 1) / s.images;
  } else {
    const int64_t bands =
        (tiles_h + std::max<int64_t>(1, fit / tiles_w) - 1) / std::max<int64_t>(1, fit / tiles_w);
    s.images = 1;
    s.tile_rows = (tiles_h + bands - 1) / bands;
    s.count = p.n * ((tiles_h + s.tile_rows - 1) / s.tile_rows);
  }
  s.tiles = s.images * s.tile_rows * tiles_w;
  return s;
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
// chunk). Forward holds one pass's tiles (PlanForwardPasses).
size_t WinogradBytes(ConvDirection direction, const ConvProblem& p, int64_t chunks) {
  const int tile = WinogradTile(direction, p);
  const int64_t padded = direction == ConvDirection::kBackwardFilter
                             ? chunks * WinogradChunkTiles(tile, p, chunks)
                             : PlanForwardPasses(tile, p).tiles;
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
  const WinogradPasses passes = PlanForwardPasses(tile, p);
  const int64_t tiles_h = TilesAlong(tile, p.out[1]), tiles_w = TilesAlong(tile, p.out[2]);
  const int64_t points = WinogradPoints(tile, p);
  float* v = reinterpret_cast<float*>(ws);
  float* u =
      reinterpret_cast<float*>(ws + Align256(static_cast<size_t>(points * p.c * passes.tiles * 4)));
  float* m = reinterpret_cast<float*>(reinterpret_cast<char*>(u) +
                                      Align256(static_cast<size_t>(points * p.k * p.c * 4)));
  KILN_RETURN_IF_ERROR(
      Launched(cuda::LaunchWinogradFilter(p, tile, static_cast<const float*>(w),
                                          p.mode == ConvolutionMode::kConvolution, u, h.stream()),
               "Winograd filter transform"));
  // Each pass is the convolution of a sub-problem: images from n0 on (x and y start there), and
  // output rows from r0 = row0 x tile on (y starts there; the padding shrinks by r0, going
  // negative past it, so that the input rows read are the whole problem's, bounded by its full
  // height).
  const float one = 1.0f, zero = 0.0f;
  for (int64_t n0 = 0; n0 < p.n; n0 += passes.images) {
    for (int64_t row0 = 0; row0 < tiles_h; row0 += passes.tile_rows) {
      ConvProblem q = p;
      q.n = std::min(passes.images, p.n - n0);
      const int64_t rows = std::min(passes.tile_rows, tiles_h - row0);
      q.out[1] = std::min(rows * tile, p.out[1] - row0 * tile);
      q.pad[1] = p.pad[1] - row0 * tile;
      const float* qx = static_cast<const float*>(x) + n0 * p.x_stride[0];
      float* qy = static_cast<float*>(y) + n0 * p.y_stride[0] + row0 * tile * p.y_stride[3];
      const int64_t tiles = q.n * rows * tiles_w;
      KILN_RETURN_IF_ERROR(Launched(
          cuda::LaunchWinogradInput(q, tile, qx, static_cast<int>(rows), static_cast<int>(tiles_w),
                                    static_cast<int>(tiles), v, h.stream()),
          "Winograd input transform"));
      // Per transform point xi: M[xi] (tiles x K, column-major) = V[xi] (tiles x C) U[xi] (C x
      // K).
      KILN_RETURN_IF_ERROR(CublasOk(
          cublasGemmStridedBatchedEx(
              static_cast<cublasHandle_t>(h.cublas()), CUBLAS_OP_N, CUBLAS_OP_N,
              static_cast<int>(tiles), static_cast<int>(p.k), static_cast<int>(p.c), &one, v,
              CUDA_R_32F, static_cast<int>(tiles), p.c * tiles, u, CUDA_R_32F,
              static_cast<int>(p.c), p.k * p.c, &zero, m, CUDA_R_32F, static_cast<int>(tiles),
              p.k * tiles, static_cast<int>(points), WinogradCompute(p), CUBLAS_GEMM_DEFAULT),
          "cublasGemmStridedBatchedEx (Winograd)"));
      KILN_RETURN_IF_ERROR(Launched(
          cuda::LaunchWinogradOutput(q, tile, m, static_cast<int>(rows), static_cast<int>(tiles_w),
                                     alpha, beta, qy, h.stream(), e),
          "Winograd output transform"));
    }
  }
  return absl::OkStatus();
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

void SetWinogradPassBytesForTesting(int64_t bytes) { conv_internal::pass_bytes = bytes; }

int64_t WinogradForwardPassesForTesting(ConvDirection direction, const ConvProblem& p) {
  if (direction == ConvDirection::kBackwardFilter) return 0;
  ConvProblem q = p;
  if (direction == ConvDirection::kBackwardData) conv_internal::BackwardDataAsForward(p, &q);
  if (!conv_internal::WinogradServes(q)) return 0;
  return conv_internal::PlanForwardPasses(conv_internal::WinogradTile(ConvDirection::kForward, q),
                                          q)
      .count;
}

}  // namespace dnn
}  // namespace kiln
