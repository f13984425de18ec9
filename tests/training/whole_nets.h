// Small Caffe nets for whole-network checks, and their preparation: imported for TRAIN, every
// learnable blob made a graph input, the backward of the loss built by BuildBackward, compiled
// into one plan that outputs the loss ("objective") and the gradient of every checked input
// ("grad/<input>"). whole_net_gradient_test.cc checks the reference backend's plan against finite
// differences; whole_net_cuda_test.cc checks the CUDA backend's plan against the reference's.
#ifndef KILN_TESTS_TRAINING_WHOLE_NETS_H_
#define KILN_TESTS_TRAINING_WHOLE_NETS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "ir/host_tensor.h"
#include "runtime/compiler.h"
#include "runtime/executor.h"

namespace kiln {
namespace testing {

// LeNet's structure at a small size: two convolution + max-pooling stages, a hidden layer with
// an in-place ReLU, a classifier and the softmax loss.
extern const char kLenet[];
// A residual block with batch statistics (BatchNorm in training mode, Scale, Eltwise SUM).
extern const char kResidual[];
// Caffe's sequence layers: Embed, Tile, an LSTM with cont markers and a static input, an RNN,
// a per-step InnerProduct (axis 2) and SoftmaxWithLoss over axis 2 with an ignore_label.
extern const char kRecurrent[];
// A CTC head: InnerProducts over axis 2 and the CTCLoss layer over ragged lengths.
extern const char kCtc[];

struct MaxPoolWatch {
  std::string output;
  std::vector<int64_t> in_dims, out_dims, kernel, stride, pad;
};

// A net ready for checking: one plan computing the loss and the gradient of every checked input.
struct CheckedNet {
  std::unique_ptr<ExecutionPlan> plan;
  std::unique_ptr<ExecutionContext> ctx;
  std::map<std::string, HostTensor> bindings;
  std::vector<std::string> checked;   // graph inputs whose gradients are checked
  std::vector<std::string> relu_ins;  // outputs holding every ReLU's input
  std::vector<MaxPoolWatch> pools;
  int affine_batchnorms = 0;  // AffineBatchNorm nodes after the optional fusion
};

// Imports `text` for TRAIN with fillers seeded by `seed`, promotes every learnable blob to an
// input "param/<node>", keeps the inputs of ReLUs and max poolings visible, adds the backward of
// the loss and compiles it for `backend` (a CUDA plan in strict f32). With `fuse`, the training
// forward pipeline (BatchNorm + Scale as AffineBatchNorm) runs before the backward. The bindings
// (data, labels, parameters) depend on `text` and `seed` only, not on the backend.
absl::Status Prepare(const char* text, uint64_t seed, CheckedNet& out, bool fuse,
                     BackendChoice backend = BackendChoice::kReference);

}  // namespace testing
}  // namespace kiln

#endif  // KILN_TESTS_TRAINING_WHOLE_NETS_H_
