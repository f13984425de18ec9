// Training batch norm over NCHW channels in one launch: a block (ResNet's 28x28, 14x14 and 7x7
// layers), or on Hopper a cluster of kCluster blocks (the 56x56 layers), sums its channel,
// finishes it (FinishFeature: statistics, running updates, coefficients) and applies it. The
// two-stage path launches three kernels over thousands of short blocks and reads the tensor
// again from DRAM in the apply pass; here the second read comes from L2, which the first read
// just filled. A cluster's blocks each take a slice of the channel and add their sums through
// distributed shared memory, in rank order (deterministic).
#include <cooperative_groups.h>

#include <atomic>

#include "dnn/cuda/primitive_launch.h"
#include "dnn/cuda/reduce_finish.cuh"
#include "dnn/cuda/reduce_terms.cuh"
#include "dnn/cuda/storage_access.cuh"

namespace kiln {
namespace cuda {

namespace {

// Threads per block: 512, or 1024 for channels past kWidePlane elements, where a block's loads
// in flight, not the block count, bound the speed (one block per SM streams a whole channel).
constexpr int kNarrowThreads = 512, kWideThreads = 1024;
constexpr int64_t kWidePlane = 16384;
// Largest channel (N x H x W elements) a block takes: past it, too few blocks stream too much
// each, and the two-stage path is faster (ResNet-18 at batch 64: the 28x28 layers' 50176 are
// in, the 56x56 layers' 200704 out).
constexpr int64_t kMaxPlaneElements = 65536;
constexpr int kInFlight = 8;
// Blocks per channel past kMaxPlaneElements (Hopper's thread-block clusters; the portable
// largest), each a slice of at most kMaxPlaneElements: ResNet-18's 56x56 layers at batch 64
// (200704 elements) take 8 slices of 25088. The 112x112 layer stays on the two-stage path: its
// 205 MB tensor outgrows L2 whatever the split.
constexpr int kCluster = 8;

// Where one channel's elements lie: `rows` runs of `inner` contiguous elements, `row_stride`
// apart, from the channel's start.
struct Plane {
  uint32_t rows, inner, count;
  int64_t row_stride;
};

__device__ __forceinline__ Plane PlaneOf(const ReduceCall& c) {
  const int last = c.reduce_rank - 1;
  Plane p;
  p.inner = static_cast<uint32_t>(c.reduce_dims[last]);
  p.rows = last > 0 ? static_cast<uint32_t>(c.reduce_dims[0]) : 1;
  p.row_stride = last > 0 ? c.a_reduce_strides[0] : 0;
  p.count = p.rows * p.inner;
  return p;
}

__device__ __forceinline__ int64_t OffsetOf(const Plane& p, uint32_t i) {
  const uint32_t row = i / p.inner;
  return row * p.row_stride + (i - row * p.inner);
}

// The block's two sums in double, in a fixed order (deterministic), to every thread.
template <int kThreads>
__device__ void BlockSums(double* s0, double* s1) {
  __shared__ double partial[2][kThreads / 32];
  for (int o = 16; o > 0; o >>= 1) {
    *s0 += __shfl_xor_sync(0xffffffffu, *s0, o);
    *s1 += __shfl_xor_sync(0xffffffffu, *s1, o);
  }
  if (threadIdx.x % 32 == 0) {
    partial[0][threadIdx.x / 32] = *s0;
    partial[1][threadIdx.x / 32] = *s1;
  }
  __syncthreads();
  double t0 = 0, t1 = 0;
  for (int w = 0; w < kThreads / 32; ++w) t0 += partial[0][w], t1 += partial[1][w];
  *s0 = t0;
  *s1 = t1;
}

// Adds the cluster's blocks' sums (in rank order) and has rank 0 finish the feature; every
// block returns once the coefficients are in global memory. Blocks of a cluster are
// co-scheduled, so the waits cannot deadlock.
__device__ void ClusterFinish(const ReduceCall& c, int64_t f, double s0, double s1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  __shared__ double mine[2];
  if (threadIdx.x == 0) mine[0] = s0, mine[1] = s1;
  cluster.sync();
  if (cluster.block_rank() == 0 && threadIdx.x == 0) {
    double t0 = 0, t1 = 0;
    for (unsigned r = 0; r < cluster.num_blocks(); ++r) {
      const double* theirs = cluster.map_shared_rank(mine, r);
      t0 += theirs[0];
      t1 += theirs[1];
    }
    FinishFeature(c, f, t0, t1);
    __threadfence();
  }
  // Rank 0 is done reading the others' shared memory, and its coefficients are visible.
  cluster.sync();
#else
  __trap();  // the launcher uses clusters only on devices that have them
#endif
}

// kMask: the backward through a fused ReLU (dy counts where the forward's output is positive).
// kClustered: a cluster of blocks per channel (blockIdx.x = channel * cluster + rank), each over
// its slice; otherwise a block per channel.
template <int kThreads, bool kBackward, bool kMask, bool kClustered>
__global__ void __launch_bounds__(kThreads)
    BatchNormPlaneKernel(const __grid_constant__ ReduceCall c, float alpha, float beta, float* out,
                         bool relu) {
  const int64_t f = kClustered ? blockIdx.x / kCluster : blockIdx.x;
  const Plane p = PlaneOf(c);
  // This block's slice [lo, hi) of the channel's elements.
  const uint32_t rank = kClustered ? blockIdx.x % kCluster : 0;
  const uint32_t parts = kClustered ? kCluster : 1;
  const uint32_t lo = static_cast<uint32_t>(uint64_t{p.count} * rank / parts);
  const uint32_t hi = static_cast<uint32_t>(uint64_t{p.count} * (rank + 1) / parts);
  const int64_t base = f * c.a_feature_strides[0];
  const float* x = static_cast<const float*>(c.a.data) + base;
  const float* dy = kBackward ? static_cast<const float*>(c.b.data) + base : nullptr;
  const float* y = kMask ? static_cast<const float*>(c.mask.data) + base : nullptr;
  out += base;
  double s0 = 0, s1 = 0;
  for (uint32_t i0 = lo + threadIdx.x; i0 < hi; i0 += kInFlight * kThreads) {
    float a[kInFlight], b[kInFlight];
#pragma unroll
    for (int k = 0; k < kInFlight; ++k) {
      const uint32_t i = i0 + k * kThreads;
      a[k] = b[k] = 0.0f;
      if (i < hi) {
        const int64_t o = OffsetOf(p, i);
        a[k] = x[o];
        if constexpr (kBackward) b[k] = kMask && !(y[o] > 0.0f) ? 0.0f : dy[o];
      }
    }
    float t0 = 0, t1 = 0;
#pragma unroll
    for (int k = 0; k < kInFlight; ++k) AddTerms<float>(c.op, a[k], b[k], &t0, &t1);
    s0 += t0;
    s1 += t1;
  }
  BlockSums<kThreads>(&s0, &s1);
  if constexpr (kClustered) {
    ClusterFinish(c, f, s0, s1);
  } else {
    if (threadIdx.x == 0) FinishFeature(c, f, s0, s1);
    __syncthreads();  // thread 0's coefficients are in global memory, visible to the block now
  }
  const int64_t F = c.features;
  const float scale = c.dense[f], scale_last = c.dense[F + f], bias = c.dense[2 * F + f],
              shift = c.dense[3 * F + f];
  // The second pass, kInFlight elements per thread loaded before any is written (the loads
  // cannot move past the stores on their own: out may alias x or dy), from the channel's end:
  // what the first pass read last is likeliest still in L2 when the blocks' channels together
  // outgrow it (the 28x28 backward through a ReLU reads 77 MB at batch 64).
  constexpr uint32_t kChunk = kInFlight * kThreads;
  for (uint32_t chunk = (hi - lo + kChunk - 1) / kChunk; chunk-- > 0;) {
    const uint32_t i0 = lo + chunk * kChunk + threadIdx.x;
    float a[kInFlight], g[kInFlight];
    int64_t o[kInFlight];
#pragma unroll
    for (int k = 0; k < kInFlight; ++k) {
      const uint32_t i = i0 + k * kThreads;
      o[k] = i < hi ? OffsetOf(p, i) : -1;
      a[k] = g[k] = 0.0f;
      if (o[k] >= 0) {
        a[k] = x[o[k]];
        if constexpr (kBackward) g[k] = kMask && !(y[o[k]] > 0.0f) ? 0.0f : dy[o[k]];
      }
    }
#pragma unroll
    for (int k = 0; k < kInFlight; ++k) {
      if (o[k] < 0) continue;
      float v;
      if constexpr (kBackward) {
        v = scale * g[k] + scale_last * (a[k] - shift) + bias;
      } else {
        v = scale * (a[k] - shift) + bias;
        if (relu) v = v > 0.0f ? v : 0.0f;
      }
      float* dst = out + o[k];
      *dst = Blend(alpha, v, beta, [&] { return *dst; });
    }
  }
}

template <int kThreads, bool kBackward, bool kMask, bool kClustered>
cudaError_t LaunchKernel(const ReduceCall& c, float alpha, float beta, bool relu, float* out,
                         cudaStream_t s) {
  auto* kernel = BatchNormPlaneKernel<kThreads, kBackward, kMask, kClustered>;
  if constexpr (!kClustered) {
    kernel<<<static_cast<unsigned>(c.features), kThreads, 0, s>>>(c, alpha, beta, out, relu);
    return cudaGetLastError();
  } else {
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(static_cast<unsigned>(c.features * kCluster));
    config.blockDim = dim3(kThreads);
    config.stream = s;
    cudaLaunchAttribute cluster;
    cluster.id = cudaLaunchAttributeClusterDimension;
    cluster.val.clusterDim.x = kCluster;
    cluster.val.clusterDim.y = 1;
    cluster.val.clusterDim.z = 1;
    config.attrs = &cluster;
    config.numAttrs = 1;
    return cudaLaunchKernelEx(&config, kernel, c, alpha, beta, out, relu);
  }
}

template <int kThreads, bool kClustered>
cudaError_t Launch(const ReduceCall& c, float alpha, float beta, bool relu, float* out,
                   cudaStream_t s) {
  if (c.op == ReduceOp::kMoments) {
    return LaunchKernel<kThreads, false, false, kClustered>(c, alpha, beta, relu, out, s);
  }
  if (c.mask.data != nullptr) {
    return LaunchKernel<kThreads, true, true, kClustered>(c, alpha, beta, false, out, s);
  }
  return LaunchKernel<kThreads, true, false, kClustered>(c, alpha, beta, false, out, s);
}

// Whether the current device runs the clustered kernels: compute capability 9.x and their sm_90
// code loaded (a PTX-only build for an older target would not have it). Asked on every plan,
// so answered once per device.
bool ClustersAvailable() {
  static std::atomic<int> known[64];  // 0 unknown, 1 no, 2 yes
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= 64) {
    cudaGetLastError();
    return false;
  }
  int answer = known[device].load();
  if (answer == 0) {
    int major = 0;
    cudaFuncAttributes attr;
    const bool yes =
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
        major >= 9 &&
        cudaFuncGetAttributes(&attr, BatchNormPlaneKernel<kNarrowThreads, false, false, true>) ==
            cudaSuccess &&
        attr.binaryVersion >= 90;
    cudaGetLastError();
    answer = yes ? 2 : 1;
    known[device].store(answer);
  }
  return answer == 2;
}

// The current device's L2 bytes (0 when it cannot be read), asked once per device.
int64_t L2CacheBytes() {
  static std::atomic<int64_t> known[64];  // 0 unknown, -1 unreadable
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= 64) {
    cudaGetLastError();
    return 0;
  }
  int64_t bytes = known[device].load();
  if (bytes == 0) {
    int l2 = 0;
    bytes = cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device) == cudaSuccess && l2 > 0
                ? l2
                : -1;
    cudaGetLastError();
    known[device].store(bytes);
  }
  return bytes > 0 ? bytes : 0;
}

}  // namespace

bool BatchNormPlanesServe(const ReduceCall& c) {
  if (c.op != ReduceOp::kMoments && c.op != ReduceOp::kGradientSums) return false;
  if (c.feature_rank != 1 || c.reduce_rank < 1 || c.reduce_rank > 2) return false;
  if (c.dense == nullptr) return false;
  // Clusters serve the forward and the plain backward. The backward through a fused ReLU reads
  // three tensors twice, too much for L2 to return the second read: measured on ResNet-18's
  // 56x56 layers (H100, 2026-11-24) it took 0.219 ms against the two-stage path's 0.20.
  // The forward only over a tensor within twice the L2, where the apply's second read still
  // finds its channels there: ResNet-18's 56x56 layers (51 MB on the H100's 50 MB L2) gain; on
  // the 128x96x55x55 tensor of bench/primitives_bench (149 MB) the clusters took 0.2204 ms
  // against the two-stage path's 0.1782. Its backward keeps the clusters there (0.3165 against
  // 0.3938 ms). H100, 2026-11-25.
  const bool beyond_l2 =
      c.features * c.reduce_count * static_cast<int64_t>(sizeof(float)) > 2 * L2CacheBytes();
  if (c.reduce_count > kMaxPlaneElements &&
      (c.reduce_count > kCluster * kMaxPlaneElements || c.mask.data != nullptr ||
       !ClustersAvailable() || (c.op == ReduceOp::kMoments && beyond_l2))) {
    return false;
  }
  const int last = c.reduce_rank - 1;
  if (c.a.type != Storage::kF32 || c.a_reduce_strides[last] != 1) return false;
  if (c.op == ReduceOp::kGradientSums) {
    // dy (and the mask) laid out as x.
    if (c.b.type != Storage::kF32 || c.b_feature_strides[0] != c.a_feature_strides[0]) return false;
    for (int d = 0; d < c.reduce_rank; ++d) {
      if (c.b_reduce_strides[d] != c.a_reduce_strides[d]) return false;
    }
    if (c.mask.data != nullptr) {
      if (c.mask.type != Storage::kF32 || c.mask_feature_strides[0] != c.a_feature_strides[0]) {
        return false;
      }
      for (int d = 0; d < c.reduce_rank; ++d) {
        if (c.mask_reduce_strides[d] != c.a_reduce_strides[d]) return false;
      }
    }
  }
  return true;
}

int LaunchBatchNormPlanes(const ReduceCall& c, float alpha, float beta, bool relu, void* out,
                          void* stream) {
  if (!BatchNormPlanesServe(c)) return static_cast<int>(cudaErrorInvalidValue);
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  float* o = static_cast<float*>(out);
  cudaError_t error;
  if (c.reduce_count > kMaxPlaneElements) {
    error = Launch<kNarrowThreads, true>(c, alpha, beta, relu, o, s);
  } else if (c.reduce_count > kWidePlane) {
    error = Launch<kWideThreads, false>(c, alpha, beta, relu, o, s);
  } else {
    error = Launch<kNarrowThreads, false>(c, alpha, beta, relu, o, s);
  }
  return error != cudaSuccess ? static_cast<int>(error) : LastError();
}

}  // namespace cuda
}  // namespace kiln
