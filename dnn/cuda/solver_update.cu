// The solver update kernel: one grid-stride pass per parameter blob that reads the weights,
// the gradient and the histories once and writes them once. The per-element arithmetic is the
// host reference's (kernels/dnn/solver_update.cc) step for step, written with the IEEE
// round-to-nearest intrinsics so nvcc neither fuses multiply-adds nor substitutes fast
// approximations (even under --use_fast_math): the GPU then computes the same f32 values as the
// host.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "dnn/cuda/cuda_status.h"
#include "dnn/cuda/solver_update.h"

namespace kiln {
namespace dnn {
namespace {

constexpr int kThreads = 256;
// Enough blocks to fill any current GPU several times over; bigger blobs loop (grid-stride).
constexpr int64_t kMaxBlocks = 4096;
// The sum of squares needs fewer blocks: each ends in one atomic add.
constexpr int64_t kMaxSumBlocks = 1024;

// The buffers and the f32 coefficients of one call, derived on the host exactly as the
// reference derives them.
struct UpdateArgs {
  float* param;
  float* grad;
  float* h;
  float* h2;
  int64_t count;
  int64_t head;  // elements before the first 16-byte aligned one (0 on the scalar path)
  int regularization;
  float scale, decay;
  float rate, momentum, keep;  // keep = 1 - momentum (or 1 - rms_decay, 1 - beta1)
  float momentum2, keep2;      // Adam's beta2 and 1 - beta2
  float delta;
  float corrected_rate;  // Adam: rate * bias correction
};

__device__ __forceinline__ float Mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ float Add(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ float Div(float a, float b) { return __fdiv_rn(a, b); }
__device__ __forceinline__ float Sqrt(float a) { return __fsqrt_rn(a); }

// Scaling, then Caffe's regularization (skipped when the decay is 0).
__device__ __forceinline__ float RegularizedGradient(const UpdateArgs& a, float g, float w) {
  g = Mul(g, a.scale);
  if (a.decay == 0.0f) return g;
  if (a.regularization == static_cast<int>(Regularization::kL2)) return Add(Mul(a.decay, w), g);
  if (a.regularization == static_cast<int>(Regularization::kL1)) {
    const float sign = static_cast<float>((0.0f < w) - (w < 0.0f));
    return Add(Mul(a.decay, sign), g);
  }
  return g;
}

// One element: w, g, h, h2 in registers, updated in place (g becomes the applied update).
template <SolverType kType>
__device__ __forceinline__ void UpdateElement(const UpdateArgs& a, float& w, float& g, float& h,
                                              float& h2) {
  const float gr = RegularizedGradient(a, g, w);
  float update;
  switch (kType) {
    case SolverType::kSgd:
      h = Add(Mul(a.rate, gr), Mul(a.momentum, h));
      update = h;
      break;
    case SolverType::kNesterov: {
      const float previous = h;
      h = Add(Mul(a.rate, gr), Mul(a.momentum, h));
      update = Add(Mul(Add(1.0f, a.momentum), h), Mul(-a.momentum, previous));
      break;
    }
    case SolverType::kAdaGrad:
      h = Add(Mul(gr, gr), h);
      update = Mul(a.rate, Div(gr, Add(Sqrt(h), a.delta)));
      break;
    case SolverType::kRmsProp:
      h = Add(Mul(a.keep, Mul(gr, gr)), Mul(a.momentum, h));
      update = Mul(a.rate, Div(gr, Add(Sqrt(h), a.delta)));
      break;
    case SolverType::kAdaDelta: {
      h = Add(Mul(a.keep, Mul(gr, gr)), Mul(a.momentum, h));
      const float u = Mul(gr, Sqrt(Div(Add(h2, a.delta), Add(h, a.delta))));
      h2 = Add(Mul(a.keep, Mul(u, u)), Mul(a.momentum, h2));
      update = Mul(a.rate, u);
      break;
    }
    case SolverType::kAdam:
      h = Add(Mul(a.keep, gr), Mul(a.momentum, h));
      h2 = Add(Mul(a.keep2, Mul(gr, gr)), Mul(a.momentum2, h2));
      update = Mul(a.corrected_rate, Div(h, Add(Sqrt(h2), a.delta)));
      break;
  }
  g = update;
  w = __fsub_rn(w, update);
}

template <SolverType kType>
__device__ __forceinline__ void UpdateAt(const UpdateArgs& a, int64_t i) {
  constexpr bool kTwo = kType == SolverType::kAdaDelta || kType == SolverType::kAdam;
  float w = a.param[i], g = a.grad[i], h = a.h[i];
  float h2 = kTwo ? a.h2[i] : 0.0f;
  UpdateElement<kType>(a, w, g, h, h2);
  a.param[i] = w;
  a.grad[i] = g;
  a.h[i] = h;
  if (kTwo) a.h2[i] = h2;
}

// kVector: elements [head, head + 4 n4) as float4 (every buffer is 16-byte aligned from head),
// the head and the tail one by one. Otherwise every element one by one.
template <SolverType kType, bool kVector>
__global__ void __launch_bounds__(kThreads) SolverUpdateKernel(const UpdateArgs a) {
  constexpr bool kTwo = kType == SolverType::kAdaDelta || kType == SolverType::kAdam;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (!kVector) {
    for (int64_t i = first; i < a.count; i += stride) UpdateAt<kType>(a, i);
    return;
  }
  const int64_t n4 = (a.count - a.head) / 4;
  const int64_t tail = a.head + 4 * n4;
  if (first < a.head) UpdateAt<kType>(a, first);
  for (int64_t i = tail + first; i < a.count; i += stride) UpdateAt<kType>(a, i);
  float4* param = reinterpret_cast<float4*>(a.param + a.head);
  float4* grad = reinterpret_cast<float4*>(a.grad + a.head);
  float4* hist = reinterpret_cast<float4*>(a.h + a.head);
  float4* hist2 = kTwo ? reinterpret_cast<float4*>(a.h2 + a.head) : nullptr;
  for (int64_t v = first; v < n4; v += stride) {
    float4 w = param[v], g = grad[v], h = hist[v];
    float4 h2 = kTwo ? hist2[v] : make_float4(0, 0, 0, 0);
    UpdateElement<kType>(a, w.x, g.x, h.x, h2.x);
    UpdateElement<kType>(a, w.y, g.y, h.y, h2.y);
    UpdateElement<kType>(a, w.z, g.z, h.z, h2.z);
    UpdateElement<kType>(a, w.w, g.w, h.w, h2.w);
    param[v] = w;
    grad[v] = g;
    hist[v] = h;
    if (kTwo) hist2[v] = h2;
  }
}

template <SolverType kType>
cudaError_t Launch(const UpdateArgs& a, bool vector, int64_t work, cudaStream_t stream) {
  const int64_t blocks = std::min<int64_t>(kMaxBlocks, std::max<int64_t>(1, (work + 255) / 256));
  if (vector) {
    SolverUpdateKernel<kType, true><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(a);
  } else {
    SolverUpdateKernel<kType, false><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(a);
  }
  return cudaGetLastError();
}

// Bytes past the last 16-byte boundary.
inline uintptr_t Misalignment(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16; }

// The sum of squares: per-thread double sums over a grid-stride walk (float4 when aligned),
// a block tree reduction in a fixed order, one atomic add per block.
__device__ __forceinline__ double Square(float x) {
  const double d = x;
  return d * d;
}

template <bool kVector>
__global__ void __launch_bounds__(kThreads)
    SumOfSquaresKernel(int64_t count, int64_t head, const float* x, double* sum) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  double s = 0;
  if (kVector) {
    const int64_t n4 = (count - head) / 4;
    if (first < head) s += Square(x[first]);
    for (int64_t i = head + 4 * n4 + first; i < count; i += stride) s += Square(x[i]);
    const float4* v4 = reinterpret_cast<const float4*>(x + head);
    for (int64_t v = first; v < n4; v += stride) {
      const float4 q = v4[v];
      s += Square(q.x) + Square(q.y) + Square(q.z) + Square(q.w);
    }
  } else {
    for (int64_t i = first; i < count; i += stride) s += Square(x[i]);
  }
  for (int offset = 16; offset > 0; offset /= 2) s += __shfl_down_sync(0xffffffffu, s, offset);
  __shared__ double warp_sums[kThreads / 32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_sums[warp] = s;
  __syncthreads();
  if (warp == 0) {
    s = lane < kThreads / 32 ? warp_sums[lane] : 0.0;
    for (int offset = 16; offset > 0; offset /= 2) s += __shfl_down_sync(0xffffffffu, s, offset);
    if (lane == 0) atomicAdd(sum, s);
  }
}

}  // namespace

absl::Status SolverUpdateCuda(const SolverStep& step, int64_t count, float* param, float* grad,
                              float* history, float* history2, void* stream) {
  if (absl::Status s = CheckSolverUpdateCall(step, count, param, grad, history, history2);
      !s.ok()) {
    return s;
  }
  if (count == 0) return absl::OkStatus();
  const bool two = HistoryCount(step.type) == 2;
  UpdateArgs a;
  a.param = param;
  a.grad = grad;
  a.h = history;
  a.h2 = two ? history2 : nullptr;
  a.count = count;
  a.regularization = static_cast<int>(step.regularization);
  a.scale = static_cast<float>(step.grad_scale);
  a.decay = static_cast<float>(step.local_decay);
  a.rate = static_cast<float>(step.local_rate);
  a.momentum = static_cast<float>(step.momentum);
  a.keep = 1.0f - a.momentum;
  a.momentum2 = static_cast<float>(step.momentum2);
  a.keep2 = 1.0f - a.momentum2;
  a.delta = static_cast<float>(step.delta);
  a.corrected_rate = a.rate;
  if (step.type == SolverType::kRmsProp) {
    // RMSProp's decay takes momentum's place in the shared formula h = keep g² + decay h.
    a.momentum = static_cast<float>(step.rms_decay);
    a.keep = 1.0f - a.momentum;
  }
  if (step.type == SolverType::kAdam) {
    // As the host: the correction in double from the f32 betas, kept as f32.
    const double t = static_cast<double>(step.iter) + 1;
    const float correction =
        static_cast<float>(std::sqrt(1.0 - std::pow(static_cast<double>(a.momentum2), t)) /
                           (1.0 - std::pow(static_cast<double>(a.momentum), t)));
    a.corrected_rate = a.rate * correction;
  }
  // The float4 path needs every buffer at the same offset from a 16-byte boundary, on a float
  // boundary; then the first `head` elements are done one by one.
  const uintptr_t mis = Misalignment(param);
  bool vector = mis % 4 == 0 && Misalignment(grad) == mis && Misalignment(history) == mis &&
                (!two || Misalignment(history2) == mis);
  a.head = vector ? std::min<int64_t>(count, static_cast<int64_t>((16 - mis) % 16 / 4)) : 0;
  const int64_t work = vector ? std::max<int64_t>((count - a.head) / 4, 4) : count;
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  cudaError_t error = cudaSuccess;
  switch (step.type) {
    case SolverType::kSgd:
      error = Launch<SolverType::kSgd>(a, vector, work, s);
      break;
    case SolverType::kNesterov:
      error = Launch<SolverType::kNesterov>(a, vector, work, s);
      break;
    case SolverType::kAdaGrad:
      error = Launch<SolverType::kAdaGrad>(a, vector, work, s);
      break;
    case SolverType::kRmsProp:
      error = Launch<SolverType::kRmsProp>(a, vector, work, s);
      break;
    case SolverType::kAdaDelta:
      error = Launch<SolverType::kAdaDelta>(a, vector, work, s);
      break;
    case SolverType::kAdam:
      error = Launch<SolverType::kAdam>(a, vector, work, s);
      break;
  }
  KILN_CUDA_RETURN_IF_ERROR(error);
  return absl::OkStatus();
}

absl::Status SumOfSquaresCuda(int64_t count, const float* x, double* device_sum, void* stream) {
  if (count < 0) {
    return absl::InvalidArgumentError("SumOfSquaresCuda: count must be >= 0");
  }
  if (count == 0) return absl::OkStatus();
  if (x == nullptr || device_sum == nullptr) {
    return absl::InvalidArgumentError(x == nullptr ? "SumOfSquaresCuda: x is null"
                                                   : "SumOfSquaresCuda: device_sum is null");
  }
  const uintptr_t mis = Misalignment(x);
  const bool vector = mis % 4 == 0;
  const int64_t head = vector ? std::min<int64_t>(count, (16 - mis) % 16 / 4) : 0;
  const int64_t work = vector ? std::max<int64_t>((count - head) / 4, 4) : count;
  const int64_t blocks = std::min<int64_t>(kMaxSumBlocks, std::max<int64_t>(1, (work + 255) / 256));
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (vector) {
    SumOfSquaresKernel<true>
        <<<static_cast<unsigned>(blocks), kThreads, 0, s>>>(count, head, x, device_sum);
  } else {
    SumOfSquaresKernel<false>
        <<<static_cast<unsigned>(blocks), kThreads, 0, s>>>(count, 0, x, device_sum);
  }
  KILN_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace dnn
}  // namespace kiln
