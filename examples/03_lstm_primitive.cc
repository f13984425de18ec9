// Example 3: the LSTM primitive without a graph, cuDNN-style. A 2-layer bidirectional LSTM over
// a batch of 4 padded sequences of different lengths: the CPU reference computes it everywhere;
// where a GPU is usable, an RnnPlan runs the same forward three times in f32 (the third call is
// one CUDA graph launch) and the example prints the largest difference from the reference.
//
//   bazel run //examples:03_lstm_primitive
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "dnn/cuda/dnn_handle.h"
#include "dnn/cuda/rnn/rnn.h"
#include "dnn/cuda/rnn/rnn_plan.h"
#include "dnn/rnn/rnn_reference.h"

namespace {

using namespace kiln::dnn;  // NOLINT: an example reads better with the library's names bare

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "03_lstm_primitive: %s\n", s.ToString().c_str());
  return 1;
}

// Runs the plan on the GPU and returns max |gpu - reference| over y, or -1 without a GPU.
absl::StatusOr<double> OnGpu(const RnnProblem& p, const std::vector<float>& x,
                             const std::vector<float>& w, const std::vector<double>& y_ref) {
  absl::StatusOr<std::unique_ptr<Handle>> handle = Handle::Create();
  if (!handle.ok()) return -1.0;  // no usable device: the reference result stands alone
  absl::StatusOr<std::unique_ptr<RnnPlan>> plan = RnnPlan::Create(p);
  if (!plan.ok()) return plan.status();
  const RnnBufferSizes sizes = (*plan)->sizes();
  void *dx = nullptr, *dw = nullptr, *dy = nullptr, *ws = nullptr;
  auto cleanup = [&] {
    for (void* v : {dx, dw, dy, ws}) cudaFree(v);
  };
  if (cudaMalloc(&dx, x.size() * 4) != cudaSuccess ||
      cudaMalloc(&dw, w.size() * 4) != cudaSuccess ||
      cudaMalloc(&dy, y_ref.size() * 4) != cudaSuccess ||
      cudaMalloc(&ws, std::max<size_t>(sizes.workspace, 1)) != cudaSuccess ||
      cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice) != cudaSuccess ||
      cudaMemcpy(dw, w.data(), w.size() * 4, cudaMemcpyHostToDevice) != cudaSuccess) {
    cleanup();
    return absl::InternalError("CUDA allocation or copy failed");
  }
  RnnTensors t;
  t.x = dx, t.y = dy, t.w = dw, t.workspace = ws, t.workspace_bytes = sizes.workspace;
  for (int call = 0; call < 3; ++call) {
    absl::Status s = (*plan)->Forward(**handle, RnnForwardMode::kInference, t);
    if (!s.ok()) {
      cleanup();
      return s;
    }
  }
  std::vector<float> y(y_ref.size());
  const bool copied = cudaMemcpy(y.data(), dy, y.size() * 4, cudaMemcpyDeviceToHost) == cudaSuccess;
  cleanup();
  if (!copied) return absl::InternalError("CUDA copy back failed");
  std::printf("GPU: 3 calls, %lld as a CUDA graph launch\n",
              static_cast<long long>((*plan)->graph_launches()));
  double worst = 0;
  for (size_t i = 0; i < y.size(); ++i) worst = std::max(worst, std::abs(y[i] - y_ref[i]));
  return worst;
}

}  // namespace

int main() {
  const int64_t T = 6, N = 4, I = 10, H = 16;
  absl::StatusOr<RnnDescriptor> rnn =
      RnnDescriptor::Create(RnnCell::kLstm, I, H, /*layers=*/2, /*bidirectional=*/true);
  if (!rnn.ok()) return Fail(rnn.status());
  // Lengths 6, 4, 1 and 3: the padding of y comes out zero, each final state is the one after
  // its sequence's own last element (the reverse direction starts there).
  const std::vector<int32_t> lengths = {6, 4, 1, 3};
  RnnProblem p;
  p.rnn = *rnn;
  p.x = *RnnSequences::Create(RnnLayout::kSequenceMajor, T, N, I, lengths);
  p.y = *RnnSequences::Create(RnnLayout::kSequenceMajor, T, N, 2 * H, lengths);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1), uw(-0.25f, 0.25f);
  std::vector<float> x(p.x.elements()), w(RnnWeightCount(p.rnn));
  for (float& v : x) v = u(rng);
  for (float& v : w) v = uw(rng);
  const std::vector<double> xd(x.begin(), x.end()), wd(w.begin(), w.end());
  std::vector<double> y(p.y.elements()), hy(RnnStateCount(p.rnn, N));
  absl::Status s = reference::RnnForward(p.rnn, /*training=*/false, p.x, xd.data(), p.y, y.data(),
                                         nullptr, nullptr, wd.data(), nullptr, hy.data(), nullptr);
  if (!s.ok()) return Fail(s);
  std::printf("%s over %s: %lld weights\n", p.rnn.ToString().c_str(), p.x.ToString().c_str(),
              static_cast<long long>(w.size()));
  std::printf("reference y[t=0, n=0, 0..3] = %.5f %.5f %.5f %.5f\n", y[0], y[1], y[2], y[3]);
  absl::StatusOr<double> worst = OnGpu(p, x, w, y);
  if (!worst.ok()) return Fail(worst.status());
  if (*worst < 0) {
    std::printf("no usable CUDA device: the reference result only\n");
  } else {
    std::printf("largest |GPU - reference| over y: %.2e\n", *worst);
    if (*worst > 1e-4) return Fail(absl::InternalError("the GPU result differs"));
  }
  return 0;
}
