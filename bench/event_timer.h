// Timing for the GPU benchmarks: the median of event-timed runs on one stream.
#ifndef KILN_BENCH_EVENT_TIMER_H_
#define KILN_BENCH_EVENT_TIMER_H_

#include <cuda_runtime_api.h>

#include <algorithm>
#include <vector>

#include "bench/gpu_hold.h"

namespace kiln {
namespace bench {

// GPU time a timed run is queued behind (HoldGpu): longer than any host-side enqueueing of one
// run. Kiln's takes a few microseconds; cuDNN's convolution calls were seen to take tens (on a
// fresh machine, more than 50: its times then carried part of it), so the margin is wide.
constexpr int kHoldMicroseconds = 1000;

// Median milliseconds of `repeats` runs of `fn` (each between two events on `stream`) after
// `warmups` untimed runs; -1 when fn returns false or a CUDA call fails. Each run is enqueued
// while the GPU is held busy, so the events time the GPU's work alone: without the hold, the
// first event fires at once and the time includes the host's enqueueing, which is most of the
// time of a small op (a 1 MB softmax) and varies from run to run.
template <typename F>
float MedianMs(F&& fn, int repeats, cudaStream_t stream, int warmups = 1) {
  for (int i = 0; i < warmups; ++i) {
    if (!fn()) return -1;
  }
  cudaEvent_t a, b;
  if (cudaEventCreate(&a) != cudaSuccess) return -1;
  if (cudaEventCreate(&b) != cudaSuccess) {
    cudaEventDestroy(a);
    return -1;
  }
  std::vector<float> times;
  bool ok = true;
  for (int i = 0; i < repeats && ok; ++i) {
    float ms = 0;
    ok = HoldGpu(stream, kHoldMicroseconds) == cudaSuccess &&
         cudaEventRecord(a, stream) == cudaSuccess && fn() &&
         cudaEventRecord(b, stream) == cudaSuccess && cudaEventSynchronize(b) == cudaSuccess &&
         cudaEventElapsedTime(&ms, a, b) == cudaSuccess;
    times.push_back(ms);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  if (!ok || times.empty()) return -1;
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace bench
}  // namespace kiln

#endif  // KILN_BENCH_EVENT_TIMER_H_
