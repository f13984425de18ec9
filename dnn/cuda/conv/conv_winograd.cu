// Winograd F(MxM, RxR) for f32 unit-stride 2-d convolutions: F(2x2, 3x3), F(2x2, 5x5) and
// F(4x4, 3x3), in passes around a batched matrix product (Lavin and Gray's formulation of
// cross-correlation), N = M + R - 1 transform points per dim:
//   V[xi][c][t] = (B^T d B)[xi] for the NxN input patch d of output tile t (input kernel),
//   U[xi][k][c] = (G g G^T)[xi] for the RxR filter g of (k, c) (filter kernel),
//   M[xi] = U[xi] V[xi] over c (cuBLAS, by the caller),
//   y tile t of k = A^T M[.][k][t] A (output kernel, with alpha/beta).
// Each MxM output tile takes N^2 multiplies per (k, c) pair instead of M^2 R^2 (16 for 36 at
// F(2x2, 3x3), 36 for 100 at F(2x2, 5x5), 36 for 144 at F(4x4, 3x3)). Backward filter (2x2 tiles
// only) is the same product transposed: dU[xi][k][c] = sum over t of (A dy A^T)[xi][k][t]
// V[xi][c][t] (gradient kernel, then cuBLAS), dw = G^T dU G (filter-gradient kernel). The
// matrices come from the interpolation points 0, 1, -1 (N = 4), 0, 1, -1, 2, -2 (F(2x2, 5x5)) and
// 0, 1, -1, 1/2, -2 (F(4x4, 3x3)), plus infinity.
#include <cuda_runtime.h>

#include "dnn/cuda/conv/conv_winograd_launch.h"

namespace kiln {
namespace cuda {

namespace {

using dnn::ConvProblem;

unsigned GridFor(int64_t n) {
  const int64_t blocks = (n + 255) / 256;
  return static_cast<unsigned>(blocks < 132 * 64 ? (blocks < 1 ? 1 : blocks) : 132 * 64);
}

// The transform matrices of F(MxM, RxR) as functions of constant indices, so that unrolled loops
// fold them.
template <int R, int M>
struct Transform;

template <>
struct Transform<3, 2> {
  static constexpr int kN = 4;
  __device__ static constexpr float BT(int i, int j) {  // N x N
    constexpr float m[4][4] = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}};
    return m[i][j];
  }
  __device__ static constexpr float G(int i, int j) {  // N x R
    constexpr float m[4][3] = {{1, 0, 0}, {0.5f, 0.5f, 0.5f}, {0.5f, -0.5f, 0.5f}, {0, 0, 1}};
    return m[i][j];
  }
  __device__ static constexpr float AT(int i, int j) {  // 2 x N
    constexpr float m[2][4] = {{1, 1, 1, 0}, {0, 1, -1, -1}};
    return m[i][j];
  }
};

template <>
struct Transform<5, 2> {
  static constexpr int kN = 6;
  __device__ static constexpr float BT(int i, int j) {
    constexpr float m[6][6] = {{4, 0, -5, 0, 1, 0},  {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0},
                               {0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}};
    return m[i][j];
  }
  __device__ static constexpr float G(int i, int j) {
    constexpr float s = 1.0f / 6, t = 1.0f / 12, u = 1.0f / 24, v = 1.0f / 3, w = 2.0f / 3;
    constexpr float m[6][5] = {{0.25f, 0, 0, 0, 0}, {-s, -s, -s, -s, -s}, {-s, s, -s, s, -s},
                               {u, t, s, v, w},     {u, -t, s, -v, w},    {0, 0, 0, 0, 1}};
    return m[i][j];
  }
  __device__ static constexpr float AT(int i, int j) {
    constexpr float m[2][6] = {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 1}};
    return m[i][j];
  }
};

// F(4x4, 3x3) at the points 0, 1, -1, 1/2, -2 (and infinity) rather than F(2x2, 5x5)'s +-2:
// one point inside the unit interval keeps the transforms' entries smaller, and in a float32
// simulation of one tile over 128 channels its relative error was 1.8e-6 against 3.2e-6.
template <>
struct Transform<3, 4> {
  static constexpr int kN = 6;
  __device__ static constexpr float BT(int i, int j) {
    constexpr float m[6][6] = {{1, -1.5f, -2, 1.5f, 1, 0}, {0, -1, 0.5f, 2.5f, 1, 0},
                               {0, 1, -2.5f, 0.5f, 1, 0},  {0, -2, -1, 2, 1, 0},
                               {0, 0.5f, -1, -0.5f, 1, 0}, {0, 1, -1.5f, -2, 1.5f, 1}};
    return m[i][j];
  }
  __device__ static constexpr float G(int i, int j) {  // N x R: the filter at the six points
    constexpr float t = 1.0f / 3, f = 1.0f / 15;
    constexpr float m[6][3] = {{1, 0, 0},          {t, t, t},
                               {-t, t, -t},        {-16 * f, -8 * f, -4 * f},
                               {f, -2 * f, 4 * f}, {0, 0, 1}};
    return m[i][j];
  }
  __device__ static constexpr float AT(int i, int j) {  // M x N: powers of the points
    constexpr float m[4][6] = {{1, 1, 1, 1, 1, 0},
                               {0, 1, -1, 0.5f, -2, 0},
                               {0, 1, 1, 0.25f, 4, 0},
                               {0, 1, -1, 0.125f, -8, 1}};
    return m[i][j];
  }
};

// out = L x L^T for a square x (kIn x kIn) and L (kOut x kIn) given entry-wise by l(a, i), which
// the unrolled loops fold when its indices are constants. Every transform here is one of these.
template <int kOut, int kIn, typename Matrix>
__device__ __forceinline__ void TwoSided(const float (&x)[kIn][kIn], Matrix l,
                                         float (&out)[kOut][kOut]) {
  float lx[kOut][kIn];  // L x
#pragma unroll
  for (int a = 0; a < kOut; ++a) {
#pragma unroll
    for (int j = 0; j < kIn; ++j) {
      float sum = 0.0f;
#pragma unroll
      for (int i = 0; i < kIn; ++i) sum += l(a, i) * x[i][j];
      lx[a][j] = sum;
    }
  }
#pragma unroll
  for (int a = 0; a < kOut; ++a) {
#pragma unroll
    for (int b = 0; b < kOut; ++b) {
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < kIn; ++j) sum += lx[a][j] * l(b, j);
      out[a][b] = sum;
    }
  }
}

// One thread per (c, tile): the NxN patch at (M th - pad_h, M tw - pad_w) of image n, zero
// outside the image. Indices fit in 32 bits (the host checks the planes' sizes).
template <int R, int M>
__global__ void WinogradInputKernel(ConvProblem p, const float* x, int tiles_h, int tiles_w,
                                    int chunk, float* v) {
  using T = Transform<R, M>;
  constexpr int N = T::kN;
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
      for (int xi = 0; xi < N * N; ++xi) v[xi * static_cast<int64_t>(total) + i] = 0.0f;
      continue;
    }
    const int n = t / (tiles_h * tiles_w), rest = t % (tiles_h * tiles_w);
    const int h0 = M * (rest / tiles_w) - static_cast<int>(p.pad[1]);
    const int w0 = M * (rest % tiles_w) - static_cast<int>(p.pad[2]);
    const float* base = x + n * p.x_stride[0] + c * p.x_stride[1];
    float d[N][N];
#pragma unroll
    for (int r = 0; r < N; ++r) {
#pragma unroll
      for (int s = 0; s < N; ++s) {
        const int hh = h0 + r, ww = w0 + s;
        d[r][s] = hh >= 0 && hh < h && ww >= 0 && ww < w
                      ? base[hh * p.x_stride[3] + ww * p.x_stride[4]]
                      : 0.0f;
      }
    }
    float out[N][N];
    TwoSided(
        d, [](int a, int b) { return T::BT(a, b); }, out);
    const int64_t plane = static_cast<int64_t>(total);
#pragma unroll
    for (int xi = 0; xi < N * N; ++xi) v[xi * plane + i] = out[xi / N][xi % N];
  }
}

// One thread per (k, c): U = G g G^T, g reversed for true convolution.
template <int R, int M>
__global__ void WinogradFilterKernel(ConvProblem p, const float* w, bool flip, float* u) {
  using T = Transform<R, M>;
  constexpr int N = T::kN;
  const int total = static_cast<int>(p.k * p.c);
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    const int c = i % static_cast<int>(p.c), k = i / static_cast<int>(p.c);
    const float* base = w + k * p.w_stride[0] + c * p.w_stride[1];
    float g[R][R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
      for (int s = 0; s < R; ++s) {
        const int fr = flip ? R - 1 - r : r, fs = flip ? R - 1 - s : s;
        g[r][s] = base[fr * p.w_stride[3] + fs * p.w_stride[4]];
      }
    }
    float out[N][N];
    TwoSided(
        g, [](int a, int b) { return T::G(a, b); }, out);
    const int64_t plane = static_cast<int64_t>(total);
#pragma unroll
    for (int xi = 0; xi < N * N; ++xi) u[xi * plane + i] = out[xi / N][xi % N];
  }
}

// One thread per (k, tile): the MxM outputs A^T m A, blended into y where inside the output.
template <int R, int M>
__global__ void WinogradOutputKernel(ConvProblem p, const float* m, int tiles_h, int tiles_w,
                                     float alpha, float beta, float* y, OutputEpilogue e) {
  using T = Transform<R, M>;
  constexpr int N = T::kN;
  const int tiles = static_cast<int>(p.n) * tiles_h * tiles_w;
  const int total = static_cast<int>(p.k) * tiles;
  const int out_h = static_cast<int>(p.out[1]), out_w = static_cast<int>(p.out[2]);
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    const int t = i % tiles, k = i / tiles;
    const int n = t / (tiles_h * tiles_w), rest = t % (tiles_h * tiles_w);
    const int h0 = M * (rest / tiles_w), w0 = M * (rest % tiles_w);
    const int64_t plane = static_cast<int64_t>(total);
    float a[N][N];
#pragma unroll
    for (int xi = 0; xi < N * N; ++xi) a[xi / N][xi % N] = m[xi * plane + i];
    float out[M][M];
    TwoSided(
        a, [](int r, int q) { return T::AT(r, q); }, out);
    float* base = y + n * p.y_stride[0] + k * p.y_stride[1];
#pragma unroll
    for (int r = 0; r < M; ++r) {
#pragma unroll
      for (int s = 0; s < M; ++s) {
        if (h0 + r >= out_h || w0 + s >= out_w) continue;
        float* at = base + (h0 + r) * p.y_stride[3] + (w0 + s) * p.y_stride[4];
        float value = alpha * out[r][s];
        if (beta != 0.0f) value += beta * *at;
        if (e.bias != nullptr) value += e.bias[k];
        if (e.relu && value < 0.0f) value *= e.slope;
        *at = value;
      }
    }
  }
}

// One thread per (k, tile): the MxM dy tile (zero past the output's edge) as A dy A^T, NxN
// (backward filter runs F(2x2, RxR) only: M is 2).
template <int R, int M>
__global__ void WinogradGradientKernel(ConvProblem p, const float* dy, int tiles_h, int tiles_w,
                                       int chunk, float* g) {
  using T = Transform<R, M>;
  constexpr int N = T::kN;
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
      for (int xi = 0; xi < N * N; ++xi) g[xi * static_cast<int64_t>(total) + i] = 0.0f;
      continue;
    }
    const int n = t / (tiles_h * tiles_w), rest = t % (tiles_h * tiles_w);
    const int h0 = M * (rest / tiles_w), w0 = M * (rest % tiles_w);
    const float* base = dy + n * p.y_stride[0] + k * p.y_stride[1];
    float d[M][M];
#pragma unroll
    for (int r = 0; r < M; ++r) {
#pragma unroll
      for (int s = 0; s < M; ++s) {
        d[r][s] = h0 + r < out_h && w0 + s < out_w
                      ? base[(h0 + r) * p.y_stride[3] + (w0 + s) * p.y_stride[4]]
                      : 0.0f;
      }
    }
    float out[N][N];  // A d A^T, A = (A^T)^T
    TwoSided(
        d, [](int a, int r) { return T::AT(r, a); }, out);
    const int64_t plane = static_cast<int64_t>(total);
#pragma unroll
    for (int xi = 0; xi < N * N; ++xi) g[xi * plane + i] = out[xi / N][xi % N];
  }
}

// One thread per (k, c): dw = alpha G^T dU G + beta dw, reversed for true convolution.
template <int R, int M>
__global__ void WinogradFilterGradientKernel(ConvProblem p, const float* du, int chunks, bool flip,
                                             float alpha, float beta, float* dw) {
  using T = Transform<R, M>;
  constexpr int N = T::kN;
  const int total = static_cast<int>(p.k * p.c);
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    const int c = i % static_cast<int>(p.c), k = i / static_cast<int>(p.c);
    // dU[xi][s][k][c]: the chunks' partial sums, added in chunk order.
    float u[N][N];
#pragma unroll
    for (int xi = 0; xi < N * N; ++xi) {
      float sum = 0.0f;
      for (int s = 0; s < chunks; ++s) {
        sum += du[(xi * chunks + s) * static_cast<int64_t>(total) + i];
      }
      u[xi / N][xi % N] = sum;
    }
    float out[R][R];  // G^T dU G
    TwoSided(
        u, [](int r, int a) { return T::G(a, r); }, out);
    float* base = dw + k * p.w_stride[0] + c * p.w_stride[1];
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
      for (int s = 0; s < R; ++s) {
        const int fr = flip ? R - 1 - r : r, fs = flip ? R - 1 - s : s;
        float* at = base + fr * p.w_stride[3] + fs * p.w_stride[4];
        float value = alpha * out[r][s];
        if (beta != 0.0f) value += beta * *at;
        *at = value;
      }
    }
  }
}

// Runs kernel<R, M> for the problem's filter size and the output tile `m` (3x3 with 2 or 4, 5x5
// with 2; the host checks).
#define KILN_WINOGRAD_LAUNCH(kernel, m, total, stream, ...)     \
  do {                                                          \
    const auto s = static_cast<cudaStream_t>(stream);           \
    if (p.filter[1] == 5) {                                     \
      kernel<5, 2><<<GridFor(total), 256, 0, s>>>(__VA_ARGS__); \
    } else if ((m) == 4) {                                      \
      kernel<3, 4><<<GridFor(total), 256, 0, s>>>(__VA_ARGS__); \
    } else {                                                    \
      kernel<3, 2><<<GridFor(total), 256, 0, s>>>(__VA_ARGS__); \
    }                                                           \
  } while (0)

}  // namespace

int LaunchWinogradInput(const ConvProblem& p, int tile, const float* x, int tiles_h, int tiles_w,
                        int chunk, float* v, void* stream) {
  const int64_t tiles = p.n * tiles_h * tiles_w;
  const int64_t total = p.c * ((tiles + chunk - 1) / chunk) * chunk;
  if (total == 0) return 0;
  KILN_WINOGRAD_LAUNCH(WinogradInputKernel, tile, total, stream, p, x, tiles_h, tiles_w, chunk, v);
  return static_cast<int>(cudaGetLastError());
}

int LaunchWinogradFilter(const ConvProblem& p, int tile, const float* w, bool flip, float* u,
                         void* stream) {
  const int64_t total = p.k * p.c;
  if (total == 0) return 0;
  KILN_WINOGRAD_LAUNCH(WinogradFilterKernel, tile, total, stream, p, w, flip, u);
  return static_cast<int>(cudaGetLastError());
}

int LaunchWinogradOutput(const ConvProblem& p, int tile, const float* m, int tiles_h, int tiles_w,
                         float alpha, float beta, float* y, void* stream,
                         const OutputEpilogue& epilogue) {
  const int64_t total = p.k * p.n * tiles_h * tiles_w;
  if (total == 0) return 0;
  KILN_WINOGRAD_LAUNCH(WinogradOutputKernel, tile, total, stream, p, m, tiles_h, tiles_w, alpha,
                       beta, y, epilogue);
  return static_cast<int>(cudaGetLastError());
}

int LaunchWinogradGradient(const ConvProblem& p, const float* dy, int tiles_h, int tiles_w,
                           int chunk, float* g, void* stream) {
  const int64_t tiles = p.n * tiles_h * tiles_w;
  const int64_t total = p.k * ((tiles + chunk - 1) / chunk) * chunk;
  if (total == 0) return 0;
  KILN_WINOGRAD_LAUNCH(WinogradGradientKernel, 2, total, stream, p, dy, tiles_h, tiles_w, chunk, g);
  return static_cast<int>(cudaGetLastError());
}

int LaunchWinogradFilterGradient(const ConvProblem& p, const float* du, int chunks, bool flip,
                                 float alpha, float beta, float* dw, void* stream) {
  const int64_t total = p.k * p.c;
  if (total == 0) return 0;
  KILN_WINOGRAD_LAUNCH(WinogradFilterGradientKernel, 2, total, stream, p, du, chunks, flip, alpha,
                       beta, dw);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace cuda
}  // namespace kiln
