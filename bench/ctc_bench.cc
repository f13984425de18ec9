// CTC loss benchmark, Kiln's side: times the GPU CTC loss (dnn/cuda/ctc/ctc_loss.h) in training
// form (the mean loss and its gradient with respect to the logits, as nn.CTCLoss(reduction=
// 'mean') after a log_softmax) and prints one JSON object per row and precision.
// bench/ctc_bench.py runs it beside PyTorch's F.ctc_loss and makes the table.
//
//   ctc_bench --rows=1000:32:30:ragged,1000:64:5000:full [--precisions=f32,f16]
//             [--label-lengths=20:100] [--iters=20]
//
// A row is T:N:C:lengths, lengths `ragged` (input_lengths[n] in [T - T/5, T]) or `full` (all T,
// the only case PyTorch hands to cuDNN). Blank is class 0, labels are in [1, C).
// Every input is a pure function of the row, computed from a 32-bit integer hash that
// bench/ctc_bench.py reproduces bit for bit (Draw below), so both sides see the same logits and
// labels without moving gigabytes through files; the printed loss and gradient norm let the
// driver check that the two sides agree.
// Times are wall time per call over --iters back-to-back calls on one stream after warm-up: the
// call's host part (validation, label tables, the copies into the workspace) is part of what a
// training step waits for, as PyTorch's host work is on its side.
#include <cuda_runtime_api.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "base/dtype.h"
#include "dnn/ctc/ctc_loss.h"
#include "dnn/cuda/ctc/ctc_loss.h"
#include "dnn/cuda/dnn_handle.h"

namespace kiln {
namespace {

constexpr char kUsage[] =
    "usage: ctc_bench [--rows=T:N:C:ragged|full,...] [--precisions=f32,f16]\n"
    "                 [--label-lengths=MIN:MAX] [--iters=20]\n"
    "Times Kiln's CTC loss + logit gradient (reduction mean by target length, blank 0) and\n"
    "prints one JSON object per row and precision. bench/ctc_bench.py is the driver.\n";

struct Row {
  int64_t time, batch, classes;
  bool ragged;
};

std::string Flag(int argc, char** argv, const std::string& name, const std::string& fallback) {
  const std::string prefix = "--" + name + "=";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind(prefix, 0) == 0) return a.substr(prefix.size());
  }
  return fallback;
}

bool ParseRows(const std::string& text, std::vector<Row>& rows) {
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    std::vector<std::string> f = absl::StrSplit(part, ':');
    Row r;
    if (f.size() != 4 || !absl::SimpleAtoi(f[0], &r.time) || !absl::SimpleAtoi(f[1], &r.batch) ||
        !absl::SimpleAtoi(f[2], &r.classes) || (f[3] != "ragged" && f[3] != "full") || r.time < 1 ||
        r.batch < 1 || r.classes < 2) {
      std::fprintf(stderr, "ctc_bench: bad row '%s' (T:N:C:ragged|full, C >= 2)\n",
                   std::string(part).c_str());
      return false;
    }
    // The hash indexes logits with 32 bits.
    if (r.time * r.batch * r.classes > (int64_t{1} << 32)) {
      std::fprintf(stderr, "ctc_bench: row '%s' has more than 2^32 logits\n",
                   std::string(part).c_str());
      return false;
    }
    r.ragged = f[3] == "ragged";
    rows.push_back(r);
  }
  return !rows.empty();
}

// The input generator, mirrored by mix()/draw() in bench/ctc_bench.py. Both multipliers are
// below 2^31 so that Python can run the same steps on int64 tensors without overflow.
uint32_t Mix(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x2c1b3c6du;
  x ^= x >> 16;
  return x;
}
enum Stream : uint32_t { kLogits = 1, kLabelLengths = 2, kLabels = 3, kInputLengths = 4 };
uint32_t Draw(Stream stream, uint32_t index) { return Mix(index ^ Mix(stream)); }

// Logit i of the [T, N, C] array: uniform on [-4, 4) in steps of 2^-21. The integer and the
// power-of-two scale are exact in float32, so no rounding mode or FMA can make the sides differ.
float Logit(uint32_t i) {
  const int32_t k = static_cast<int32_t>(Draw(kLogits, i) >> 8) - (1 << 23);
  return static_cast<float>(k) * (1.0f / 2097152.0f);
}

struct Labels {
  std::vector<int32_t> labels, label_lengths, input_lengths;
};

Labels MakeLabels(const Row& row, int32_t min_label, int32_t max_label) {
  Labels l;
  const uint32_t span = static_cast<uint32_t>(max_label - min_label + 1);
  const uint32_t slack = static_cast<uint32_t>(row.time / 5 + 1);
  for (int64_t n = 0; n < row.batch; ++n) {
    const uint32_t u = static_cast<uint32_t>(n);
    l.label_lengths.push_back(min_label + static_cast<int32_t>(Draw(kLabelLengths, u) % span));
    l.input_lengths.push_back(
        static_cast<int32_t>(row.ragged ? row.time - Draw(kInputLengths, u) % slack : row.time));
  }
  const uint32_t classes = static_cast<uint32_t>(row.classes - 1);
  for (int32_t L : l.label_lengths) {
    for (int32_t i = 0; i < L; ++i) {
      const uint32_t k = static_cast<uint32_t>(l.labels.size());
      l.labels.push_back(1 + static_cast<int32_t>(Draw(kLabels, k) % classes));
    }
  }
  return l;
}

#define BENCH_CUDA(call)                                                          \
  do {                                                                            \
    const cudaError_t e_ = (call);                                                \
    if (e_ != cudaSuccess) {                                                      \
      std::fprintf(stderr, "ctc_bench: %s: %s\n", #call, cudaGetErrorString(e_)); \
      return false;                                                               \
    }                                                                             \
  } while (0)

// A device allocation freed on every return path.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr_ != nullptr && cudaFree(ptr_) != cudaSuccess) {
      std::fprintf(stderr, "ctc_bench: cudaFree failed\n");
    }
  }
  bool Allocate(size_t bytes) {
    BENCH_CUDA(cudaMalloc(&ptr_, bytes > 0 ? bytes : 1));
    return true;
  }
  void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
};

bool PrintStatus(const absl::Status& s) {
  if (!s.ok()) std::fprintf(stderr, "ctc_bench: %s\n", s.ToString().c_str());
  return s.ok();
}

// A JSON number, or null: printf's "inf"/"nan" are not JSON.
std::string JsonNumber(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

bool RunRow(dnn::Handle& handle, const Row& row, DataType dtype, const char* precision,
            int32_t min_label, int32_t max_label, int iters) {
  const Labels l = MakeLabels(row, min_label, max_label);
  dnn::CtcLossDescriptor desc;
  desc.blank = 0;
  desc.inputs_are_log_probs = false;  // logits: log_softmax inside, as PyTorch's log_softmax
  desc.reduction = dnn::CtcReduction::kMeanByTargetLength;  // reduction='mean'
  dnn::CtcLossInputs in;
  in.dtype = dtype;
  in.max_time = row.time;
  in.batch = row.batch;
  in.classes = row.classes;
  in.labels = l.labels;
  in.label_lengths = l.label_lengths;
  in.input_lengths = l.input_lengths;
  if (!PrintStatus(dnn::CheckCtcLoss(desc, in, "ctc_bench"))) return false;
  const absl::StatusOr<size_t> ws_bytes = dnn::CtcLossWorkspaceBytes(desc, in);
  if (!PrintStatus(ws_bytes.status())) return false;

  const size_t count = static_cast<size_t>(row.time * row.batch * row.classes);
  const size_t esize = DataTypeSize(dtype);
  // Host staging for the logits, reused for the gradient coming back.
  std::vector<char> host(count * esize);
  for (size_t i = 0; i < count; ++i) {
    const float v = Logit(static_cast<uint32_t>(i));
    if (dtype == DataType::kF32) {
      std::memcpy(&host[i * 4], &v, 4);
    } else {
      const uint16_t h = FloatToHalf(v);
      std::memcpy(&host[i * 2], &h, 2);
    }
  }
  DeviceBuffer activations, grad, losses, workspace;
  if (!activations.Allocate(count * esize) || !grad.Allocate(count * esize) ||
      !losses.Allocate(sizeof(float)) || !workspace.Allocate(*ws_bytes)) {
    return false;
  }
  BENCH_CUDA(cudaMemcpy(activations.get(), host.data(), host.size(), cudaMemcpyHostToDevice));
  auto once = [&]() {
    return dnn::CtcLoss(handle, desc, in, activations.get(), static_cast<float*>(losses.get()),
                        grad.get(), workspace.get(), *ws_bytes);
  };
  for (int i = 0; i < 3; ++i) {
    if (!PrintStatus(once())) return false;
  }
  BENCH_CUDA(cudaDeviceSynchronize());
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) {
    if (!PrintStatus(once())) return false;
  }
  BENCH_CUDA(cudaDeviceSynchronize());
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() /
      iters;

  // The last call's results (the call is deterministic) for the driver's agreement check.
  float loss = 0;
  BENCH_CUDA(cudaMemcpy(&loss, losses.get(), sizeof(float), cudaMemcpyDeviceToHost));
  BENCH_CUDA(cudaMemcpy(host.data(), grad.get(), host.size(), cudaMemcpyDeviceToHost));
  double sum_sq = 0;
  for (size_t i = 0; i < count; ++i) {
    float g;
    if (dtype == DataType::kF32) {
      std::memcpy(&g, &host[i * 4], 4);
    } else {
      uint16_t h;
      std::memcpy(&h, &host[i * 2], 2);
      g = HalfToFloat(h);
    }
    sum_sq += static_cast<double>(g) * g;
  }
  std::printf(
      "{\"T\": %lld, \"batch\": %lld, \"classes\": %lld, \"lengths\": \"%s\", "
      "\"precision\": \"%s\", \"kiln_ms\": %.4f, \"loss\": %s, \"grad_norm\": %s, "
      "\"workspace_bytes\": %zu}\n",
      static_cast<long long>(row.time), static_cast<long long>(row.batch),
      static_cast<long long>(row.classes), row.ragged ? "ragged" : "full", precision, ms,
      JsonNumber(loss).c_str(), JsonNumber(std::sqrt(sum_sq)).c_str(), *ws_bytes);
  std::fflush(stdout);
  return true;
}

int Main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::fputs(kUsage, stdout);
      return 0;
    }
  }
  std::vector<Row> rows;
  if (!ParseRows(Flag(argc, argv, "rows", "1000:32:100:ragged"), rows)) return 2;
  int iters = 20;
  if (!absl::SimpleAtoi(Flag(argc, argv, "iters", "20"), &iters) || iters < 1) {
    std::fprintf(stderr, "ctc_bench: --iters must be a positive integer\n");
    return 2;
  }
  std::vector<std::string> range = absl::StrSplit(Flag(argc, argv, "label-lengths", "20:100"), ':');
  int32_t min_label = 0, max_label = 0;
  if (range.size() != 2 || !absl::SimpleAtoi(range[0], &min_label) ||
      !absl::SimpleAtoi(range[1], &max_label) || min_label < 0 || max_label < min_label ||
      max_label > dnn::kCtcMaxLabelLength) {
    std::fprintf(stderr, "ctc_bench: --label-lengths is MIN:MAX, 0 <= MIN <= MAX <= %d\n",
                 dnn::kCtcMaxLabelLength);
    return 2;
  }
  // Every sample keeps a finite loss: even a label of one repeated class (needing 2L - 1
  // frames) fits in the shortest ragged input.
  for (const Row& row : rows) {
    if (2 * int64_t{max_label} >= row.time - row.time / 5) {
      std::fprintf(stderr, "ctc_bench: labels up to %d need 2 MAX < T - T/5 (row T=%lld)\n",
                   max_label, static_cast<long long>(row.time));
      return 2;
    }
  }
  std::vector<std::pair<std::string, DataType>> precisions;
  for (absl::string_view p :
       absl::StrSplit(Flag(argc, argv, "precisions", "f32,f16"), ',', absl::SkipEmpty())) {
    if (p != "f32" && p != "f16") {
      std::fprintf(stderr, "ctc_bench: precision %s (use f32, f16)\n", std::string(p).c_str());
      return 2;
    }
    precisions.emplace_back(std::string(p), p == "f32" ? DataType::kF32 : DataType::kF16);
  }
  auto handle = dnn::Handle::Create();
  if (!handle.ok()) {
    std::fprintf(stderr, "ctc_bench: %s\n", handle.status().ToString().c_str());
    return 1;
  }
  bool ok = true;
  for (const auto& [name, dtype] : precisions) {
    for (const Row& row : rows) {
      if (!RunRow(**handle, row, dtype, name.c_str(), min_label, max_label, iters)) {
        std::fprintf(stderr, "ctc_bench: row %lld:%lld:%lld:%s %s failed\n",
                     static_cast<long long>(row.time), static_cast<long long>(row.batch),
                     static_cast<long long>(row.classes), row.ragged ? "ragged" : "full",
                     name.c_str());
        ok = false;
      }
    }
  }
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace kiln

int main(int argc, char** argv) { return kiln::Main(argc, argv); }
