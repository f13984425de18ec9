// Timing for the GPU benchmarks: the median of event-timed runs on one stream.
#ifndef KILN_BENCH_EVENT_TIMER_H_
#define KILN_BENCH_EVENT_TIMER_H_

#include <cuda_runtime_api.h>

#include <algorithm>
#include <vector>

namespace kiln {
namespace bench {

// Median milliseconds of `repeats` runs of `fn` (each between two events on `stream`) after
// `warmups` untimed runs; -1 when fn returns false or a CUDA event call fails.
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
    ok = cudaEventRecord(a, stream) == cudaSuccess && fn() &&
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
