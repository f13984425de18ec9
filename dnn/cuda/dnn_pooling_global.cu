// Average pooling whose one window is the whole plane (ResNet's and DenseNet's last pooling): a
// warp per plane forward, an element per thread backward. The general kernels walk every output
// or input with window arithmetic and took ten times the copy time on these shapes.
#include "dnn/cuda/primitive_launch.h"
#include "dnn/cuda/storage_access.cuh"

namespace kiln {
namespace cuda {

namespace {

constexpr int kThreads = 256;

// Whether the call averages whole planes laid out contiguously (D, H, W packed) in `strides`.
bool WholePlanes(const PoolingCall& c, const int64_t* strides) {
  if (c.mode == 0) return false;
  for (int a = 0; a < 3; ++a) {
    if (c.out[a] != 1 || c.window[a] != c.in[a] || c.pad[a] != 0) return false;
  }
  // A 2-d call's depth is 1 and its depth stride 0.
  return strides[4] == 1 && strides[3] == c.in[2] &&
         (c.in[0] == 1 || strides[2] == c.in[1] * c.in[2]);
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    GlobalAverageForward(const __grid_constant__ PoolingCall c, int64_t plane) {
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= c.n * c.c) return;
  const int64_t n = warp / c.c, ch = warp % c.c;
  const T* x = static_cast<const T*>(c.x) + n * c.x_strides[0] + ch * c.x_strides[1];
  float sum = 0;
  for (int64_t i = lane; i < plane; i += 32) sum += ToFloat(x[i]);
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (lane != 0) return;
  T* y = static_cast<T*>(c.result) + n * c.y_strides[0] + ch * c.y_strides[1];
  const float mean = sum / static_cast<float>(plane);
  *y = FromFloat<T>(Blend(c.alpha, mean, c.beta, [&] { return ToFloat(*y); }));
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    GlobalAverageBackward(const __grid_constant__ PoolingCall c, int64_t plane) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (e >= c.n * c.c * plane) return;
  const int64_t i = e % plane, nc = e / plane, n = nc / c.c, ch = nc % c.c;
  const float g = ToFloat(static_cast<const T*>(c.dy)[n * c.dy_strides[0] + ch * c.dy_strides[1]]) /
                  static_cast<float>(plane);
  T* dx = static_cast<T*>(c.result) + n * c.dx_strides[0] + ch * c.dx_strides[1] + i;
  *dx = FromFloat<T>(Blend(c.alpha, g, c.beta, [&] { return ToFloat(*dx); }));
}

template <typename T>
void Launch(const PoolingCall& c, bool forward, int64_t plane, cudaStream_t s) {
  if (forward) {
    GlobalAverageForward<T>
        <<<BlocksFor(c.n * c.c * 32, kThreads, int64_t{1} << 31), kThreads, 0, s>>>(c, plane);
  } else {
    GlobalAverageBackward<T>
        <<<BlocksFor(c.n * c.c * plane, kThreads, int64_t{1} << 31), kThreads, 0, s>>>(c, plane);
  }
}

}  // namespace

int LaunchPoolingGlobalAverage(const PoolingCall& c, bool forward, void* stream) {
  if (!WholePlanes(c, forward ? c.x_strides : c.dx_strides)) return kPoolingGlobalNotApplicable;
  const int64_t plane = c.in[0] * c.in[1] * c.in[2];
  if (c.n * c.c * plane >= (int64_t{1} << 40)) return kPoolingGlobalNotApplicable;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (c.type) {
    case Storage::kF16:
      Launch<__half>(c, forward, plane, s);
      break;
    case Storage::kBF16:
      Launch<__nv_bfloat16>(c, forward, plane, s);
      break;
    default:
      Launch<float>(c, forward, plane, s);
  }
  return LastError();
}

}  // namespace cuda
}  // namespace kiln
