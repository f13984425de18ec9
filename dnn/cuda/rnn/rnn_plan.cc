#include "dnn/cuda/rnn/rnn_plan.h"

#include <cuda_runtime_api.h>

#include "base/status_macros.h"
#include "dnn/cuda/cuda_status.h"
#include "dnn/cuda/rnn/rnn_calls.h"

namespace kiln {
namespace dnn {

namespace {

// Everything a recorded call baked in: its kind, stream, every tensor address and size.
std::vector<uintptr_t> KeyOf(const RnnProblem& p, int kind, const RnnTensors& t, void* stream) {
  auto u = [](const void* v) { return reinterpret_cast<uintptr_t>(v); };
  std::vector<uintptr_t> key = {static_cast<uintptr_t>(kind),
                                u(stream),
                                u(t.x),
                                u(t.y),
                                u(t.hx),
                                u(t.cx),
                                u(t.hy),
                                u(t.cy),
                                u(t.w),
                                u(t.cont),
                                u(t.dy),
                                u(t.dhy),
                                u(t.dcy),
                                u(t.dx),
                                u(t.dhx),
                                u(t.dcx),
                                u(t.dw),
                                u(t.workspace),
                                t.workspace_bytes,
                                u(t.reserve),
                                t.reserve_bytes,
                                u(t.params),
                                u(t.grads)};
  const int64_t cells = p.rnn.layers * p.rnn.directions();
  for (int64_t i = 0; t.params != nullptr && i < cells; ++i) {
    const RnnLayerParams& q = t.params[i];
    key.insert(key.end(), {u(q.w_ih), u(q.w_hh), u(q.b_ih), u(q.b_hh)});
  }
  for (int64_t i = 0; t.grads != nullptr && i < cells; ++i) {
    const RnnLayerGrads& g = t.grads[i];
    key.insert(key.end(), {u(g.w_ih), u(g.w_hh), u(g.b_ih), u(g.b_hh)});
  }
  return key;
}

absl::Status CallOnce(Handle& handle, const RnnProblem& p, int kind, const RnnTensors& t,
                      RnnLengths lengths) {
  switch (kind) {
    case 0:
      return RnnForwardCall(handle, p, RnnForwardMode::kInference, t, lengths);
    case 1:
      return RnnForwardCall(handle, p, RnnForwardMode::kTraining, t, lengths);
    case 2:
      return RnnBackwardDataCall(handle, p, t, lengths);
    default:
      return RnnBackwardWeightsCall(handle, p, t, lengths);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<RnnPlan>> RnnPlan::Create(const RnnProblem& problem) {
  KILN_ASSIGN_OR_RETURN(RnnBufferSizes sizes, RnnGetBufferSizes(problem));
  return std::unique_ptr<RnnPlan>(new RnnPlan(problem, sizes));
}

RnnPlan::~RnnPlan() {
  for (Replay& r : replays_) {
    if (r.exec != nullptr) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(r.exec));
  }
  if (event_before_ != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(event_before_));
  if (event_after_ != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(event_after_));
  if (capture_stream_ != nullptr) cudaStreamDestroy(static_cast<cudaStream_t>(capture_stream_));
}

absl::Status RnnPlan::Forward(Handle& handle, RnnForwardMode mode, const RnnTensors& t) {
  return Run(handle, mode == RnnForwardMode::kTraining ? kTraining : kInference, t);
}

absl::Status RnnPlan::BackwardData(Handle& handle, const RnnTensors& t) {
  return Run(handle, kBackwardData, t);
}

absl::Status RnnPlan::BackwardWeights(Handle& handle, const RnnTensors& t) {
  return Run(handle, kBackwardWeights, t);
}

absl::Status RnnPlan::Direct(Handle& handle, Kind kind, const RnnTensors& t) {
  return CallOnce(handle, problem_, kind, t, RnnLengths::kUpload);
}

absl::Status RnnPlan::Run(Handle& handle, Kind kind, const RnnTensors& t) {
  auto stream = static_cast<cudaStream_t>(handle.stream());
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  KILN_CUDA_RETURN_IF_ERROR(cudaStreamIsCapturing(stream, &capturing));
  if (capture_disabled_ || capturing != cudaStreamCaptureStatusNone) {
    return Direct(handle, kind, t);
  }
  Replay& r = replays_[kind];
  std::vector<uintptr_t> key = KeyOf(problem_, kind, t, stream);
  if (key != r.key) {
    r.key = std::move(key);
    r.calls_with_key = 0;
  }
  ++r.calls_with_key;
  if (r.calls_with_key == 1) return Direct(handle, kind, t);  // maybe a one-off
  if (r.calls_with_key == 2) return RunAndRecord(handle, kind, t);
  if (r.exec == nullptr) return Direct(handle, kind, t);
  // The lengths go to the workspace before every launch: the graph does not copy them.
  KILN_RETURN_IF_ERROR(RnnUploadLengths(handle, problem_, t));
  KILN_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(static_cast<cudaGraphExec_t>(r.exec), stream));
  ++graph_launches_;
  return absl::OkStatus();
}

// The second call with the same tensors: it runs directly on the plan's own stream (ordered
// after the caller's work and before the caller's next), then is recorded there. Recording
// needs a stream of the plan's own: the caller's may be the legacy default stream, which cannot
// be captured; and cuBLAS sets up a stream's state on its first GEMM, which must not happen
// inside a capture, so the direct run comes first.
absl::Status RnnPlan::RunAndRecord(Handle& handle, Kind kind, const RnnTensors& t) {
  auto caller = static_cast<cudaStream_t>(handle.stream());
  if (capture_stream_ == nullptr) {
    cudaStream_t s = nullptr;
    cudaEvent_t before = nullptr, after = nullptr;
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess ||
        cudaEventCreateWithFlags(&before, cudaEventDisableTiming) != cudaSuccess ||
        cudaEventCreateWithFlags(&after, cudaEventDisableTiming) != cudaSuccess) {
      cudaGetLastError();
      if (s != nullptr) cudaStreamDestroy(s);
      if (before != nullptr) cudaEventDestroy(before);
      capture_disabled_ = true;
      return Direct(handle, kind, t);
    }
    capture_stream_ = s;
    event_before_ = before;
    event_after_ = after;
  }
  auto own = static_cast<cudaStream_t>(capture_stream_);
  KILN_CUDA_RETURN_IF_ERROR(cudaEventRecord(static_cast<cudaEvent_t>(event_before_), caller));
  KILN_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(own, static_cast<cudaEvent_t>(event_before_), 0));
  KILN_RETURN_IF_ERROR(handle.SetStream(own));
  const absl::Status ran = CallOnce(handle, problem_, kind, t, RnnLengths::kUpload);
  const absl::Status recorded = ran.ok() ? Record(handle, kind, t) : ran;
  const absl::Status restored = handle.SetStream(caller);
  KILN_CUDA_RETURN_IF_ERROR(cudaEventRecord(static_cast<cudaEvent_t>(event_after_), own));
  KILN_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(caller, static_cast<cudaEvent_t>(event_after_), 0));
  KILN_RETURN_IF_ERROR(restored);
  KILN_RETURN_IF_ERROR(ran);
  if (!recorded.ok()) capture_disabled_ = true;  // only speed is lost: the call itself ran
  return absl::OkStatus();
}

// Records one call on the handle's (the plan's own) stream into replays_[kind].exec: a new
// executable graph, or the old one updated to the new tensors.
absl::Status RnnPlan::Record(Handle& handle, Kind kind, const RnnTensors& t) {
  Replay& r = replays_[kind];
  auto own = static_cast<cudaStream_t>(handle.stream());
  if (cudaStreamBeginCapture(own, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
    cudaGetLastError();
    return absl::UnavailableError("RnnPlan: the stream cannot be captured");
  }
  const absl::Status recorded = CallOnce(handle, problem_, kind, t, RnnLengths::kAlreadyOnDevice);
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(own, &graph);
  if (!recorded.ok() || ended != cudaSuccess || graph == nullptr) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    cudaGetLastError();  // a failed capture leaves an error that is not the next call's
    return recorded.ok() ? absl::UnavailableError("RnnPlan: the capture failed") : recorded;
  }
  if (r.exec != nullptr) {
    cudaGraphExecUpdateResultInfo info;
    if (cudaGraphExecUpdate(static_cast<cudaGraphExec_t>(r.exec), graph, &info) != cudaSuccess) {
      cudaGetLastError();
      cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(r.exec));
      r.exec = nullptr;
    }
  }
  if (r.exec == nullptr) {
    cudaGraphExec_t exec = nullptr;
    if (cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) {
      cudaGetLastError();
      cudaGraphDestroy(graph);
      return absl::UnavailableError("RnnPlan: the graph could not be instantiated");
    }
    r.exec = exec;
  }
  cudaGraphDestroy(graph);
  return absl::OkStatus();
}

}  // namespace dnn
}  // namespace kiln
