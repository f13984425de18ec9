// An RNN execution plan: one problem (rnn.h's RnnProblem) made once and called many times, as a
// training loop or a server does. Each call's work is hundreds of small launches (a GEMM and a
// cell kernel per step and layer), so for small layers the host's launch rate, not the GPU,
// sets the time. The plan records a call as a CUDA graph the second time it sees the same
// tensors on the same stream (on a stream of its own, ordered with the caller's by events: the
// caller's may be the legacy default stream, which cannot be captured), and from the third on
// launches the graph into the caller's stream: one launch per call.
//
// The first call with new tensors runs as the free functions do (so a loop whose buffers change
// every call never pays for a capture); a call on a stream that is already being captured (the
// graph engine's executor records whole plans) runs directly into that capture. When a capture
// or an instantiation fails, the plan runs its calls directly from then on.
// Not thread-safe: one plan per host thread, as with a Handle.
#ifndef KILN_DNN_CUDA_RNN_RNN_PLAN_H_
#define KILN_DNN_CUDA_RNN_RNN_PLAN_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "dnn/cuda/rnn/rnn.h"

namespace kiln {
namespace dnn {

class RnnPlan {
 public:
  // InvalidArgument as RnnGetBufferSizes.
  static absl::StatusOr<std::unique_ptr<RnnPlan>> Create(const RnnProblem& problem);
  ~RnnPlan();
  RnnPlan(const RnnPlan&) = delete;
  RnnPlan& operator=(const RnnPlan&) = delete;

  const RnnProblem& problem() const { return problem_; }
  const RnnBufferSizes& sizes() const { return sizes_; }

  // As the free functions of rnn.h, on this plan's problem.
  absl::Status Forward(Handle& handle, RnnForwardMode mode, const RnnTensors& t);
  absl::Status BackwardData(Handle& handle, const RnnTensors& t);
  absl::Status BackwardWeights(Handle& handle, const RnnTensors& t);

  // How many calls ran as a graph launch (for tests and benchmarks).
  int64_t graph_launches() const { return graph_launches_; }
  bool capture_disabled() const { return capture_disabled_; }

 private:
  enum Kind { kInference, kTraining, kBackwardData, kBackwardWeights, kKinds };
  // One kind of call's graph: the tensors and stream it was recorded with.
  struct Replay {
    std::vector<uintptr_t> key;
    int calls_with_key = 0;
    void* exec = nullptr;  // cudaGraphExec_t
  };
  explicit RnnPlan(const RnnProblem& problem, RnnBufferSizes sizes)
      : problem_(problem), sizes_(sizes) {}
  absl::Status Run(Handle& handle, Kind kind, const RnnTensors& t);
  absl::Status Direct(Handle& handle, Kind kind, const RnnTensors& t);
  absl::Status RunAndRecord(Handle& handle, Kind kind, const RnnTensors& t);
  absl::Status Record(Handle& handle, Kind kind, const RnnTensors& t);

  RnnProblem problem_;
  RnnBufferSizes sizes_;
  Replay replays_[kKinds];
  void* capture_stream_ = nullptr;  // cudaStream_t: where calls are recorded
  void* event_before_ = nullptr;    // cudaEvent_t: orders the recording run with the caller's
  void* event_after_ = nullptr;
  int64_t graph_launches_ = 0;
  bool capture_disabled_ = false;
};

}  // namespace dnn
}  // namespace kiln

#endif  // KILN_DNN_CUDA_RNN_RNN_PLAN_H_
