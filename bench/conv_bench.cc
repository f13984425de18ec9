// Convolution benchmark: every Kiln algorithm on the eight shapes, per direction and math
// mode, timed with CUDA events (a 3-run screen of each algorithm, then warm-up + median of
// --repeats for the fastest), next to cuDNN's best algorithm (FindEx, then the same timing) on the
// same buffers when libcudnn.so.9 can be loaded. Also reports the relative L2 difference between
// Kiln's and cuDNN's outputs. Prints one table row per (mode, shape, direction), then geometric
// means of the speed ratio cuDNN time / Kiln time.
//
//   conv_bench [--modes=fp32,tf32,f16] [--shapes=0,1,...] [--repeats=20] [--algos=fft,gemm,...]
//
// --algos limits Kiln's side to the named algorithms (for profiling one of them).
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/cudnn_loader.h"
#include "bench/event_timer.h"
#include "base/dtype.h"
#include "dnn/cuda/conv/convolution.h"

namespace kiln {
namespace {

using bench::MedianMs;
using dnn::ConvAlgo;
using dnn::ConvDirection;

struct Shape {
  int64_t n, c, h, w, k, r, s, stride, pad;
};
// (N, C, H, W, K, RxS, stride, pad) from the convolution issue.
const Shape kShapes[] = {{128, 96, 221, 221, 256, 7, 7, 2, 0},
                         {128, 3, 227, 227, 96, 11, 11, 4, 0},
                         {128, 96, 27, 27, 256, 5, 5, 1, 2},
                         {128, 256, 13, 13, 384, 3, 3, 1, 1},
                         {64, 64, 56, 56, 64, 3, 3, 1, 1},
                         {64, 256, 56, 56, 64, 1, 1, 1, 0},
                         {64, 256, 14, 14, 256, 3, 3, 1, 1},
                         {64, 512, 7, 7, 512, 3, 3, 1, 1},
                         // ResNet's first layer (3 channels, 7x7, stride 2), not in the issue's
                         // list: timed on demand (--shapes=8).
                         {64, 3, 224, 224, 64, 7, 7, 2, 3},
                         // ResNet-18's stride-2 3x3 layers, its 1x1 shortcuts and res2a's 1x1
                         // projection (--shapes=9..15): the layers that fall to the GEMM kernels.
                         {64, 64, 56, 56, 128, 3, 3, 2, 1},
                         {64, 128, 28, 28, 256, 3, 3, 2, 1},
                         {64, 256, 14, 14, 512, 3, 3, 2, 1},
                         {64, 64, 56, 56, 128, 1, 1, 2, 0},
                         {64, 128, 28, 28, 256, 1, 1, 2, 0},
                         {64, 256, 14, 14, 512, 1, 1, 2, 0},
                         {64, 64, 56, 56, 64, 1, 1, 1, 0},
                         // FCN-8s at batch 4 (--shapes=16..20): 3x3 layers over the 500x500
                         // image padded by 100, and upscore8, the 16x16 stride-8 deconvolution
                         // (its backward data: x is the 568x568 upsampled score map).
                         {4, 64, 698, 698, 64, 3, 3, 1, 1},
                         {4, 128, 349, 349, 128, 3, 3, 1, 1},
                         {4, 256, 175, 175, 256, 3, 3, 1, 1},
                         {4, 512, 88, 88, 512, 3, 3, 1, 1},
                         {4, 21, 568, 568, 21, 16, 16, 8, 0},
                         // FCN-8s's conv1_1 (--shapes=21): 3 channels padded by 100.
                         {4, 3, 500, 500, 64, 3, 3, 1, 100}};
constexpr int kShapeCount = sizeof(kShapes) / sizeof(kShapes[0]);

struct Mode {
  std::string name;
  DataType dtype;
  dnn::MathMode math;
  dnn::TensorFormat format;
  bool backward;  // f16 is benchmarked forward only, as the targets
};
const Mode kModes[] = {
    {"fp32", DataType::kF32, dnn::MathMode::kFp32, dnn::TensorFormat::kNCHW, true},
    {"tf32", DataType::kF32, dnn::MathMode::kTf32, dnn::TensorFormat::kNCHW, true},
    {"f16", DataType::kF16, dnn::MathMode::kFp32, dnn::TensorFormat::kNHWC, false},
    // f16 with the two backward directions too, as training runs them (on demand).
    {"f16_train", DataType::kF16, dnn::MathMode::kFp32, dnn::TensorFormat::kNHWC, true}};

#define CHECK_CUDA(call)                                                          \
  do {                                                                            \
    cudaError_t e_ = (call);                                                      \
    if (e_ != cudaSuccess) {                                                      \
      std::fprintf(stderr, "%s failed at %s:%d: %s\n", #call, __FILE__, __LINE__, \
                   cudaGetErrorString(e_));                                       \
      std::exit(1);                                                               \
    }                                                                             \
  } while (0)

// Fills a device buffer with uniform [-1, 1) values (a 4M-value random block, repeated).
void FillRandom(void* dst, int64_t count, DataType dtype, uint32_t seed) {
  const int64_t block = std::min<int64_t>(count, 1 << 22);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const size_t es = dtype == DataType::kF32 ? 4 : 2;
  std::vector<unsigned char> host(block * es);
  for (int64_t i = 0; i < block; ++i) {
    const float v = dist(rng);
    if (dtype == DataType::kF32) {
      std::memcpy(&host[i * 4], &v, 4);
    } else {
      const uint16_t b = dtype == DataType::kF16 ? FloatToHalf(v) : FloatToBFloat16(v);
      std::memcpy(&host[i * 2], &b, 2);
    }
  }
  for (int64_t off = 0; off < count; off += block) {
    const int64_t n = std::min(block, count - off);
    CHECK_CUDA(cudaMemcpy(static_cast<char*>(dst) + off * es, host.data(), n * es,
                          cudaMemcpyHostToDevice));
  }
}

// ||a - b|| / ||b|| over `count` elements, with cuBLAS (b is overwritten).
double RelativeL2(cublasHandle_t cublas, DataType dtype, const void* a, void* b, int64_t count) {
  const bool f32 = dtype == DataType::kF32;
  // A 16-bit norm of a large tensor overflows: compare the first million elements there.
  if (!f32) count = std::min<int64_t>(count, 1 << 20);
  const cudaDataType_t t = f32 ? CUDA_R_32F : CUDA_R_16F;
  // cuBLAS returns a 16-bit input's norm in the input's type.
  auto norm = [&](const void* x, double* out) {
    float f = 0;
    uint16_t h = 0;
    if (cublasNrm2Ex(cublas, count, x, t, 1, f32 ? static_cast<void*>(&f) : &h, t, CUDA_R_32F) != 0)
      return false;
    *out = f32 ? f : HalfToFloat(h);
    return true;
  };
  double norm_b = 0, norm_diff = 0;
  const float minus_one = -1.0f;
  if (!norm(b, &norm_b)) return -1;
  if (cublasAxpyEx(cublas, count, &minus_one, CUDA_R_32F, a, t, 1, b, t, 1, CUDA_R_32F) != 0)
    return -1;
  if (!norm(b, &norm_diff)) return -1;
  return norm_b > 0 ? norm_diff / norm_b : -1;
}

struct Row {
  std::string mode, dir, kiln_algo, cudnn_algo;
  int shape;
  float kiln_ms, cudnn_ms;
  double tflops, rel_err;
};

}  // namespace
}  // namespace kiln

int main(int argc, char** argv) {
  using namespace kiln;
  std::vector<std::string> modes = {"fp32", "tf32", "f16"};
  std::vector<int> shapes = {0, 1, 2, 3, 4, 5, 6, 7};
  int repeats = 20;
  std::vector<dnn::ConvAlgo> algos(std::begin(dnn::kAllConvAlgos), std::end(dnn::kAllConvAlgos));
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--modes=", 0) == 0) {
      modes = absl::StrSplit(a.substr(8), ',');
    } else if (a.rfind("--shapes=", 0) == 0) {
      shapes.clear();
      for (absl::string_view s : absl::StrSplit(a.substr(9), ',')) {
        int v;
        if (!absl::SimpleAtoi(s, &v) || v < 0 || v >= kShapeCount) {
          std::fprintf(stderr, "bad shape index '%s'\n", std::string(s).c_str());
          return 2;
        }
        shapes.push_back(v);
      }
    } else if (a.rfind("--repeats=", 0) == 0 && absl::SimpleAtoi(a.substr(10), &repeats) &&
               repeats >= 1) {
    } else if (a.rfind("--algos=", 0) == 0) {
      algos.clear();
      for (absl::string_view name : absl::StrSplit(a.substr(8), ',')) {
        auto algo = dnn::ParseConvAlgo(name);
        if (!algo.ok()) {
          std::fprintf(stderr, "%s\n", algo.status().ToString().c_str());
          return 2;
        }
        algos.push_back(*algo);
      }
    } else {
      std::fprintf(stderr,
                   "usage: conv_bench [--modes=fp32,tf32,f16,f16_train] [--shapes=0,..15] "
                   "[--repeats=N] [--algos=NAME,..]\n");
      return 2;
    }
  }
  auto handle_or = dnn::Handle::Create();
  if (!handle_or.ok()) {
    std::fprintf(stderr, "%s\n", handle_or.status().ToString().c_str());
    return 1;
  }
  dnn::Handle& handle = **handle_or;
  cudaStream_t stream = nullptr;
  bench::Cudnn cudnn = bench::LoadCudnn();
  bench::cudnnHandle cudnn_handle = nullptr;
  if (cudnn.loaded && cudnn.Create(&cudnn_handle) != 0) {
    cudnn.loaded = false;
    cudnn.error = "cudnnCreate failed";
  }
  if (cudnn.loaded) {
    std::printf("cuDNN %zu loaded from %s\n", cudnn.GetVersion(), cudnn.path.c_str());
  } else {
    std::printf("cuDNN not loaded (%s): Kiln times only\n", cudnn.error.c_str());
  }
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  constexpr size_t kWorkspaceLimit = size_t{8} << 30;
  void* workspace = nullptr;
  CHECK_CUDA(cudaMalloc(&workspace, kWorkspaceLimit));

  std::vector<Row> rows;
  for (const Mode& mode : kModes) {
    if (std::find(modes.begin(), modes.end(), mode.name) == modes.end()) continue;
    for (int si : shapes) {
      const Shape& s = kShapes[si];
      auto conv =
          *dnn::ConvolutionDescriptor::Create({s.pad, s.pad}, {s.stride, s.stride}, {1, 1}, 1,
                                              dnn::ConvolutionMode::kCrossCorrelation, mode.math);
      auto xd = *dnn::TensorDescriptor::CreatePacked(mode.dtype, mode.format, {s.n, s.c, s.h, s.w});
      auto wd = *dnn::FilterDescriptor::Create(mode.dtype, mode.format, {s.k, s.c, s.r, s.s});
      auto ydims = *dnn::ConvolutionOutputDims(xd, wd, conv);
      auto yd = *dnn::TensorDescriptor::CreatePacked(mode.dtype, mode.format, ydims);
      auto p = *dnn::MakeConvProblem(xd, wd, conv, yd, "bench");
      const size_t es = mode.dtype == DataType::kF32 ? 4 : 2;
      void *x, *w, *y, *out2;
      const int64_t biggest = std::max({p.x_span, p.y_span, p.w_count});
      CHECK_CUDA(cudaMalloc(&x, p.x_span * es));
      CHECK_CUDA(cudaMalloc(&w, p.w_count * es));
      CHECK_CUDA(cudaMalloc(&y, p.y_span * es));
      CHECK_CUDA(cudaMalloc(&out2, biggest * es));
      FillRandom(x, p.x_span, mode.dtype, 1 + si);
      FillRandom(w, p.w_count, mode.dtype, 101 + si);
      FillRandom(y, p.y_span, mode.dtype, 201 + si);
      std::vector<ConvDirection> dirs = {ConvDirection::kForward};
      if (mode.backward) {
        dirs.push_back(ConvDirection::kBackwardData);
        dirs.push_back(ConvDirection::kBackwardFilter);
      }
      for (ConvDirection dir : dirs) {
        Row row;
        row.mode = mode.name;
        row.dir = std::string(dnn::ConvDirectionName(dir));
        row.shape = si;
        void* out =
            dir == ConvDirection::kForward ? y : (dir == ConvDirection::kBackwardData ? x : w);
        const int64_t out_count =
            dir == ConvDirection::kForward
                ? p.y_span
                : (dir == ConvDirection::kBackwardData ? p.x_span : p.w_count);
        // Screen every Kiln algorithm, then time the fastest properly.
        float best = -1;
        ConvAlgo best_algo = ConvAlgo::kImplicitGemm;
        for (ConvAlgo algo : algos) {
          if (!dnn::CheckConvAlgoSupported(dir, p, algo).ok()) continue;
          auto bytes = dnn::GetConvolutionWorkspaceSize(handle, dir, p, algo);
          if (!bytes.ok() || *bytes > kWorkspaceLimit) continue;
          // The direct kernel on large dense problems takes seconds; it is meant for thin groups.
          if (algo == ConvAlgo::kDirect && p.Flops() > 5e10) continue;
          auto run = [&]() {
            absl::Status st = dnn::RunConvolution(handle, dir, p, algo, 1.0f, 0.0f, x, w, y,
                                                  workspace, kWorkspaceLimit);
            if (!st.ok()) std::fprintf(stderr, "%s\n", st.ToString().c_str());
            return st.ok();
          };
          const float ms = MedianMs(run, 3, stream);
          std::printf("  %s shape %d %s %-22s %9.3f ms\n", mode.name.c_str(), si, row.dir.c_str(),
                      std::string(dnn::ConvAlgoName(algo)).c_str(), ms);
          if (ms > 0 && (best < 0 || ms < best)) {
            best = ms;
            best_algo = algo;
          }
        }
        auto run_best = [&]() {
          return dnn::RunConvolution(handle, dir, p, best_algo, 1.0f, 0.0f, x, w, y, workspace,
                                     kWorkspaceLimit)
              .ok();
        };
        row.kiln_ms = best < 0 ? -1 : MedianMs(run_best, repeats, stream);
        row.kiln_algo = std::string(dnn::ConvAlgoName(best_algo));
        row.tflops = row.kiln_ms > 0 ? p.Flops() / (row.kiln_ms * 1e-3) / 1e12 : 0;
        row.cudnn_ms = -1;
        row.rel_err = -1;
        if (cudnn.loaded && best > 0) {
          CHECK_CUDA(cudaMemcpy(out2, out, out_count * es, cudaMemcpyDeviceToDevice));  // Kiln's
          bench::cudnnDesc cx, cy, cw, cc;
          const int dt = mode.dtype == DataType::kF32 ? bench::kCudnnFloat : bench::kCudnnHalf;
          cudnn.CreateTensorDescriptor(&cx);
          cudnn.CreateTensorDescriptor(&cy);
          cudnn.CreateFilterDescriptor(&cw);
          cudnn.CreateConvolutionDescriptor(&cc);
          int xdim[4], xstr[4], ydim[4], ystr[4], wdim[4];
          for (int i = 0; i < 4; ++i) {
            xdim[i] = static_cast<int>(xd.dims[i]);
            xstr[i] = static_cast<int>(xd.strides[i]);
            ydim[i] = static_cast<int>(yd.dims[i]);
            ystr[i] = static_cast<int>(yd.strides[i]);
            wdim[i] = static_cast<int>(wd.dims[i]);
          }
          const int pad[2] = {static_cast<int>(s.pad), static_cast<int>(s.pad)};
          const int str[2] = {static_cast<int>(s.stride), static_cast<int>(s.stride)};
          const int dil[2] = {1, 1};
          int st = cudnn.SetTensorNdDescriptor(cx, dt, 4, xdim, xstr);
          st |= cudnn.SetTensorNdDescriptor(cy, dt, 4, ydim, ystr);
          st |= cudnn.SetFilterNdDescriptor(
              cw, dt,
              mode.format == dnn::TensorFormat::kNHWC ? bench::kCudnnNhwc : bench::kCudnnNchw, 4,
              wdim);
          st |= cudnn.SetConvolutionNdDescriptor(cc, 2, pad, str, dil,
                                                 bench::kCudnnCrossCorrelation, bench::kCudnnFloat);
          st |= cudnn.SetConvolutionMathType(
              cc, mode.math == dnn::MathMode::kFp32 && mode.dtype == DataType::kF32
                      ? bench::kCudnnFmaMath
                      : bench::kCudnnTensorOpMath);
          bench::CudnnAlgoPerf perf[16];
          int count = 0;
          if (st == 0) {
            if (dir == ConvDirection::kForward) {
              st = cudnn.FindForwardEx(cudnn_handle, cx, x, cw, w, cc, cy, y, 16, &count, perf,
                                       workspace, kWorkspaceLimit);
            } else if (dir == ConvDirection::kBackwardData) {
              st = cudnn.FindBackwardDataEx(cudnn_handle, cw, w, cy, y, cc, cx, x, 16, &count, perf,
                                            workspace, kWorkspaceLimit);
            } else {
              st = cudnn.FindBackwardFilterEx(cudnn_handle, cx, x, cy, y, cc, cw, w, 16, &count,
                                              perf, workspace, kWorkspaceLimit);
            }
          }
          if (st == 0 && count > 0 && perf[0].status == 0) {
            const int algo = perf[0].algo;
            const size_t ws = perf[0].memory;
            const float one = 1, zero = 0;
            auto run_cudnn = [&]() {
              int r;
              if (dir == ConvDirection::kForward) {
                r = cudnn.Forward(cudnn_handle, &one, cx, x, cw, w, cc, algo, workspace, ws, &zero,
                                  cy, y);
              } else if (dir == ConvDirection::kBackwardData) {
                r = cudnn.BackwardData(cudnn_handle, &one, cw, w, cy, y, cc, algo, workspace, ws,
                                       &zero, cx, x);
              } else {
                r = cudnn.BackwardFilter(cudnn_handle, &one, cx, x, cy, y, cc, algo, workspace, ws,
                                         &zero, cw, w);
              }
              return r == 0 && cudaGetLastError() == cudaSuccess;
            };
            row.cudnn_ms = MedianMs(run_cudnn, repeats, stream);
            row.cudnn_algo = absl::StrCat("algo", algo, perf[0].math_type == 1 ? "/tc" : "");
            row.rel_err = RelativeL2(static_cast<cublasHandle_t>(handle.cublas()), mode.dtype, out,
                                     out2, out_count);
          } else {
            row.cudnn_algo = absl::StrCat("find failed (", st, ")");
          }
        }
        // Backward data/filter overwrote x or w: restore fresh values for the next direction.
        if (dir != ConvDirection::kForward) FillRandom(out, out_count, mode.dtype, 301 + si);
        CHECK_CUDA(cudaDeviceSynchronize());
        rows.push_back(row);
        std::printf(
            "%-5s %d %-10s kiln %-22s %9.3f ms %7.1f TFLOP/s | cudnn %-10s %9.3f ms | "
            "ratio %.2f | rel_l2 %.1e\n",
            row.mode.c_str(), si, row.dir.c_str(), row.kiln_algo.c_str(), row.kiln_ms, row.tflops,
            row.cudnn_algo.c_str(), row.cudnn_ms,
            row.cudnn_ms > 0 && row.kiln_ms > 0 ? row.cudnn_ms / row.kiln_ms : 0.0, row.rel_err);
        std::fflush(stdout);
      }
      cudaFree(x);
      cudaFree(w);
      cudaFree(y);
      cudaFree(out2);
    }
  }
  std::printf("\n%-5s %-5s %-10s %-22s %9s %8s %-10s %9s %6s %8s\n", "mode", "shape", "direction",
              "kiln_algo", "kiln_ms", "TFLOP/s", "cudnn", "cudnn_ms", "ratio", "rel_l2");
  std::map<std::string, std::pair<double, int>> geo;
  for (const Row& r : rows) {
    const double ratio = r.cudnn_ms > 0 && r.kiln_ms > 0 ? r.cudnn_ms / r.kiln_ms : 0;
    std::printf("%-5s %-5d %-10s %-22s %9.3f %8.1f %-10s %9.3f %6.2f %8.1e\n", r.mode.c_str(),
                r.shape, r.dir.c_str(), r.kiln_algo.c_str(), r.kiln_ms, r.tflops,
                r.cudnn_algo.c_str(), r.cudnn_ms, ratio, r.rel_err);
    if (ratio > 0) {
      auto& g = geo[r.mode + " " + r.dir];
      g.first += std::log(ratio);
      g.second += 1;
    }
  }
  for (const auto& [key, g] : geo)
    std::printf("geomean ratio %-16s %.3f over %d shapes\n", key.c_str(),
                std::exp(g.first / g.second), g.second);
  cudaFree(workspace);
  return 0;
}
