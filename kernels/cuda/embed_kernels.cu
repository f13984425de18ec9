// Embed on the GPU. Forward: a thread per output element. Backward without atomics: a block
// per table row scans the indices in order (staged through shared memory in chunks) and adds
// the dy rows that name it, so every sum has one fixed order and runs are bitwise repeatable.
// The scan reads every index once per row of the table: V x M comparisons, which for a
// vocabulary of 10k words and 6.4k tokens a batch is 64M shared-memory reads.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>

#include "dnn/cuda/storage_access.cuh"
#include "kernels/cuda/embed_launch.h"

namespace kiln {
namespace cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kChunk = 2048;  // indices staged per pass of a backward block

__device__ __forceinline__ int64_t RowIndex(float v, int64_t rows) {
  return v >= 0.f && v < static_cast<float>(rows) && floorf(v) == v ? static_cast<int64_t>(v) : -1;
}

template <typename T>
__global__ void EmbedForwardKernel(const float* x, int64_t count, const T* w, const T* bias,
                                   int64_t rows, int64_t width, T* y) {
  const int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (e >= count * width) return;
  const int64_t m = e / width, j = e % width;
  const int64_t row = RowIndex(x[m], rows);
  const float v =
      row < 0 ? nanf("") : ToFloat(w[row * width + j]) + (bias ? ToFloat(bias[j]) : 0.f);
  y[e] = FromFloat<T>(v);
}

template <typename T>
__global__ void EmbedBackwardKernel(const float* x, int64_t count, const T* dy, int64_t rows,
                                    int64_t width, T* dw) {
  __shared__ int32_t rows_of[kChunk];
  const int64_t row = blockIdx.x;
  const int64_t j = blockIdx.y * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  float sum = 0.f;
  for (int64_t base = 0; base < count; base += kChunk) {
    const int64_t n = min(static_cast<int64_t>(kChunk), count - base);
    __syncthreads();
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      rows_of[i] = static_cast<int32_t>(RowIndex(x[base + i], rows));
    }
    __syncthreads();
    if (j < width) {
      for (int64_t i = 0; i < n; ++i) {
        if (rows_of[i] == row) sum += ToFloat(dy[(base + i) * width + j]);
      }
    }
  }
  if (j < width) dw[row * width + j] = FromFloat<T>(sum);
}

template <typename T>
int Forward(const float* x, int64_t count, const void* w, const void* bias, int64_t rows,
            int64_t width, void* y, cudaStream_t s) {
  const int64_t total = count * width;
  EmbedForwardKernel<T>
      <<<static_cast<unsigned>((total + kThreads - 1) / kThreads), kThreads, 0, s>>>(
          x, count, static_cast<const T*>(w), static_cast<const T*>(bias), rows, width,
          static_cast<T*>(y));
  return static_cast<int>(cudaGetLastError());
}

template <typename T>
int Backward(const float* x, int64_t count, const void* dy, int64_t rows, int64_t width, void* dw,
             cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>(rows),
                  static_cast<unsigned>((width + kThreads - 1) / kThreads));
  EmbedBackwardKernel<T><<<grid, kThreads, 0, s>>>(x, count, static_cast<const T*>(dy), rows, width,
                                                   static_cast<T*>(dw));
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

int LaunchEmbedForward(const float* x, int64_t count, const void* w, const void* bias, int64_t rows,
                       int64_t width, Storage storage, void* y, void* stream) {
  if (count * width == 0) return 0;
  auto s = static_cast<cudaStream_t>(stream);
  switch (storage) {
    case Storage::kF16:
      return Forward<__half>(x, count, w, bias, rows, width, y, s);
    case Storage::kBF16:
      return Forward<__nv_bfloat16>(x, count, w, bias, rows, width, y, s);
    default:
      return Forward<float>(x, count, w, bias, rows, width, y, s);
  }
}

int LaunchEmbedBackward(const float* x, int64_t count, const void* dy, int64_t rows, int64_t width,
                        Storage storage, void* dw, void* stream) {
  if (rows * width == 0) return 0;
  auto s = static_cast<cudaStream_t>(stream);
  switch (storage) {
    case Storage::kF16:
      return Backward<__half>(x, count, dy, rows, width, dw, s);
    case Storage::kBF16:
      return Backward<__nv_bfloat16>(x, count, dy, rows, width, dw, s);
    default:
      return Backward<float>(x, count, dy, rows, width, dw, s);
  }
}

}  // namespace cuda
}  // namespace kiln
