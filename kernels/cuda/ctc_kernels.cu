// The CTC graph op's device-side table building and finish (kernels/cuda/ctc_launch.h). The
// records and tables match what the primitive's host code builds (dnn/cuda/ctc/ctc_loss.cc):
// each sample's label positions sorted by class with ties in label order, and its distinct
// classes ascending with the [begin, end) of their positions, so the gradient kernel sums each
// class's states in the same order either way. Deterministic: no atomics.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>

#include "dnn/cuda/storage_access.cuh"
#include "kernels/cuda/ctc_launch.h"

namespace kiln {
namespace cuda {

namespace {

constexpr int kTableThreads = 256;
constexpr int kRowThreads = 128;

// v as an integer in [0, limit], or -1.
__device__ __forceinline__ int32_t IndexOrMinusOne(float v, int64_t limit) {
  return v >= 0.f && v <= static_cast<float>(limit) && floorf(v) == v ? static_cast<int32_t>(v)
                                                                      : -1;
}

__global__ void __launch_bounds__(kTableThreads)
    CtcTablesKernel(const __grid_constant__ CtcGraphTables t) {
  __shared__ int32_t lengths[2];  // input, label; -1 when refused
  const int64_t n = blockIdx.x, L = t.padded_length, NL = t.batch * L;
  int32_t* labels = t.tables + n * L;
  int32_t* sorted = t.tables + NL + n * L;
  int32_t* unique_class = t.tables + 2 * NL + n * L;
  int32_t* unique_begin = t.tables + 3 * NL + n * L;
  int32_t* unique_end = t.tables + 4 * NL + n * L;
  if (threadIdx.x == 0) {
    lengths[0] = IndexOrMinusOne(t.input_lengths[n], t.max_time);
    lengths[1] = IndexOrMinusOne(t.label_lengths[n], L);
  }
  __syncthreads();
  const int32_t frames = lengths[0], length = lengths[1];
  bool bad = frames < 0 || length < 0;
  for (int32_t i = threadIdx.x; !bad && i < length; i += blockDim.x) {
    const int32_t label = IndexOrMinusOne(t.labels[n * L + i], t.classes - 1);
    bad = label < 0 || label == t.blank;
    labels[i] = label;
  }
  // Uniform from here on: every thread sees the block's verdict.
  if (__syncthreads_or(bad)) {
    if (threadIdx.x == 0) {
      CtcSample s;  // empty: no frame and no label, so the primitive reads nothing of it
      s.ab_offset = n * t.max_time * (2 * L + 1);
      s.label_offset = static_cast<int32_t>(n * L);
      s.unique_offset = static_cast<int32_t>(n * L);
      t.samples[n] = s;
      t.invalid[n] = 1;
    }
    return;
  }
  // Position i goes where the classes below its own, and its own class's earlier positions,
  // end: a stable sort by class.
  for (int32_t i = threadIdx.x; i < length; i += blockDim.x) {
    const int32_t mine = labels[i];
    int32_t rank = 0;
    for (int32_t j = 0; j < length; ++j) {
      const int32_t other = labels[j];
      rank += other < mine || (other == mine && j < i);
    }
    sorted[rank] = i;
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  int32_t unique = 0;
  for (int32_t k = 0; k < length; ++k) {
    const int32_t cls = labels[sorted[k]];
    if (unique == 0 || unique_class[unique - 1] != cls) {
      unique_class[unique] = cls;
      unique_begin[unique] = k;
      ++unique;
    }
    unique_end[unique - 1] = k + 1;
  }
  CtcSample s;
  s.ab_offset = n * t.max_time * (2 * L + 1);
  s.label_offset = static_cast<int32_t>(n * L);
  s.label_length = length;
  s.input_length = frames;
  s.unique_offset = static_cast<int32_t>(n * L);
  s.unique_count = unique;
  // dnn::CtcGradientScale: the weight, divided by N max(L_n, 1) under the mean.
  s.grad_scale = t.reduction == kCtcReduceMean
                     ? static_cast<float>(double{t.grad_scale} /
                                          (static_cast<double>(t.batch) * max(length, 1)))
                     : t.grad_scale;
  t.samples[n] = s;
  t.invalid[n] = 0;
}

template <typename T>
__device__ void FillNanRows(T* grad, const int32_t* invalid, int64_t max_time, int64_t batch,
                            int64_t classes) {
  for (int64_t row = blockIdx.x; row < max_time * batch; row += gridDim.x) {
    if (!invalid[row % batch]) continue;
    for (int64_t k = threadIdx.x; k < classes; k += blockDim.x) {
      grad[row * classes + k] = FromFloat<T>(nanf(""));
    }
  }
}

template <typename T>
__device__ void StoreLoss(void* out, float v) {
  *static_cast<T*>(out) = FromFloat<T>(v);
}

__global__ void CtcFinishKernel(const float* loss, const int32_t* invalid, int64_t max_time,
                                int64_t batch, int64_t classes, void* loss_out, Storage loss_type,
                                void* grad, Storage grad_type) {
  if (loss_out != nullptr && blockIdx.x == 0 && threadIdx.x == 0) {
    bool any = false;
    for (int64_t n = 0; n < batch; ++n) any = any || invalid[n] != 0;
    const float v = any ? nanf("") : *loss;
    if (loss_type == Storage::kF16) {
      StoreLoss<__half>(loss_out, v);
    } else if (loss_type == Storage::kBF16) {
      StoreLoss<__nv_bfloat16>(loss_out, v);
    } else {
      StoreLoss<float>(loss_out, v);
    }
  }
  if (grad == nullptr) return;
  if (grad_type == Storage::kF16) {
    FillNanRows(static_cast<__half*>(grad), invalid, max_time, batch, classes);
  } else if (grad_type == Storage::kBF16) {
    FillNanRows(static_cast<__nv_bfloat16*>(grad), invalid, max_time, batch, classes);
  } else {
    FillNanRows(static_cast<float*>(grad), invalid, max_time, batch, classes);
  }
}

}  // namespace

int LaunchCtcGraphTables(const CtcGraphTables& t, void* stream) {
  CtcTablesKernel<<<static_cast<unsigned>(t.batch), kTableThreads, 0,
                    static_cast<cudaStream_t>(stream)>>>(t);
  return cudaGetLastError();
}

int LaunchCtcGraphFinish(const float* loss, const int32_t* invalid, int64_t max_time, int64_t batch,
                         int64_t classes, void* loss_out, Storage loss_type, void* grad,
                         Storage grad_type, void* stream) {
  const int64_t rows = max_time * batch;
  const unsigned blocks = grad == nullptr ? 1u : static_cast<unsigned>(rows < 4096 ? rows : 4096);
  CtcFinishKernel<<<blocks, kRowThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      loss, invalid, max_time, batch, classes, loss_out, loss_type, grad, grad_type);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace kiln
