// Winograd F(2x2, 3x3) for f32 3x3 unit-stride 2-d convolutions, in three passes around a batched
// matrix product (Lavin and Gray's formulation of cross-correlation):
//   V[xi][c][t] = (B^T d B)[xi] for the 4x4 input patch d of output tile t (input kernel),
//   U[xi][k][c] = (G g G^T)[xi] for the 3x3 filter g of (k, c) (filter kernel),
//   M[xi] = U[xi] V[xi] over c (cuBLAS, by the caller),
//   y tile t of k = A^T M[.][k][t] A (output kernel, with alpha/beta).
// Each 2x2 output tile takes 16 multiplies per (k, c) pair instead of 36. Backward filter is the
// same product transposed: dU[xi][k][c] = sum over t of (A dy A^T)[xi][k][t] V[xi][c][t] (gradient
// kernel, then cuBLAS), dw = G^T dU G (filter-gradient kernel).
#include <cuda_runtime.h>

#include "kernels/cuda/conv_winograd_launch.h"

namespace kiln {
namespace cuda {

namespace {

using dnn::ConvProblem;

unsigned GridFor(int64_t n) {
  const int64_t blocks = (n + 255) / 256;
  return static_cast<unsigned>(blocks < 132 * 64 ? (blocks < 1 ? 1 : blocks) : 132 * 64);
}

// In-place 1-d transforms of four values: B^T (input) and A^T (output, two results).
__device__ __forceinline__ void InputTransform4(float& a, float& b, float& c, float& d) {
  const float t0 = a - c, t1 = b + c, t2 = c - b, t3 = b - d;
  a = t0;
  b = t1;
  c = t2;
  d = t3;
}

// One thread per (c, tile): the 4x4 patch at (2 th - pad_h, 2 tw - pad_w) of image n, zero
// outside the image. Indices fit in 32 bits (the host checks C x tiles and the tensors' spans).
__global__ void WinogradInputKernel(ConvProblem p, const float* x, int tiles_h, int tiles_w,
                                    int chunk, float* v) {
  const int tiles = static_cast<int>(p.n) * tiles_h * tiles_w;
  const int chunks = (tiles + chunk - 1) / chunk;
  const int total = static_cast<int>(p.c) * chunks * chunk;
  const int h = static_cast<int>(p.in[1]), w = static_cast<int>(p.in[2]);
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    // i = (s C + c) chunk + tile within the chunk: V[xi][s][c][.] holds tiles s chunk on.
    const int within = i % chunk, c = (i / chunk) % static_cast<int>(p.c);
    const int t = (i / chunk / static_cast<int>(p.c)) * chunk + within;
    if (t >= tiles) {
#pragma unroll
      for (int xi = 0; xi < 16; ++xi) v[xi * static_cast<int64_t>(total) + i] = 0.0f;
      continue;
    }
    const int n = t / (tiles_h * tiles_w), rest = t % (tiles_h * tiles_w);
    const int h0 = 2 * (rest / tiles_w) - static_cast<int>(p.pad[1]);
    const int w0 = 2 * (rest % tiles_w) - static_cast<int>(p.pad[2]);
    const float* base = x + n * p.x_stride[0] + c * p.x_stride[1];
    float d[4][4];
#pragma unroll
    for (int r = 0; r < 4; ++r) {
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        const int hh = h0 + r, ww = w0 + s;
        d[r][s] = hh >= 0 && hh < h && ww >= 0 && ww < w
                      ? base[hh * p.x_stride[3] + ww * p.x_stride[4]]
                      : 0.0f;
      }
    }
#pragma unroll
    for (int s = 0; s < 4; ++s) InputTransform4(d[0][s], d[1][s], d[2][s], d[3][s]);
#pragma unroll
    for (int r = 0; r < 4; ++r) InputTransform4(d[r][0], d[r][1], d[r][2], d[r][3]);
    const int64_t plane = static_cast<int64_t>(total);
#pragma unroll
    for (int xi = 0; xi < 16; ++xi) v[xi * plane + i] = d[xi / 4][xi % 4];
  }
}

// One thread per (k, c): U = G g G^T, g reversed for true convolution.
__global__ void WinogradFilterKernel(ConvProblem p, const float* w, bool flip, float* u) {
  const int total = static_cast<int>(p.k * p.c);
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    const int c = i % static_cast<int>(p.c), k = i / static_cast<int>(p.c);
    const float* base = w + k * p.w_stride[0] + c * p.w_stride[1];
    float g[3][3];
#pragma unroll
    for (int r = 0; r < 3; ++r) {
#pragma unroll
      for (int s = 0; s < 3; ++s) {
        const int fr = flip ? 2 - r : r, fs = flip ? 2 - s : s;
        g[r][s] = base[fr * p.w_stride[3] + fs * p.w_stride[4]];
      }
    }
    float gg[4][3];  // G g
#pragma unroll
    for (int s = 0; s < 3; ++s) {
      gg[0][s] = g[0][s];
      gg[1][s] = 0.5f * (g[0][s] + g[1][s] + g[2][s]);
      gg[2][s] = 0.5f * (g[0][s] - g[1][s] + g[2][s]);
      gg[3][s] = g[2][s];
    }
    const int64_t plane = static_cast<int64_t>(total);
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const float row[4] = {gg[r][0], 0.5f * (gg[r][0] + gg[r][1] + gg[r][2]),
                            0.5f * (gg[r][0] - gg[r][1] + gg[r][2]), gg[r][2]};
#pragma unroll
      for (int s = 0; s < 4; ++s) u[(r * 4 + s) * plane + i] = row[s];
    }
  }
}

// One thread per (k, tile): the 2x2 outputs A^T m A, blended into y where inside the output.
__global__ void WinogradOutputKernel(ConvProblem p, const float* m, int tiles_h, int tiles_w,
                                     float alpha, float beta, float* y) {
  const int tiles = static_cast<int>(p.n) * tiles_h * tiles_w;
  const int total = static_cast<int>(p.k) * tiles;
  const int out_h = static_cast<int>(p.out[1]), out_w = static_cast<int>(p.out[2]);
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    const int t = i % tiles, k = i / tiles;
    const int n = t / (tiles_h * tiles_w), rest = t % (tiles_h * tiles_w);
    const int h0 = 2 * (rest / tiles_w), w0 = 2 * (rest % tiles_w);
    const int64_t plane = static_cast<int64_t>(total);
    float a[4][4];
#pragma unroll
    for (int xi = 0; xi < 16; ++xi) a[xi / 4][xi % 4] = m[xi * plane + i];
    float col[2][4];  // A^T m
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      col[0][s] = a[0][s] + a[1][s] + a[2][s];
      col[1][s] = a[1][s] - a[2][s] - a[3][s];
    }
    float* base = y + n * p.y_stride[0] + k * p.y_stride[1];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float out[2] = {col[r][0] + col[r][1] + col[r][2], col[r][1] - col[r][2] - col[r][3]};
#pragma unroll
      for (int s = 0; s < 2; ++s) {
        if (h0 + r >= out_h || w0 + s >= out_w) continue;
        float* at = base + (h0 + r) * p.y_stride[3] + (w0 + s) * p.y_stride[4];
        float value = alpha * out[s];
        if (beta != 0.0f) value += beta * *at;
        *at = value;
      }
    }
  }
}

// One thread per (k, tile): the 2x2 dy tile (zero past the output's edge) as A dy A^T, 4x4.
__global__ void WinogradGradientKernel(ConvProblem p, const float* dy, int tiles_h, int tiles_w,
                                       int chunk, float* g) {
  const int tiles = static_cast<int>(p.n) * tiles_h * tiles_w;
  const int chunks = (tiles + chunk - 1) / chunk;
  const int total = static_cast<int>(p.k) * chunks * chunk;
  const int out_h = static_cast<int>(p.out[1]), out_w = static_cast<int>(p.out[2]);
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    // i = (s K + k) chunk + tile within the chunk, as for the input; zero past the last tile.
    const int within = i % chunk, k = (i / chunk) % static_cast<int>(p.k);
    const int t = (i / chunk / static_cast<int>(p.k)) * chunk + within;
    if (t >= tiles) {
#pragma unroll
      for (int xi = 0; xi < 16; ++xi) g[xi * static_cast<int64_t>(total) + i] = 0.0f;
      continue;
    }
    const int n = t / (tiles_h * tiles_w), rest = t % (tiles_h * tiles_w);
    const int h0 = 2 * (rest / tiles_w), w0 = 2 * (rest % tiles_w);
    const float* base = dy + n * p.y_stride[0] + k * p.y_stride[1];
    float d[2][2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
#pragma unroll
      for (int s = 0; s < 2; ++s) {
        d[r][s] = h0 + r < out_h && w0 + s < out_w
                      ? base[(h0 + r) * p.y_stride[3] + (w0 + s) * p.y_stride[4]]
                      : 0.0f;
      }
    }
    // A (a, b) = (a, a + b, a - b, -b), over rows, then columns.
    float rows[4][2];
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      rows[0][s] = d[0][s];
      rows[1][s] = d[0][s] + d[1][s];
      rows[2][s] = d[0][s] - d[1][s];
      rows[3][s] = -d[1][s];
    }
    const int64_t plane = static_cast<int64_t>(total);
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const float row[4] = {rows[r][0], rows[r][0] + rows[r][1], rows[r][0] - rows[r][1],
                            -rows[r][1]};
#pragma unroll
      for (int s = 0; s < 4; ++s) g[(r * 4 + s) * plane + i] = row[s];
    }
  }
}

// One thread per (k, c): dw = alpha G^T dU G + beta dw, reversed for true convolution.
__global__ void WinogradFilterGradientKernel(ConvProblem p, const float* du, int chunks, bool flip,
                                             float alpha, float beta, float* dw) {
  const int total = static_cast<int>(p.k * p.c);
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    const int c = i % static_cast<int>(p.c), k = i / static_cast<int>(p.c);
    // dU[xi][s][k][c]: the chunks' partial sums, added in chunk order.
    float u[4][4];
#pragma unroll
    for (int xi = 0; xi < 16; ++xi) {
      float sum = 0.0f;
      for (int s = 0; s < chunks; ++s) {
        sum += du[(xi * chunks + s) * static_cast<int64_t>(total) + i];
      }
      u[xi / 4][xi % 4] = sum;
    }
    // G^T v = (v0 + (v1 + v2) / 2, (v1 - v2) / 2, (v1 + v2) / 2 + v3), over rows, then columns.
    float rows[3][4];
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      rows[0][s] = u[0][s] + 0.5f * (u[1][s] + u[2][s]);
      rows[1][s] = 0.5f * (u[1][s] - u[2][s]);
      rows[2][s] = 0.5f * (u[1][s] + u[2][s]) + u[3][s];
    }
    float* base = dw + k * p.w_stride[0] + c * p.w_stride[1];
#pragma unroll
    for (int r = 0; r < 3; ++r) {
      const float* v = rows[r];
      const float out[3] = {v[0] + 0.5f * (v[1] + v[2]), 0.5f * (v[1] - v[2]),
                            0.5f * (v[1] + v[2]) + v[3]};
#pragma unroll
      for (int s = 0; s < 3; ++s) {
        const int fr = flip ? 2 - r : r, fs = flip ? 2 - s : s;
        float* at = base + fr * p.w_stride[3] + fs * p.w_stride[4];
        float value = alpha * out[s];
        if (beta != 0.0f) value += beta * *at;
        *at = value;
      }
    }
  }
}

}  // namespace

int LaunchWinogradGradient(const ConvProblem& p, const float* dy, int tiles_h, int tiles_w,
                           int chunk, float* g, void* stream) {
  const int64_t tiles = p.n * tiles_h * tiles_w;
  const int64_t total = p.k * ((tiles + chunk - 1) / chunk) * chunk;
  if (total == 0) return 0;
  WinogradGradientKernel<<<GridFor(total), 256, 0, static_cast<cudaStream_t>(stream)>>>(
      p, dy, tiles_h, tiles_w, chunk, g);
  return static_cast<int>(cudaGetLastError());
}

int LaunchWinogradFilterGradient(const ConvProblem& p, const float* du, int chunks, bool flip,
                                 float alpha, float beta, float* dw, void* stream) {
  const int64_t total = p.k * p.c;
  if (total == 0) return 0;
  WinogradFilterGradientKernel<<<GridFor(total), 256, 0, static_cast<cudaStream_t>(stream)>>>(
      p, du, chunks, flip, alpha, beta, dw);
  return static_cast<int>(cudaGetLastError());
}

int LaunchWinogradInput(const ConvProblem& p, const float* x, int tiles_h, int tiles_w, int chunk,
                        float* v, void* stream) {
  const int64_t tiles = p.n * tiles_h * tiles_w;
  const int64_t total = p.c * ((tiles + chunk - 1) / chunk) * chunk;
  if (total == 0) return 0;
  WinogradInputKernel<<<GridFor(total), 256, 0, static_cast<cudaStream_t>(stream)>>>(
      p, x, tiles_h, tiles_w, chunk, v);
  return static_cast<int>(cudaGetLastError());
}

int LaunchWinogradFilter(const ConvProblem& p, const float* w, bool flip, float* u, void* stream) {
  const int64_t total = p.k * p.c;
  if (total == 0) return 0;
  WinogradFilterKernel<<<GridFor(total), 256, 0, static_cast<cudaStream_t>(stream)>>>(p, w, flip,
                                                                                      u);
  return static_cast<int>(cudaGetLastError());
}

int LaunchWinogradOutput(const ConvProblem& p, const float* m, int tiles_h, int tiles_w,
                         float alpha, float beta, float* y, void* stream) {
  const int64_t total = p.k * p.n * tiles_h * tiles_w;
  if (total == 0) return 0;
  WinogradOutputKernel<<<GridFor(total), 256, 0, static_cast<cudaStream_t>(stream)>>>(
      p, m, tiles_h, tiles_w, alpha, beta, y);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace cuda
}  // namespace kiln
