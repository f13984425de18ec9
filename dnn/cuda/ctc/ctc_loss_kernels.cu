// CTC loss on the GPU: the forward-backward (alpha-beta) algorithm in log space, f32 math over
// f32/f16/bf16 activations. Four kernels, in stream order:
//   1. lse: log Σ_c exp(x) of every (t, n) row a sample reads (logit inputs only), a block per
//      row, so log p(c) = x - lse is recomputed where needed instead of stored (T N C f32 would
//      be over a gigabyte at T = 1000, N = 64, C = 5000).
//   2. alpha and beta: a block per (sample, direction), threads across the 2 L + 1 states,
//      stepping through time with one block reduction per step. Each step's values are stored
//      relative to the previous step's maximum: the log probabilities of a long input reach
//      -T log C (-8500 at T = 1000, C = 5000), where an f32 ulp is 1e-3 and a thousand steps
//      of rounding would cost percents of the gradient; relative to the running maximum they
//      stay near 0, and the running log scale, needed only for the loss, is summed in double.
//   3. gradient: a block per (t, n) row; the posterior of each state is normalized by the row's
//      own Σ_s α β / y (which is p in exact arithmetic), so the alpha and beta scales cancel and
//      each frame's posteriors sum to 1.
//   4. the reduction of the per-sample losses, by one thread in sample order.
// Deterministic: every sum runs over a fixed tree or in a fixed order, no atomics.
#include <cfloat>
#include <cmath>

#include "dnn/cuda/ctc/ctc_loss_launch.h"
#include "dnn/cuda/storage_access.cuh"

namespace kiln {
namespace cuda {

namespace {

constexpr int kRowThreads = 256;
constexpr int kMaxStateThreads = 512;

// Block-wide max and sum over blockDim.x threads (a multiple of 32, <= 1024): each warp's result
// goes to scratch, then every thread combines the warps in order, so all threads get the same
// value. One barrier: a caller reusing `scratch` before a later barrier must alternate buffers.
__device__ __forceinline__ float BlockMax(float v, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  float r = scratch[0];
  for (int w = 1; w < blockDim.x / 32; ++w) r = fmaxf(r, scratch[w]);
  return r;
}

__device__ __forceinline__ float2 BlockSum2(float2 v, float2* scratch) {
  for (int o = 16; o > 0; o >>= 1) {
    v.x += __shfl_xor_sync(0xffffffffu, v.x, o);
    v.y += __shfl_xor_sync(0xffffffffu, v.y, o);
  }
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  float2 r = scratch[0];
  for (int w = 1; w < blockDim.x / 32; ++w) {
    r.x += scratch[w].x;
    r.y += scratch[w].y;
  }
  return r;
}

// log(e^a + e^b + e^c), -inf when all are (no NaN from -inf - -inf).
__device__ __forceinline__ float LogSum3(float a, float b, float c) {
  const float m = fmaxf(a, fmaxf(b, c));
  if (m == -INFINITY) return -INFINITY;
  return m + logf(expf(a - m) + expf(b - m) + expf(c - m));
}

// The class of state s of the extended label: blank at even s.
__device__ __forceinline__ int32_t StateClass(const CtcCall& c, const CtcSample& s, int64_t st) {
  return (st & 1) ? c.labels[s.label_offset + st / 2] : c.blank;
}

template <typename T>
__device__ __forceinline__ float LogProb(const CtcCall& c, int64_t t, int64_t n, int32_t cls) {
  const int64_t row = t * c.batch + n;
  const float x = ToFloat(static_cast<const T*>(c.activations)[row * c.classes + cls]);
  return c.log_probs ? x : x - c.lse[row];
}

template <typename T>
__global__ void __launch_bounds__(kRowThreads) CtcLseKernel(const __grid_constant__ CtcCall c) {
  __shared__ float scratch[kRowThreads / 32];
  __shared__ float2 pairs[kRowThreads / 32];
  const T* x = static_cast<const T*>(c.activations);
  for (int64_t row = blockIdx.x; row < c.max_time * c.batch; row += gridDim.x) {
    const int64_t t = row / c.batch, n = row % c.batch;
    if (t >= c.samples[n].input_length) continue;  // uniform across the block
    const T* r = x + row * c.classes;
    float m = -INFINITY;
    for (int64_t k = threadIdx.x; k < c.classes; k += blockDim.x) m = fmaxf(m, ToFloat(r[k]));
    m = BlockMax(m, scratch);
    float s = 0;
    if (m != -INFINITY) {
      for (int64_t k = threadIdx.x; k < c.classes; k += blockDim.x) s += expf(ToFloat(r[k]) - m);
    }
    s = BlockSum2(make_float2(s, 0), pairs).x;
    if (threadIdx.x == 0) c.lse[row] = m + logf(s);
    __syncthreads();  // scratch is reused by the next row
  }
}

// Block n < N computes sample n's alpha and loss, block N + n its beta. Stored values at step t
// are log α_t (or β_t) minus Σ of the earlier steps' maxima; an all -inf step (an impossible
// alignment) counts as maximum 0 so the -inf stays -inf rather than NaN.
template <typename T>
__global__ void CtcAlphaBetaKernel(const __grid_constant__ CtcCall c) {
  __shared__ float scratch[2][32];
  const bool backward = blockIdx.x >= c.batch;
  const int64_t n = backward ? blockIdx.x - c.batch : blockIdx.x;
  const CtcSample s = c.samples[n];
  const int64_t S = 2 * int64_t{s.label_length} + 1, frames = s.input_length;
  if (frames == 0) {
    if (!backward && threadIdx.x == 0) c.sample_loss[n] = S == 1 ? 0.0 : INFINITY;
    return;
  }
  float* v = (backward ? c.beta : c.alpha) + s.ab_offset;
  double log_scale = 0;  // Σ of the maxima of the steps before the current one
  float prev_max = 0;
  for (int64_t step = 0; step < frames; ++step) {
    const int64_t t = backward ? frames - 1 - step : step;
    float* cur = v + t * S;
    const float* prev = backward ? cur + S : cur - S;
    float local = -INFINITY;
    for (int64_t st = threadIdx.x; st < S; st += blockDim.x) {
      const int32_t cls = StateClass(c, s, st);
      float a;
      if (step == 0) {
        a = (backward ? st >= S - 2 : st < 2) ? 0.0f : -INFINITY;
      } else {
        // From the same state, the neighbour, and the one two away when it is a different
        // label (a repeated label needs the blank between).
        const int64_t near = backward ? st + 1 : st - 1, far = backward ? st + 2 : st - 2;
        const float p0 = prev[st] - prev_max;
        const float p1 = near >= 0 && near < S ? prev[near] - prev_max : -INFINITY;
        const bool skip = far >= 0 && far < S && cls != c.blank && StateClass(c, s, far) != cls;
        const float p2 = skip ? prev[far] - prev_max : -INFINITY;
        a = LogSum3(p0, p1, p2);
      }
      if (a != -INFINITY) a += LogProb<T>(c, t, n, cls);
      cur[st] = a;
      local = fmaxf(local, a);
    }
    // The barrier inside also publishes this step's values to the next step's readers.
    float m = BlockMax(local, scratch[step & 1]);
    if (m == -INFINITY) m = 0;
    if (step + 1 < frames) log_scale += m;
    prev_max = m;
  }
  if (!backward && threadIdx.x == 0) {
    const float* last = v + (frames - 1) * S;
    const float a = last[S - 1], b = S >= 2 ? last[S - 2] : -INFINITY;
    const float top = fmaxf(a, b);
    const double logp = top == -INFINITY
                            ? -INFINITY
                            : log_scale + top + log(exp(double{a} - top) + exp(double{b} - top));
    c.sample_loss[n] = -logp;
  }
}

// The index of `cls` in the ascending `classes[0, count)`, or -1.
__device__ __forceinline__ int FindClass(const int32_t* classes, int count, int32_t cls) {
  int lo = 0, hi = count;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (classes[mid] < cls) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo < count && classes[lo] == cls ? lo : -1;
}

// grad(t, n, c) = scale (exp(lp_c) - γ_c), γ_c = Σ_{s: l'_s = c} e^{w_s - Z}, w_s = log α_t(s) +
// log β_t(s) - lp(l'_s), Z = log Σ_s e^{w_s}. Dynamic shared memory: max_unique classes and
// their γ.
template <typename T>
__global__ void __launch_bounds__(kRowThreads)
    CtcGradientKernel(const __grid_constant__ CtcCall c) {
  extern __shared__ int32_t unique_shared[];
  __shared__ float scratch[kRowThreads / 32];
  __shared__ float2 pairs[kRowThreads / 32];
  int32_t* classes = unique_shared;
  float* gammas = reinterpret_cast<float*>(unique_shared + c.max_unique);
  T* grad = static_cast<T*>(c.grad);
  const T* x = static_cast<const T*>(c.activations);
  for (int64_t row = blockIdx.x; row < c.max_time * c.batch; row += gridDim.x) {
    const int64_t t = row / c.batch, n = row % c.batch;
    const CtcSample s = c.samples[n];
    T* out = grad + row * c.classes;
    const double loss = c.sample_loss[n];
    const bool infinite = isinf(loss);
    if (t >= s.input_length || infinite) {
      const float fill = t >= s.input_length || c.zero_infinity ? 0.0f : NAN;
      for (int64_t k = threadIdx.x; k < c.classes; k += blockDim.x) out[k] = FromFloat<T>(fill);
      continue;  // uniform across the block: no barrier skipped by some threads only
    }
    const int64_t S = 2 * int64_t{s.label_length} + 1;
    const float* alpha = c.alpha + s.ab_offset + t * S;
    const float* beta = c.beta + s.ab_offset + t * S;
    for (int j = threadIdx.x; j < s.unique_count; j += blockDim.x) {
      classes[j] = c.unique_class[s.unique_offset + j];
    }
    auto weight = [&](int64_t st) {
      const float ab = alpha[st] + beta[st];
      return ab == -INFINITY ? -INFINITY : ab - LogProb<T>(c, t, n, StateClass(c, s, st));
    };
    float local = -INFINITY;
    for (int64_t st = threadIdx.x; st < S; st += blockDim.x) local = fmaxf(local, weight(st));
    const float top = BlockMax(local, scratch);
    float2 sums = make_float2(0, 0);  // (all states, blank states) relative to top
    for (int64_t st = threadIdx.x; st < S; st += blockDim.x) {
      const float e = expf(weight(st) - top);
      sums.x += e;
      if ((st & 1) == 0) sums.y += e;
    }
    sums = BlockSum2(sums, pairs);
    const float z = top + logf(sums.x), gamma_blank = sums.y / sums.x;
    for (int j = threadIdx.x; j < s.unique_count; j += blockDim.x) {
      float g = 0;
      const int32_t* pos = c.sorted_pos + s.label_offset;
      for (int k = c.unique_begin[s.unique_offset + j]; k < c.unique_end[s.unique_offset + j];
           ++k) {
        g += expf(weight(2 * int64_t{pos[k]} + 1) - z);
      }
      gammas[j] = g;
    }
    __syncthreads();
    const T* r = x + row * c.classes;
    const float lse = c.log_probs ? 0.0f : c.lse[row];
    for (int64_t k = threadIdx.x; k < c.classes; k += blockDim.x) {
      float g = expf(ToFloat(r[k]) - lse);
      if (k == c.blank) {
        g -= gamma_blank;
      } else {
        const int j = FindClass(classes, s.unique_count, static_cast<int32_t>(k));
        if (j >= 0) g -= gammas[j];
      }
      out[k] = FromFloat<T>(s.grad_scale * g);
    }
    __syncthreads();  // classes, gammas and the scratch are reused by the next row
  }
}

__global__ void CtcReduceKernel(const __grid_constant__ CtcCall c) {
  double sum = 0;
  for (int64_t n = 0; n < c.batch; ++n) {
    double l = c.sample_loss[n];
    if (isinf(l) && c.zero_infinity) l = 0;
    if (c.reduction == kCtcReduceNone) {
      c.losses[n] = static_cast<float>(l);
    } else if (c.reduction == kCtcReduceSum) {
      sum += l;
    } else {
      sum += l / max(c.samples[n].label_length, 1);
    }
  }
  if (c.reduction == kCtcReduceSum) c.losses[0] = static_cast<float>(sum);
  if (c.reduction == kCtcReduceMean) c.losses[0] = static_cast<float>(sum / c.batch);
}

unsigned RowBlocks(int64_t rows) {
  return static_cast<unsigned>(rows < (int64_t{1} << 20) ? rows : (int64_t{1} << 20));
}

template <typename T>
int Launch(const CtcCall& c, cudaStream_t stream) {
  const int64_t rows = c.max_time * c.batch;
  if (!c.log_probs) {
    CtcLseKernel<T><<<RowBlocks(rows), kRowThreads, 0, stream>>>(c);
    if (cudaError_t e = cudaGetLastError()) return e;
  }
  // Enough warps to cover the states once, up to kMaxStateThreads (longer labels loop).
  int threads = (c.max_states + 31) / 32 * 32;
  if (threads > kMaxStateThreads) threads = kMaxStateThreads;
  const unsigned blocks = static_cast<unsigned>(c.grad != nullptr ? 2 * c.batch : c.batch);
  CtcAlphaBetaKernel<T><<<blocks, threads, 0, stream>>>(c);
  if (cudaError_t e = cudaGetLastError()) return e;
  if (c.grad != nullptr) {
    const size_t shared = static_cast<size_t>(c.max_unique) * (sizeof(int32_t) + sizeof(float));
    CtcGradientKernel<T><<<RowBlocks(rows), kRowThreads, shared, stream>>>(c);
    if (cudaError_t e = cudaGetLastError()) return e;
  }
  CtcReduceKernel<<<1, 1, 0, stream>>>(c);
  return cudaGetLastError();
}

}  // namespace

int LaunchCtcLoss(const CtcCall& call, void* stream) {
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (call.type) {
    case Storage::kF16:
      return Launch<__half>(call, s);
    case Storage::kBF16:
      return Launch<__nv_bfloat16>(call, s);
    default:
      return Launch<float>(call, s);
  }
}

}  // namespace cuda
}  // namespace kiln
