// Keeps a stream's GPU busy for a while, so that work enqueued behind it is timed by GPU events
// without the host's enqueueing time (API checks, launch) in between.
#ifndef KILN_BENCH_GPU_HOLD_H_
#define KILN_BENCH_GPU_HOLD_H_

#include <cuda_runtime_api.h>

namespace kiln {
namespace bench {

// Enqueues a one-thread kernel on `stream` that spins for `microseconds` of GPU time; returns
// the launch's error.
cudaError_t HoldGpu(cudaStream_t stream, int microseconds);

}  // namespace bench
}  // namespace kiln

#endif  // KILN_BENCH_GPU_HOLD_H_
