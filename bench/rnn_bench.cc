// RNN benchmark, Kiln's side: times the GPU RNN primitives (dnn/cuda/rnn/rnn.h) on the rows
// given, in inference (forward) and training (forward + backward data + backward weights), and
// prints one JSON object per measurement. bench/rnn_bench.py runs it beside PyTorch's nn.LSTM /
// nn.GRU (cuDNN) and makes the table.
//
//   rnn_bench --rows=lstm:512:64:50:1,gru:1024:32:100:2 [--precisions=f32,tf32,f16]
//             [--modes=inference,training] [--iters=20]
//
// A row is cell:hidden:batch:seq:layers (input size = hidden, sequence-major, unidirectional).
// Times are wall time per call over --iters back-to-back calls on one stream, launches included,
// after kWarmup calls, the median of kRepeats such timings
// (a recurrent layer is hundreds of small launches; their cost is part of what a user waits):
// kiln_ms through an RnnPlan (a CUDA graph per call once the tensors repeat), kiln_direct_ms
// through the free functions (every kernel launched from the host).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "base/dtype.h"
#include "dnn/cuda/dnn_handle.h"
#include "dnn/cuda/rnn/rnn.h"
#include "dnn/cuda/rnn/rnn_plan.h"

namespace kiln {
namespace {

constexpr int kWarmup = 10;
constexpr int kRepeats = 5;

struct Row {
  std::string cell;
  int64_t hidden, batch, seq, layers;
};

bool ParseRows(const std::string& text, std::vector<Row>& rows) {
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    std::vector<std::string> f = absl::StrSplit(part, ':');
    Row r;
    if (f.size() != 5 || (f[0] != "lstm" && f[0] != "gru" && f[0] != "rnn_tanh") ||
        !absl::SimpleAtoi(f[1], &r.hidden) || !absl::SimpleAtoi(f[2], &r.batch) ||
        !absl::SimpleAtoi(f[3], &r.seq) || !absl::SimpleAtoi(f[4], &r.layers)) {
      std::fprintf(stderr, "rnn_bench: bad row '%s' (cell:hidden:batch:seq:layers)\n",
                   std::string(part).c_str());
      return false;
    }
    r.cell = f[0];
    rows.push_back(r);
  }
  return !rows.empty();
}

std::string Flag(int argc, char** argv, const std::string& name, const std::string& fallback) {
  const std::string prefix = "--" + name + "=";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind(prefix, 0) == 0) return a.substr(prefix.size());
  }
  return fallback;
}

#define BENCH_CUDA(call)                                                          \
  do {                                                                            \
    const cudaError_t e_ = (call);                                                \
    if (e_ != cudaSuccess) {                                                      \
      std::fprintf(stderr, "rnn_bench: %s: %s\n", #call, cudaGetErrorString(e_)); \
      return false;                                                               \
    }                                                                             \
  } while (0)

// Fills `count` elements of `dtype` at `dev` with uniform values in [-scale, scale].
bool FillRandom(void* dev, DataType dtype, size_t count, float scale, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<char> host(count * DataTypeSize(dtype));
  for (size_t i = 0; i < count; ++i) {
    const float v = u(rng);
    if (dtype == DataType::kF32) {
      std::memcpy(&host[i * 4], &v, 4);
    } else {
      const uint16_t h = dtype == DataType::kF16 ? FloatToHalf(v) : FloatToBFloat16(v);
      std::memcpy(&host[i * 2], &h, 2);
    }
  }
  BENCH_CUDA(cudaMemcpy(dev, host.data(), host.size(), cudaMemcpyHostToDevice));
  return true;
}

bool RunRow(dnn::Handle& handle, const Row& row, const std::string& precision,
            const std::string& mode, int iters) {
  dnn::RnnProblem p;
  const dnn::RnnCell cell = row.cell == "lstm"  ? dnn::RnnCell::kLstm
                            : row.cell == "gru" ? dnn::RnnCell::kGru
                                                : dnn::RnnCell::kRnnTanh;
  auto rnn = dnn::RnnDescriptor::Create(cell, row.hidden, row.hidden, row.layers);
  if (!rnn.ok()) {
    std::fprintf(stderr, "rnn_bench: %s\n", rnn.status().ToString().c_str());
    return false;
  }
  p.rnn = *rnn;
  p.dtype = precision == "f16" ? DataType::kF16 : DataType::kF32;
  p.math = precision == "tf32" ? dnn::MathMode::kTf32 : dnn::MathMode::kFp32;
  p.x = *dnn::RnnSequences::Create(dnn::RnnLayout::kSequenceMajor, row.seq, row.batch, row.hidden);
  p.y = p.x;
  auto sizes = dnn::RnnGetBufferSizes(p);
  if (!sizes.ok()) {
    std::fprintf(stderr, "rnn_bench: %s\n", sizes.status().ToString().c_str());
    return false;
  }
  const size_t e = DataTypeSize(p.dtype);
  const size_t xs = p.x.elements(), states = dnn::RnnStateCount(p.rnn, row.batch);
  const size_t ws_count = dnn::RnnWeightCount(p.rnn);
  std::vector<void*> owned;
  auto alloc = [&](size_t bytes) -> void* {
    void* ptr = nullptr;
    if (cudaMalloc(&ptr, bytes > 0 ? bytes : 1) != cudaSuccess) return nullptr;
    owned.push_back(ptr);
    return ptr;
  };
  dnn::RnnTensors t;
  void* x = alloc(xs * e);
  void* w = alloc(ws_count * e);
  void* dy = alloc(xs * e);
  t.x = x, t.y = alloc(xs * e), t.w = w, t.dy = dy, t.dx = alloc(xs * e),
  t.dw = alloc(ws_count * e);
  t.hx = alloc(states * e), t.cx = alloc(states * e), t.hy = alloc(states * e);
  t.cy = alloc(states * e);
  t.workspace = alloc(sizes->workspace), t.workspace_bytes = sizes->workspace;
  const bool training = mode == "training";
  t.reserve = training ? alloc(sizes->reserve) : nullptr;
  t.reserve_bytes = training ? sizes->reserve : 0;
  bool ok = std::all_of(owned.begin(), owned.end(), [](void* v) { return v != nullptr; });
  std::mt19937 rng(7);
  const float wscale = 1.f / std::sqrt(static_cast<float>(row.hidden));
  ok = ok && FillRandom(x, p.dtype, xs, 1, rng) && FillRandom(w, p.dtype, ws_count, wscale, rng) &&
       FillRandom(dy, p.dtype, xs, 1, rng) && FillRandom(t.dw, p.dtype, ws_count, 0, rng) &&
       FillRandom(const_cast<void*>(t.hx), p.dtype, states, 0.5f, rng) &&
       FillRandom(const_cast<void*>(t.cx), p.dtype, states, 0.5f, rng);
  auto plan = dnn::RnnPlan::Create(p);
  ok = ok && plan.ok();
  // One call: through the plan (a CUDA graph from the second call on), or the free functions.
  auto once = [&](bool direct) {
    if (!direct) {
      if (!training) return (*plan)->Forward(handle, dnn::RnnForwardMode::kInference, t);
      absl::Status s = (*plan)->Forward(handle, dnn::RnnForwardMode::kTraining, t);
      if (s.ok()) s = (*plan)->BackwardData(handle, t);
      if (s.ok()) s = (*plan)->BackwardWeights(handle, t);
      return s;
    }
    if (!training) return dnn::RnnForward(handle, p, dnn::RnnForwardMode::kInference, t);
    absl::Status s = dnn::RnnForward(handle, p, dnn::RnnForwardMode::kTraining, t);
    if (s.ok()) s = dnn::RnnBackwardData(handle, p, t);
    if (s.ok()) s = dnn::RnnBackwardWeights(handle, p, t);
    return s;
  };
  // Milliseconds per call, or -1 when a call fails (its message printed).
  auto time = [&](bool direct) -> double {
    absl::Status s;
    for (int i = 0; i < kWarmup && s.ok(); ++i) s = once(direct);  // cuBLAS, the graph
    if (s.ok() && cudaDeviceSynchronize() != cudaSuccess) {
      s = absl::InternalError("cudaDeviceSynchronize after the warm-up failed");
    }
    if (!s.ok()) {
      std::fprintf(stderr, "rnn_bench: %s: %s\n", direct ? "direct" : "plan", s.ToString().c_str());
      cudaGetLastError();
      return -1;
    }
    // The median of kRepeats timings of `iters` back-to-back calls: one slow repeat (a clock
    // ramp, another process) does not move it.
    std::vector<double> per_call;
    for (int r = 0; r < kRepeats; ++r) {
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < iters && s.ok(); ++i) s = once(direct);
      if (!s.ok() || cudaDeviceSynchronize() != cudaSuccess) {
        std::fprintf(stderr, "rnn_bench: %s: %s\n", direct ? "direct" : "plan",
                     s.ToString().c_str());
        cudaGetLastError();
        return -1;
      }
      per_call.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count() /
          iters);
    }
    std::sort(per_call.begin(), per_call.end());
    return per_call[per_call.size() / 2];
  };
  // Direct first: a plan that fails (its graph path) does not cost the row its direct time.
  double ms = -1, direct_ms = -1;
  if (ok) {
    direct_ms = time(true);
    ms = direct_ms > 0 ? time(false) : -1;
    ok = direct_ms > 0;
  }
  for (void* v : owned) cudaFree(v);
  if (!ok) {
    std::fprintf(stderr, "rnn_bench: %s %lld failed\n", row.cell.c_str(),
                 static_cast<long long>(row.hidden));
    return false;
  }
  std::printf(
      "{\"cell\": \"%s\", \"hidden\": %lld, \"batch\": %lld, \"seq\": %lld, \"layers\": %lld, "
      "\"precision\": \"%s\", \"mode\": \"%s\", \"kiln_ms\": %.4f, \"kiln_direct_ms\": %.4f}\n",
      row.cell.c_str(), static_cast<long long>(row.hidden), static_cast<long long>(row.batch),
      static_cast<long long>(row.seq), static_cast<long long>(row.layers), precision.c_str(),
      mode.c_str(), ms, direct_ms);
  std::fflush(stdout);
  return true;
}

int Main(int argc, char** argv) {
  std::vector<Row> rows;
  if (!ParseRows(Flag(argc, argv, "rows", "lstm:512:64:50:1"), rows)) return 2;
  int iters = 20;
  if (!absl::SimpleAtoi(Flag(argc, argv, "iters", "20"), &iters) || iters < 1) {
    std::fprintf(stderr, "rnn_bench: --iters must be a positive integer\n");
    return 2;
  }
  auto handle = dnn::Handle::Create();
  if (!handle.ok()) {
    std::fprintf(stderr, "rnn_bench: %s\n", handle.status().ToString().c_str());
    return 1;
  }
  bool ok = true;
  for (absl::string_view mode :
       absl::StrSplit(Flag(argc, argv, "modes", "inference,training"), ',', absl::SkipEmpty())) {
    for (absl::string_view prec :
         absl::StrSplit(Flag(argc, argv, "precisions", "f32,tf32,f16"), ',', absl::SkipEmpty())) {
      if ((prec != "f32" && prec != "tf32" && prec != "f16") ||
          (mode != "inference" && mode != "training")) {
        std::fprintf(stderr,
                     "rnn_bench: precision %s / mode %s (use f32, tf32, f16 / "
                     "inference, training)\n",
                     std::string(prec).c_str(), std::string(mode).c_str());
        return 2;
      }
      for (const Row& row : rows) {
        ok = RunRow(**handle, row, std::string(prec), std::string(mode), iters) && ok;
      }
    }
  }
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace kiln

int main(int argc, char** argv) { return kiln::Main(argc, argv); }
