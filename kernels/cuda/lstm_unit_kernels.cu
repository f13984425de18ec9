// LSTMUnit on the GPU: one fused element-wise kernel each way, a thread per (row, d). A thread
// reads its four gate pre-activations (width apart, so a warp's loads of each gate are
// consecutive), computes in f32 and stores in the data's dtype. The backward recomputes the
// gates rather than reading saved ones: four loads it would make anyway, and no state between
// the forward and backward nodes.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "dnn/cuda/storage_access.cuh"
#include "kernels/cuda/lstm_unit_launch.h"

namespace kiln {
namespace cuda {

namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float Sigmoid(float v) { return 1.0f / (1.0f + expf(-v)); }

struct Gates {
  float i, s_f, f, o, g, cont;
};

template <typename T>
__device__ __forceinline__ Gates GatesAt(const LstmUnitLaunch& p, int64_t row, int64_t d) {
  const T* x = static_cast<const T*>(p.x) + row * 4 * p.width;
  Gates a;
  a.cont = LoadAny(p.cont, p.cont_storage, row);
  a.i = Sigmoid(ToFloat(x[d]));
  a.s_f = Sigmoid(ToFloat(x[p.width + d]));
  a.f = a.cont == 0.f ? 0.f : a.cont * a.s_f;  // a restarted sequence forgets c_prev exactly
  a.o = Sigmoid(ToFloat(x[2 * p.width + d]));
  a.g = tanhf(ToFloat(x[3 * p.width + d]));
  return a;
}

template <typename T>
__global__ void LstmUnitForwardKernel(LstmUnitLaunch p) {
  const int64_t total = p.rows * p.width;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = e / p.width, d = e - row * p.width;
    const Gates a = GatesAt<T>(p, row, d);
    const float c = a.f * ToFloat(static_cast<const T*>(p.c_prev)[e]) + a.i * a.g;
    static_cast<T*>(p.c)[e] = FromFloat<T>(c);
    static_cast<T*>(p.h)[e] = FromFloat<T>(a.o * tanhf(c));
  }
}

template <typename T>
__global__ void LstmUnitBackwardKernel(LstmUnitLaunch p) {
  const int64_t total = p.rows * p.width;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = e / p.width, d = e - row * p.width;
    const Gates a = GatesAt<T>(p, row, d);
    const float c_prev = ToFloat(static_cast<const T*>(p.c_prev)[e]);
    const float tanh_c = tanhf(a.f * c_prev + a.i * a.g);
    const float dh = p.dh ? ToFloat(static_cast<const T*>(p.dh)[e]) : 0.f;
    // c reaches the loss directly and through h = o tanh(c).
    const float dc_total =
        (p.dc ? ToFloat(static_cast<const T*>(p.dc)[e]) : 0.f) + dh * a.o * (1.f - tanh_c * tanh_c);
    static_cast<T*>(p.dc_prev)[e] = FromFloat<T>(dc_total * a.f);
    T* dx = static_cast<T*>(p.dx) + row * 4 * p.width;
    dx[d] = FromFloat<T>(dc_total * a.g * a.i * (1.f - a.i));
    dx[p.width + d] = FromFloat<T>(dc_total * c_prev * a.cont * a.s_f * (1.f - a.s_f));
    dx[2 * p.width + d] = FromFloat<T>(dh * tanh_c * a.o * (1.f - a.o));
    dx[3 * p.width + d] = FromFloat<T>(dc_total * a.i * (1.f - a.g * a.g));
  }
}

template <typename T>
int Launch(const LstmUnitLaunch& p, bool backward, cudaStream_t s) {
  const unsigned blocks = BlocksFor(p.rows * p.width, kThreads);
  if (backward) {
    LstmUnitBackwardKernel<T><<<blocks, kThreads, 0, s>>>(p);
  } else {
    LstmUnitForwardKernel<T><<<blocks, kThreads, 0, s>>>(p);
  }
  return LastError();
}

int Dispatch(const LstmUnitLaunch& p, bool backward, void* stream) {
  if (p.rows * p.width == 0) return 0;
  auto s = static_cast<cudaStream_t>(stream);
  switch (p.storage) {
    case Storage::kF16:
      return Launch<__half>(p, backward, s);
    case Storage::kBF16:
      return Launch<__nv_bfloat16>(p, backward, s);
    default:
      return Launch<float>(p, backward, s);
  }
}

}  // namespace

int LaunchLstmUnitForward(const LstmUnitLaunch& p, void* stream) {
  return Dispatch(p, /*backward=*/false, stream);
}

int LaunchLstmUnitBackward(const LstmUnitLaunch& p, void* stream) {
  return Dispatch(p, /*backward=*/true, stream);
}

}  // namespace cuda
}  // namespace kiln
