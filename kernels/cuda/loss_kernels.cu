// The loss and accuracy reductions of the graph's CUDA kernels: one block each, every thread
// accumulating a strided share of the items in double, then a shared-memory tree in a fixed
// order, so the result is the same bits on every run. These are small (one value per batch);
// one block keeps them simple and deterministic, and their cost is a few microseconds.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>

#include "kernels/cuda/loss_launch.h"

namespace kiln {
namespace cuda {

namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ double Load(LossOperand o, int64_t i) {
  switch (o.type) {
    case LossStorage::kF16:
      return __half2float(static_cast<const __half*>(o.data)[i]);
    case LossStorage::kBF16:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(o.data)[i]);
    case LossStorage::kI32:
      return static_cast<double>(static_cast<const int32_t*>(o.data)[i]);
    default:
      return static_cast<const float*>(o.data)[i];
  }
}

__device__ __forceinline__ void Store(LossOperand o, double v) {
  void* p = const_cast<void*>(o.data);
  switch (o.type) {
    case LossStorage::kF16:
      *static_cast<__half*>(p) = __float2half_rn(static_cast<float>(v));
      break;
    case LossStorage::kBF16:
      *static_cast<__nv_bfloat16*>(p) = __float2bfloat16_rn(static_cast<float>(v));
      break;
    default:
      *static_cast<float*>(p) = static_cast<float>(v);
  }
}

// Sums each thread's two partials over the block in a fixed tree; thread 0 gets the totals.
__device__ void BlockSum2(double& a, double& b) {
  __shared__ double sa[kThreads], sb[kThreads];
  sa[threadIdx.x] = a;
  sb[threadIdx.x] = b;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      sa[threadIdx.x] += sa[threadIdx.x + stride];
      sb[threadIdx.x] += sb[threadIdx.x + stride];
    }
    __syncthreads();
  }
  a = sa[0];
  b = sb[0];
  __syncthreads();  // the next call may overwrite sa[0] only after every thread has read it
}

__global__ void __launch_bounds__(kThreads)
    AccuracyKernel(LossOperand scores, LossOperand labels, int64_t outer, int64_t classes,
                   int64_t inner, int64_t top_k, bool has_ignore, int64_t ignore, LossOperand out) {
  double correct = 0, count = 0;
  bool bad = false;
  for (int64_t p = threadIdx.x; p < outer * inner; p += kThreads) {
    const int64_t o = p / inner, i = p % inner;
    const double raw = Load(labels, p);
    const int64_t label = static_cast<int64_t>(raw);
    if (has_ignore && label == ignore) continue;
    if (label < 0 || label >= classes) {
      bad = true;
      continue;
    }
    const int64_t base = o * classes * inner + i;
    const double mine = Load(scores, base + label * inner);
    int64_t better = 0;
    for (int64_t c = 0; c < classes; ++c) better += Load(scores, base + c * inner) > mine;
    correct += better < top_k;
    count += 1;
  }
  double flag = bad ? 1 : 0;
  BlockSum2(correct, count);
  BlockSum2(flag, flag);
  if (threadIdx.x == 0) Store(out, flag > 0 ? NAN : count == 0 ? 0.0 : correct / count);
}

__global__ void __launch_bounds__(kThreads)
    EuclideanKernel(LossOperand a, LossOperand b, int64_t count, int64_t rows, LossOperand out) {
  double sum = 0, unused = 0;
  for (int64_t e = threadIdx.x; e < count; e += kThreads) {
    const double d = Load(a, e) - Load(b, e);
    sum += d * d;
  }
  BlockSum2(sum, unused);
  if (threadIdx.x == 0) Store(out, sum / (2.0 * static_cast<double>(rows)));
}

__global__ void __launch_bounds__(kThreads)
    SigmoidCrossEntropyKernel(LossOperand logits, LossOperand targets, int64_t count, int64_t rows,
                              bool has_ignore, int64_t ignore, LossNormalizer normalizer,
                              LossOperand out) {
  double sum = 0, valid = 0;
  for (int64_t e = threadIdx.x; e < count; e += kThreads) {
    const double t = Load(targets, e);
    if (has_ignore && t == static_cast<double>(ignore)) continue;
    const double x = Load(logits, e);
    // The log(1 + exp(-|x|)) form: no overflow for either sign.
    sum -= x * (t - (x >= 0 ? 1.0 : 0.0)) - log1p(exp(-fabs(x)));
    valid += 1;
  }
  BlockSum2(sum, valid);
  if (threadIdx.x != 0) return;
  double n = 1;
  if (normalizer == LossNormalizer::kFull) n = static_cast<double>(count);
  if (normalizer == LossNormalizer::kValid) n = valid;
  if (normalizer == LossNormalizer::kBatchSize) n = static_cast<double>(rows);
  Store(out, sum / fmax(n, 1.0));
}

__global__ void __launch_bounds__(kThreads)
    ContrastiveKernel(LossOperand a, LossOperand b, LossOperand similar, int64_t rows,
                      int64_t width, double margin, bool legacy, LossOperand out) {
  double sum = 0, unused = 0;
  for (int64_t r = threadIdx.x; r < rows; r += kThreads) {
    double d2 = 0;
    for (int64_t j = 0; j < width; ++j) {
      const double d = Load(a, r * width + j) - Load(b, r * width + j);
      d2 += d * d;
    }
    if (Load(similar, r) != 0.0) {
      sum += d2;
    } else if (legacy) {
      sum += fmax(margin - d2, 0.0);
    } else {
      const double gap = fmax(margin - sqrt(d2), 0.0);
      sum += gap * gap;
    }
  }
  BlockSum2(sum, unused);
  if (threadIdx.x == 0) Store(out, sum / (2.0 * static_cast<double>(rows)));
}

int LastError() { return static_cast<int>(cudaGetLastError()); }

__device__ __forceinline__ void StoreAt(LossOperand o, int64_t i, double v) {
  void* p = const_cast<void*>(o.data);
  switch (o.type) {
    case LossStorage::kF16:
      static_cast<__half*>(p)[i] = __float2half_rn(static_cast<float>(v));
      break;
    case LossStorage::kBF16:
      static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(static_cast<float>(v));
      break;
    default:
      static_cast<float*>(p)[i] = static_cast<float>(v);
  }
}

// ---- Gradients: one block, element-wise after any count the normalizer needs ----

__global__ void __launch_bounds__(kThreads)
    EuclideanGradientKernel(LossOperand a, LossOperand b, int64_t count, double scale,
                            LossOperand da) {
  for (int64_t i = threadIdx.x; i < count; i += kThreads) {
    StoreAt(da, i, scale * (Load(a, i) - Load(b, i)));
  }
}

__global__ void __launch_bounds__(kThreads)
    SigmoidCrossEntropyGradientKernel(LossOperand logits, LossOperand targets, int64_t count,
                                      int64_t rows, bool has_ignore, int64_t ignore_label,
                                      LossNormalizer normalizer, double weight, LossOperand dx) {
  double valid = 0, unused = 0;
  for (int64_t i = threadIdx.x; i < count; i += kThreads) {
    valid += !(has_ignore && Load(targets, i) == static_cast<double>(ignore_label));
  }
  BlockSum2(valid, unused);
  double n = normalizer == LossNormalizer::kFull        ? static_cast<double>(count)
             : normalizer == LossNormalizer::kValid     ? valid
             : normalizer == LossNormalizer::kBatchSize ? static_cast<double>(rows)
                                                        : 1.0;
  const double scale = weight / (n < 1.0 ? 1.0 : n);
  for (int64_t i = threadIdx.x; i < count; i += kThreads) {
    const double t = Load(targets, i);
    const bool ignored = has_ignore && t == static_cast<double>(ignore_label);
    StoreAt(dx, i, ignored ? 0.0 : scale * (1.0 / (1.0 + exp(-Load(logits, i))) - t));
  }
}

// One row at a time: the block sums the row's squared distance, then writes both gradients.
__global__ void __launch_bounds__(kThreads)
    ContrastiveGradientKernel(LossOperand a, LossOperand b, LossOperand similar, int64_t rows,
                              int64_t width, double margin, bool legacy, double weight,
                              LossOperand da, LossOperand db) {
  const double w = weight / static_cast<double>(rows);
  for (int64_t r = 0; r < rows; ++r) {
    double d2 = 0, unused = 0;
    for (int64_t j = threadIdx.x; j < width; j += kThreads) {
      const double d = Load(a, r * width + j) - Load(b, r * width + j);
      d2 += d * d;
    }
    BlockSum2(d2, unused);
    double factor = 0;
    if (Load(similar, r) != 0.0) {
      factor = w;
    } else if (legacy) {
      factor = margin - d2 > 0 ? -w : 0.0;
    } else {
      const double d = sqrt(d2);
      factor = margin - d > 0 ? -w * (margin - d) / (d + 1e-4) : 0.0;
    }
    for (int64_t j = threadIdx.x; j < width; j += kThreads) {
      const double g = factor * (Load(a, r * width + j) - Load(b, r * width + j));
      StoreAt(da, r * width + j, g);
      StoreAt(db, r * width + j, -g);
    }
  }
}

}  // namespace

int LaunchAccuracy(LossOperand scores, LossOperand labels, int64_t outer, int64_t classes,
                   int64_t inner, int64_t top_k, bool has_ignore, int64_t ignore_label,
                   LossOperand out, void* stream) {
  AccuracyKernel<<<1, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      scores, labels, outer, classes, inner, top_k, has_ignore, ignore_label, out);
  return LastError();
}

int LaunchEuclideanLoss(LossOperand a, LossOperand b, int64_t count, int64_t rows, LossOperand out,
                        void* stream) {
  EuclideanKernel<<<1, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(a, b, count, rows, out);
  return LastError();
}

int LaunchSigmoidCrossEntropyLoss(LossOperand logits, LossOperand targets, int64_t count,
                                  int64_t rows, bool has_ignore, int64_t ignore_label,
                                  LossNormalizer normalizer, LossOperand out, void* stream) {
  SigmoidCrossEntropyKernel<<<1, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      logits, targets, count, rows, has_ignore, ignore_label, normalizer, out);
  return LastError();
}

int LaunchContrastiveLoss(LossOperand a, LossOperand b, LossOperand similar, int64_t rows,
                          int64_t width, double margin, bool legacy, LossOperand out,
                          void* stream) {
  ContrastiveKernel<<<1, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      a, b, similar, rows, width, margin, legacy, out);
  return LastError();
}

int LaunchEuclideanLossGradient(LossOperand a, LossOperand b, int64_t count, int64_t rows,
                                double weight, LossOperand da, void* stream) {
  EuclideanGradientKernel<<<1, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      a, b, count, weight / static_cast<double>(rows > 0 ? rows : 1), da);
  return LastError();
}

int LaunchSigmoidCrossEntropyLossGradient(LossOperand logits, LossOperand targets, int64_t count,
                                          int64_t rows, bool has_ignore, int64_t ignore_label,
                                          LossNormalizer normalizer, double weight, LossOperand dx,
                                          void* stream) {
  SigmoidCrossEntropyGradientKernel<<<1, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      logits, targets, count, rows, has_ignore, ignore_label, normalizer, weight, dx);
  return LastError();
}

int LaunchContrastiveLossGradient(LossOperand a, LossOperand b, LossOperand similar, int64_t rows,
                                  int64_t width, double margin, bool legacy, double weight,
                                  LossOperand da, LossOperand db, void* stream) {
  ContrastiveGradientKernel<<<1, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      a, b, similar, rows, width, margin, legacy, weight, da, db);
  return LastError();
}

}  // namespace cuda
}  // namespace kiln
