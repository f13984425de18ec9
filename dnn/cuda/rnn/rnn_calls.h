// The RNN primitives' calls with the upload of ragged lengths left to the caller (internal to
// //dnn/cuda/rnn): RnnPlan replays a call as a CUDA graph, and a stream capture cannot copy from
// pageable host memory, so the plan uploads the lengths before launching the graph.
#ifndef KILN_DNN_CUDA_RNN_RNN_CALLS_H_
#define KILN_DNN_CUDA_RNN_RNN_CALLS_H_

#include "absl/status/status.h"
#include "dnn/cuda/rnn/rnn.h"

namespace kiln {
namespace dnn {

enum class RnnLengths { kUpload, kAlreadyOnDevice };

// Copies the problem's lengths into their place in the workspace (nothing when all are T).
absl::Status RnnUploadLengths(Handle& handle, const RnnProblem& p, const RnnTensors& t);

absl::Status RnnForwardCall(Handle& handle, const RnnProblem& p, RnnForwardMode mode,
                            const RnnTensors& t, RnnLengths lengths);
absl::Status RnnBackwardDataCall(Handle& handle, const RnnProblem& p, const RnnTensors& t,
                                 RnnLengths lengths);
absl::Status RnnBackwardWeightsCall(Handle& handle, const RnnProblem& p, const RnnTensors& t,
                                    RnnLengths lengths);

}  // namespace dnn
}  // namespace kiln

#endif  // KILN_DNN_CUDA_RNN_RNN_CALLS_H_
