// The RNN cell kernels: one thread per (sequence, hidden unit) computes every gate of its unit,
// so a step's biases, nonlinearities and state update are one pass over the GEMM results.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "base/dropout_mask.h"
#include "dnn/cuda/rnn/rnn_launch.h"
#include "dnn/cuda/storage_access.cuh"

namespace kiln {
namespace cuda {

namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float Sigmoid(float v) { return 1.f / (1.f + __expf(-v)); }

template <typename T>
__device__ __forceinline__ float Bias(const void* b, int64_t i) {
  return b != nullptr ? ToFloat(static_cast<const T*>(b)[i]) : 0.f;
}

// The step's time for sequence n, or -1 when the step is past the sequence's end.
__device__ __forceinline__ int64_t StepTime(const int32_t* lengths, int64_t n, int64_t step,
                                            int64_t max_length, bool reverse) {
  const int64_t length = lengths != nullptr ? lengths[n] : max_length;
  if (step >= length) return -1;
  return reverse ? length - 1 - step : step;
}

template <typename T, RnnCellKind kCell>
__global__ void StepForwardKernel(RnnStepForward p) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t H = p.hidden;
  if (i >= p.batch * H) return;
  const int64_t n = i / H, j = i % H;
  const T* h_prev = static_cast<const T*>(p.h_prev);
  T* h_next = static_cast<T*>(p.h_next);
  T* out = static_cast<T*>(p.out);
  const int64_t t = StepTime(p.lengths, n, p.step, p.max_length, p.reverse);
  if (t < 0) {  // past the end: carry the state, zero the output at this time
    h_next[i] = h_prev[i];
    if (kCell == RnnCellKind::kLstm) p.c_next[i] = p.c_prev[i];
    out[(p.step * p.batch + n) * p.out_stride + p.out_offset + j] = FromFloat<T>(0.f);
    return;
  }
  const float keep =
      p.cont != nullptr ? ToFloat(static_cast<const T*>(p.cont)[t * p.batch + n]) : 1.f;
  float* g = p.gates + (t * p.batch + n) * p.gate_stride;
  constexpr int G = kCell == RnnCellKind::kLstm ? 4 : kCell == RnnCellKind::kGru ? 3 : 1;
  const float* rec = p.rec + n * G * H;
  float h;
  if (kCell == RnnCellKind::kLstm) {
    const int64_t at[4] = {j, H + j, p.g_block * H + j, p.o_block * H + j};  // i f g o
    float a[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      a[q] = g[at[q]] + Bias<T>(p.b_ih, at[q]) + Bias<T>(p.b_hh, at[q]) + keep * rec[at[q]];
    }
    const float ig = Sigmoid(a[0]), fg = Sigmoid(a[1]), gg = tanhf(a[2]), og = Sigmoid(a[3]);
    const float c = fg * keep * p.c_prev[i] + ig * gg;
    h = og * tanhf(c);
    p.c_next[i] = c;
    g[at[0]] = ig, g[at[1]] = fg, g[at[2]] = gg, g[at[3]] = og;
  } else if (kCell == RnnCellKind::kGru) {
    const float r = Sigmoid(g[j] + Bias<T>(p.b_ih, j) + Bias<T>(p.b_hh, j) + keep * rec[j]);
    const float z =
        Sigmoid(g[H + j] + Bias<T>(p.b_ih, H + j) + Bias<T>(p.b_hh, H + j) + keep * rec[H + j]);
    const float hn = keep * rec[2 * H + j] + Bias<T>(p.b_hh, 2 * H + j);
    const float nn = tanhf(g[2 * H + j] + Bias<T>(p.b_ih, 2 * H + j) + r * hn);
    h = (1.f - z) * nn + z * keep * ToFloat(h_prev[i]);
    g[j] = r, g[H + j] = z, g[2 * H + j] = nn, g[3 * H + j] = hn;
  } else {
    const float a = g[j] + Bias<T>(p.b_ih, j) + Bias<T>(p.b_hh, j) + keep * rec[j];
    h = kCell == RnnCellKind::kRelu ? fmaxf(a, 0.f) : tanhf(a);
    g[j] = h;
  }
  const T hv = FromFloat<T>(h);
  h_next[i] = hv;
  out[(t * p.batch + n) * p.out_stride + p.out_offset + j] = hv;
}

template <typename T, RnnCellKind kCell>
__global__ void StepBackwardKernel(RnnStepBackward p) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t H = p.hidden;
  if (i >= p.batch * H) return;
  const int64_t n = i / H, j = i % H;
  constexpr int G = kCell == RnnCellKind::kLstm ? 4 : kCell == RnnCellKind::kGru ? 3 : 1;
  T* drec = static_cast<T*>(p.drec) + n * G * H;
  T* dgates_time;  // this (time, sequence)'s row of dgates
  const int64_t t = StepTime(p.lengths, n, p.step, p.max_length, p.reverse);
  if (t < 0) {  // past the end: the gradient passes to the previous state untouched
    p.dh_out[i] = p.dh_in[i];
    dgates_time = static_cast<T*>(p.dgates) + (p.step * p.batch + n) * p.dgate_stride;
    for (int q = 0; q < G; ++q) drec[q * H + j] = FromFloat<T>(0.f);
    const int stored = kCell == RnnCellKind::kGru ? 4 : G;
    for (int q = 0; q < stored; ++q) dgates_time[q * H + j] = FromFloat<T>(0.f);
    return;
  }
  dgates_time = static_cast<T*>(p.dgates) + (t * p.batch + n) * p.dgate_stride;
  const float keep =
      p.cont != nullptr ? ToFloat(static_cast<const T*>(p.cont)[t * p.batch + n]) : 1.f;
  const float* g = p.gates + (t * p.batch + n) * p.gate_stride;
  const float dh =
      p.dh_in[i] +
      ToFloat(static_cast<const T*>(p.dout)[(t * p.batch + n) * p.out_stride + p.out_offset + j]);
  if (kCell == RnnCellKind::kLstm) {
    const int64_t at[4] = {j, H + j, p.g_block * H + j, p.o_block * H + j};  // i f g o
    const float ig = g[at[0]], fg = g[at[1]], gg = g[at[2]], og = g[at[3]];
    const float tc = tanhf(p.c_next[i]);
    const float dct = p.dc[i] + dh * og * (1.f - tc * tc);
    const float d[4] = {dct * gg * ig * (1.f - ig), dct * keep * p.c_prev[i] * fg * (1.f - fg),
                        dct * ig * (1.f - gg * gg), dh * tc * og * (1.f - og)};
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      dgates_time[at[q]] = FromFloat<T>(d[q]);
      drec[at[q]] = FromFloat<T>(keep * d[q]);
    }
    p.dc[i] = keep * dct * fg;
    p.dh_out[i] = 0.f;
  } else if (kCell == RnnCellKind::kGru) {
    const float r = g[j], z = g[H + j], nn = g[2 * H + j], hn = g[3 * H + j];
    const float h_eff = keep * ToFloat(static_cast<const T*>(p.h_prev)[i]);
    const float dn = dh * (1.f - z) * (1.f - nn * nn);
    const float dr = dn * hn * r * (1.f - r);
    const float dz = dh * (h_eff - nn) * z * (1.f - z);
    dgates_time[j] = FromFloat<T>(dr);
    dgates_time[H + j] = FromFloat<T>(dz);
    dgates_time[2 * H + j] = FromFloat<T>(dn);
    dgates_time[3 * H + j] = FromFloat<T>(dn * r);
    drec[j] = FromFloat<T>(keep * dr);
    drec[H + j] = FromFloat<T>(keep * dz);
    drec[2 * H + j] = FromFloat<T>(keep * dn * r);
    p.dh_out[i] = keep * dh * z;
  } else {
    const float h = g[j];
    const float d = kCell == RnnCellKind::kRelu ? (h > 0.f ? dh : 0.f) : dh * (1.f - h * h);
    dgates_time[j] = FromFloat<T>(d);
    drec[j] = FromFloat<T>(keep * d);
    p.dh_out[i] = 0.f;
  }
}

template <typename T>
int LaunchForwardCell(const RnnStepForward& p, void* stream) {
  const int64_t total = p.batch * p.hidden;
  const dim3 grid(static_cast<unsigned>((total + kThreads - 1) / kThreads));
  auto s = static_cast<cudaStream_t>(stream);
  switch (p.cell) {
    case RnnCellKind::kRelu:
      StepForwardKernel<T, RnnCellKind::kRelu><<<grid, kThreads, 0, s>>>(p);
      break;
    case RnnCellKind::kTanh:
      StepForwardKernel<T, RnnCellKind::kTanh><<<grid, kThreads, 0, s>>>(p);
      break;
    case RnnCellKind::kLstm:
      StepForwardKernel<T, RnnCellKind::kLstm><<<grid, kThreads, 0, s>>>(p);
      break;
    case RnnCellKind::kGru:
      StepForwardKernel<T, RnnCellKind::kGru><<<grid, kThreads, 0, s>>>(p);
      break;
  }
  return static_cast<int>(cudaGetLastError());
}

template <typename T>
int LaunchBackwardCell(const RnnStepBackward& p, void* stream) {
  const int64_t total = p.batch * p.hidden;
  const dim3 grid(static_cast<unsigned>((total + kThreads - 1) / kThreads));
  auto s = static_cast<cudaStream_t>(stream);
  switch (p.cell) {
    case RnnCellKind::kRelu:
      StepBackwardKernel<T, RnnCellKind::kRelu><<<grid, kThreads, 0, s>>>(p);
      break;
    case RnnCellKind::kTanh:
      StepBackwardKernel<T, RnnCellKind::kTanh><<<grid, kThreads, 0, s>>>(p);
      break;
    case RnnCellKind::kLstm:
      StepBackwardKernel<T, RnnCellKind::kLstm><<<grid, kThreads, 0, s>>>(p);
      break;
    case RnnCellKind::kGru:
      StepBackwardKernel<T, RnnCellKind::kGru><<<grid, kThreads, 0, s>>>(p);
      break;
  }
  return static_cast<int>(cudaGetLastError());
}

__global__ void TransposeKernel(const char* src, char* dst, int64_t a, int64_t b, int64_t words) {
  // One block row per (i, k) pair of rows; threads copy 4-byte words (rows are whole words).
  const int64_t row = blockIdx.x;
  const int64_t ia = row / b, ib = row % b;
  const uint32_t* from = reinterpret_cast<const uint32_t*>(src) + row * words;
  uint32_t* to = reinterpret_cast<uint32_t*>(dst) + (ib * a + ia) * words;
  for (int64_t w = threadIdx.x; w < words; w += blockDim.x) to[w] = from[w];
}

__global__ void TransposeBytesKernel(const char* src, char* dst, int64_t a, int64_t b,
                                     int64_t bytes) {
  const int64_t row = blockIdx.x;
  const int64_t ia = row / b, ib = row % b;
  for (int64_t w = threadIdx.x; w < bytes; w += blockDim.x) {
    dst[(ib * a + ia) * bytes + w] = src[row * bytes + w];
  }
}

template <typename T>
__global__ void DropoutKernel(T* data, int64_t count, uint64_t seed, float ratio, float scale) {
  const int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (e >= count) return;
  data[e] =
      DropoutKeep(seed, e, ratio) ? FromFloat<T>(ToFloat(data[e]) * scale) : FromFloat<T>(0.f);
}

template <typename From, typename To>
__global__ void ConvertKernel(const From* src, To* dst, int64_t count) {
  const int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (e >= count) return;
  dst[e] = FromFloat<To>(src != nullptr ? ToFloat(src[e]) : 0.f);
}

template <typename T>
__global__ void OnesKernel(T* dst, int64_t count) {
  const int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (e < count) dst[e] = FromFloat<T>(1.f);
}

unsigned Blocks(int64_t count) { return static_cast<unsigned>((count + kThreads - 1) / kThreads); }

template <typename From>
int ConvertTo(const From* src, void* dst, Storage dst_storage, int64_t count, cudaStream_t s) {
  switch (dst_storage) {
    case Storage::kF16:
      ConvertKernel<<<Blocks(count), kThreads, 0, s>>>(src, static_cast<__half*>(dst), count);
      break;
    case Storage::kBF16:
      ConvertKernel<<<Blocks(count), kThreads, 0, s>>>(src, static_cast<__nv_bfloat16*>(dst),
                                                       count);
      break;
    default:
      ConvertKernel<<<Blocks(count), kThreads, 0, s>>>(src, static_cast<float*>(dst), count);
      break;
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

int LaunchRnnStepForward(const RnnStepForward& call, void* stream) {
  if (call.batch * call.hidden == 0) return 0;
  switch (call.storage) {
    case Storage::kF16:
      return LaunchForwardCell<__half>(call, stream);
    case Storage::kBF16:
      return LaunchForwardCell<__nv_bfloat16>(call, stream);
    default:
      return LaunchForwardCell<float>(call, stream);
  }
}

int LaunchRnnStepBackward(const RnnStepBackward& call, void* stream) {
  if (call.batch * call.hidden == 0) return 0;
  switch (call.storage) {
    case Storage::kF16:
      return LaunchBackwardCell<__half>(call, stream);
    case Storage::kBF16:
      return LaunchBackwardCell<__nv_bfloat16>(call, stream);
    default:
      return LaunchBackwardCell<float>(call, stream);
  }
}

int LaunchRnnTranspose(const void* src, void* dst, int64_t a, int64_t b, int64_t bytes_per_row,
                       void* stream) {
  if (a * b == 0 || bytes_per_row == 0) return 0;
  auto s = static_cast<cudaStream_t>(stream);
  const int threads = bytes_per_row >= 4 * 256 ? 256 : 64;
  if (bytes_per_row % 4 == 0 && reinterpret_cast<uintptr_t>(src) % 4 == 0 &&
      reinterpret_cast<uintptr_t>(dst) % 4 == 0) {
    TransposeKernel<<<static_cast<unsigned>(a * b), threads, 0, s>>>(
        static_cast<const char*>(src), static_cast<char*>(dst), a, b, bytes_per_row / 4);
  } else {
    TransposeBytesKernel<<<static_cast<unsigned>(a * b), threads, 0, s>>>(
        static_cast<const char*>(src), static_cast<char*>(dst), a, b, bytes_per_row);
  }
  return static_cast<int>(cudaGetLastError());
}

int LaunchRnnDropout(void* data, Storage storage, int64_t count, uint64_t seed, float ratio,
                     void* stream) {
  if (count == 0) return 0;
  auto s = static_cast<cudaStream_t>(stream);
  const float scale = 1.f / (1.f - ratio);
  switch (storage) {
    case Storage::kF16:
      DropoutKernel<<<Blocks(count), kThreads, 0, s>>>(static_cast<__half*>(data), count, seed,
                                                       ratio, scale);
      break;
    case Storage::kBF16:
      DropoutKernel<<<Blocks(count), kThreads, 0, s>>>(static_cast<__nv_bfloat16*>(data), count,
                                                       seed, ratio, scale);
      break;
    default:
      DropoutKernel<<<Blocks(count), kThreads, 0, s>>>(static_cast<float*>(data), count, seed,
                                                       ratio, scale);
      break;
  }
  return static_cast<int>(cudaGetLastError());
}

int LaunchRnnConvert(const void* src, Storage src_storage, void* dst, Storage dst_storage,
                     int64_t count, void* stream) {
  if (count == 0) return 0;
  auto s = static_cast<cudaStream_t>(stream);
  switch (src_storage) {
    case Storage::kF16:
      return ConvertTo(static_cast<const __half*>(src), dst, dst_storage, count, s);
    case Storage::kBF16:
      return ConvertTo(static_cast<const __nv_bfloat16*>(src), dst, dst_storage, count, s);
    default:
      return ConvertTo(static_cast<const float*>(src), dst, dst_storage, count, s);
  }
}

int LaunchRnnOnes(void* dst, Storage storage, int64_t count, void* stream) {
  if (count == 0) return 0;
  auto s = static_cast<cudaStream_t>(stream);
  switch (storage) {
    case Storage::kF16:
      OnesKernel<<<Blocks(count), kThreads, 0, s>>>(static_cast<__half*>(dst), count);
      break;
    case Storage::kBF16:
      OnesKernel<<<Blocks(count), kThreads, 0, s>>>(static_cast<__nv_bfloat16*>(dst), count);
      break;
    default:
      OnesKernel<<<Blocks(count), kThreads, 0, s>>>(static_cast<float*>(dst), count);
      break;
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace cuda
}  // namespace kiln
