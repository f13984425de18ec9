// Benchmark of the memory-bound primitives on the shapes: on 128x96x55x55 f32 NCHW,
// ReLU, 3x3 stride-2 max pooling, LRN size 5 and batch-norm training, forward and backward, and
// softmax on 128x1000; then channels-last (NHWC) LRN and pooling on CaffeNet's and ResNet-18's
// shapes in f16, bf16 and f32 (primitives_bench_nhwc.cc). Each is timed with CUDA events (warm-up,
// median of --repeats), reported as GB/s of the bytes the op must move, against the
// device-to-device copy bandwidth measured in the same run (on the same byte count, and on a large
// buffer), and next to cuDNN's time for the same op on the same buffers when libcudnn.so.9 can be
// loaded. Last, a table.
//
//   primitives_bench [--repeats=20]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "bench/cudnn_loader.h"
#include "bench/event_timer.h"
#include "bench/primitives_bench_nhwc.h"
#include "dnn/cuda/activation.h"
#include "dnn/cuda/normalization.h"
#include "dnn/cuda/pooling.h"
#include "dnn/cuda/softmax.h"

namespace kiln {
namespace {

using bench::MedianMs;

#define CHECK_CUDA(call)                                                                          \
  do {                                                                                            \
    cudaError_t e_ = (call);                                                                      \
    if (e_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)

// A device buffer of f32 values uniform in [lo, hi).
struct Buffer {
  void* ptr = nullptr;
  int64_t count = 0;
  Buffer(int64_t n, float lo, float hi, uint32_t seed) : count(n) {
    CHECK_CUDA(cudaMalloc(&ptr, n * 4));
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> host(n);
    for (float& v : host) v = dist(rng);
    CHECK_CUDA(cudaMemcpy(ptr, host.data(), n * 4, cudaMemcpyHostToDevice));
  }
  ~Buffer() { cudaFree(ptr); }
};

bool Ok(const absl::Status& s, const char* what) {
  if (s.ok()) return true;
  std::fprintf(stderr, "%s: %s\n", what, std::string(s.message()).c_str());
  return false;
}

bool CudnnOk(const bench::Cudnn& c, int status, const char* what) {
  if (status == 0) return true;
  std::fprintf(stderr, "cuDNN %s: %s\n", what, c.GetErrorString(status));
  return false;
}

struct Row {
  std::string op;
  double bytes;
  float kiln_ms, copy_same_ms, cudnn_ms;
};

}  // namespace

int Main(int argc, char** argv) {
  int repeats = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--repeats=", 0) == 0 && absl::SimpleAtoi(arg.substr(10), &repeats)) continue;
    std::fprintf(stderr, "usage: primitives_bench [--repeats=N]\n");
    return 2;
  }
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  std::printf("device: %s, %d SMs, driver %d, runtime %d\n", prop.name, prop.multiProcessorCount,
              driver, runtime);
  auto handle_or = dnn::Handle::Create();
  if (!handle_or.ok()) {
    std::fprintf(stderr, "%s\n", std::string(handle_or.status().message()).c_str());
    return 1;
  }
  dnn::Handle& h = **handle_or;
  cudaStream_t stream = static_cast<cudaStream_t>(h.stream());

  bench::Cudnn cudnn = bench::LoadCudnn();
  bench::cudnnHandle ch = nullptr;
  if (cudnn.ops_loaded) {
    cudnn.Create(&ch);
    cudnn.SetStream(ch, stream);
    std::printf("cuDNN %zu from %s\n", cudnn.GetVersion(), cudnn.path.c_str());
  } else {
    std::printf("cuDNN not loaded (%s): Kiln only\n", cudnn.error.c_str());
  }

  // The big shape and its buffers.
  const int64_t N = 128, C = 96, H = 55, W = 55, P = 27, Q = 27;
  const int64_t count = N * C * H * W, pooled = N * C * P * Q;
  Buffer x(count, -1, 1, 1), y(count, -1, 1, 2), dy(count, -1, 1, 3), dx(count, -1, 1, 4);
  // Copies of up to the largest op's byte count (LRN backward moves 4 tensors: 2 read, 2 written).
  Buffer copy_src(3 * count, 0, 1, 5), copy_dst(3 * count, 0, 1, 5);  // up to 5 tensors' bytes
  auto desc = [](std::vector<int64_t> dims) {
    return *dnn::TensorDescriptor::CreatePacked(DataType::kF32, dnn::TensorFormat::kNCHW,
                                                std::move(dims));
  };
  const dnn::TensorDescriptor xd = desc({N, C, H, W}), pd_ = desc({N, C, P, Q});
  const dnn::TensorDescriptor cd = desc({1, C, 1, 1});
  auto cudnn_desc = [&](const dnn::TensorDescriptor& d) {
    bench::cudnnDesc t = nullptr;
    cudnn.CreateTensorDescriptor(&t);
    std::vector<int> dims(d.dims.begin(), d.dims.end()),
        strides(d.strides.begin(), d.strides.end());
    cudnn.SetTensorNdDescriptor(t, bench::kCudnnFloat, d.rank(), dims.data(), strides.data());
    return t;
  };

  std::vector<Row> rows;
  auto copy_ms = [&](double bytes) {
    const int64_t n = static_cast<int64_t>(bytes / 2);  // half read, half written
    return MedianMs(
        [&] {
          return cudaMemcpyAsync(copy_dst.ptr, copy_src.ptr, static_cast<size_t>(n),
                                 cudaMemcpyDeviceToDevice, stream) == cudaSuccess;
        },
        repeats, stream, /*warmups=*/2);
  };
  auto add = [&](const std::string& op, double bytes, const std::function<bool()>& kiln,
                 const std::function<bool()>& theirs) {
    Row r{op, bytes, MedianMs(kiln, repeats, stream, /*warmups=*/2), copy_ms(bytes), -1};
    if (cudnn.ops_loaded && theirs) r.cudnn_ms = MedianMs(theirs, repeats, stream, /*warmups=*/2);
    std::printf("%-40s %8.3f MB  kiln %8.4f ms  copy-same %8.4f ms  cudnn %8.4f ms\n", op.c_str(),
                bytes / 1e6, r.kiln_ms, r.copy_same_ms, r.cudnn_ms);
    std::fflush(stdout);
    rows.push_back(r);
  };
  const float one = 1, zero = 0;
  const double t = 4.0 * count, tp = 4.0 * pooled;

  // ReLU.
  const auto relu = *dnn::ActivationDescriptor::Create(dnn::ActivationMode::kRelu);
  bench::cudnnDesc cx = nullptr, cp = nullptr, cc = nullptr, act = nullptr, pool = nullptr,
                   lrn = nullptr;
  if (cudnn.ops_loaded) {
    cx = cudnn_desc(xd);
    cp = cudnn_desc(pd_);
    cc = cudnn_desc(cd);
    cudnn.CreateActivationDescriptor(&act);
    cudnn.SetActivationDescriptor(act, /*RELU*/ 1, 0, 0.0);
    cudnn.CreatePoolingDescriptor(&pool);
    cudnn.SetPooling2dDescriptor(pool, /*MAX*/ 0, 0, 3, 3, 0, 0, 2, 2);
    cudnn.CreateLRNDescriptor(&lrn);
    cudnn.SetLRNDescriptor(lrn, 5, 1e-4, 0.75, 1.0);
  }
  add(
      "relu fwd", 2 * t,
      [&] { return Ok(dnn::ActivationForward(h, relu, 1, xd, x.ptr, 0, xd, y.ptr), "relu"); },
      [&] {
        return CudnnOk(cudnn, cudnn.ActivationForward(ch, act, &one, cx, x.ptr, &zero, cx, y.ptr),
                       "relu");
      });
  add(
      "relu bwd", 3 * t,
      [&] {
        return Ok(
            dnn::ActivationBackward(h, relu, 1, xd, y.ptr, xd, dy.ptr, xd, x.ptr, 0, xd, dx.ptr),
            "relu bwd");
      },
      [&] {
        return CudnnOk(cudnn,
                       cudnn.ActivationBackward(ch, act, &one, cx, y.ptr, cx, dy.ptr, cx, x.ptr,
                                                &zero, cx, dx.ptr),
                       "relu bwd");
      });

  // Max pooling 3x3 stride 2 (55 -> 27).
  const auto maxpool =
      *dnn::PoolingDescriptor::Create(dnn::PoolingMode::kMax, {3, 3}, {0, 0}, {2, 2});
  add(
      "maxpool 3x3/2 fwd", t + tp,
      [&] { return Ok(dnn::PoolingForward(h, maxpool, 1, xd, x.ptr, 0, pd_, y.ptr), "pool"); },
      [&] {
        return CudnnOk(cudnn, cudnn.PoolingForward(ch, pool, &one, cx, x.ptr, &zero, cp, y.ptr),
                       "pool");
      });
  add(
      "maxpool 3x3/2 bwd", 2 * t + 2 * tp,
      [&] {
        return Ok(
            dnn::PoolingBackward(h, maxpool, 1, pd_, y.ptr, pd_, dy.ptr, xd, x.ptr, 0, xd, dx.ptr),
            "pool bwd");
      },
      [&] {
        return CudnnOk(cudnn,
                       cudnn.PoolingBackward(ch, pool, &one, cp, y.ptr, cp, dy.ptr, cx, x.ptr,
                                             &zero, cx, dx.ptr),
                       "pool bwd");
      });
  // Pooling backward wants y as forward wrote it.
  Ok(dnn::PoolingForward(h, maxpool, 1, xd, x.ptr, 0, pd_, y.ptr), "pool");

  // LRN across channels, size 5.
  const auto lrn5 = *dnn::LrnDescriptor::Create(dnn::LrnMode::kAcrossChannels, 5, 1e-4, 0.75, 1.0);
  add(
      "lrn 5 fwd", 2 * t,
      [&] { return Ok(dnn::LrnForward(h, lrn5, 1, xd, x.ptr, 0, xd, y.ptr), "lrn"); },
      [&] {
        return CudnnOk(cudnn,
                       cudnn.LRNCrossChannelForward(ch, lrn, 0, &one, cx, x.ptr, &zero, cx, y.ptr),
                       "lrn");
      });
  Ok(dnn::LrnForward(h, lrn5, 1, xd, x.ptr, 0, xd, y.ptr), "lrn");
  // LRN backward must move x, dy and dx: y is a function of x, and Kiln recomputes it.
  add(
      "lrn 5 bwd", 3 * t,
      [&] {
        return Ok(dnn::LrnBackward(h, lrn5, 1, xd, y.ptr, xd, dy.ptr, xd, x.ptr, 0, xd, dx.ptr),
                  "lrn bwd");
      },
      [&] {
        return CudnnOk(cudnn,
                       cudnn.LRNCrossChannelBackward(ch, lrn, 0, &one, cx, y.ptr, cx, dy.ptr, cx,
                                                     x.ptr, &zero, cx, dx.ptr),
                       "lrn bwd");
      });

  // Batch norm, spatial, training.
  Buffer scale(C, 0.5, 1.5, 6), bias(C, -1, 1, 7), rm(C, 0, 1, 8), rv(C, 1, 2, 9), sm(C, 0, 1, 10),
      si(C, 1, 2, 11), ds(C, 0, 1, 12), db(C, 0, 1, 13);
  const size_t ws_bytes = dnn::BatchNormWorkspaceSize(dnn::BatchNormMode::kSpatial, xd);
  void* ws = nullptr;
  CHECK_CUDA(cudaMalloc(&ws, ws_bytes));
  dnn::BatchNormTraining bn;
  // Training batch norm reads its input twice: the statistics must be complete before the first
  // output, and x (149 MB) is three times the L2. So forward moves 2 reads of x and a write of y,
  // backward 2 reads of x and dy (the sums, then the apply) and a write of dx.
  add(
      "bn train fwd", 3 * t,
      [&] {
        return Ok(dnn::BatchNormForwardTraining(h, bn, 1, 0, xd, x.ptr, xd, y.ptr, cd, scale.ptr,
                                                bias.ptr, rm.ptr, rv.ptr, nullptr, sm.ptr, si.ptr,
                                                ws, ws_bytes),
                  "bn");
      },
      [&] {
        return CudnnOk(cudnn,
                       cudnn.BatchNormForwardTraining(ch, /*SPATIAL*/ 1, &one, &zero, cx, x.ptr, cx,
                                                      y.ptr, cc, scale.ptr, bias.ptr, 0.1, rm.ptr,
                                                      rv.ptr, 1e-5, sm.ptr, si.ptr),
                       "bn");
      });
  Ok(dnn::BatchNormForwardTraining(h, bn, 1, 0, xd, x.ptr, xd, y.ptr, cd, scale.ptr, bias.ptr,
                                   nullptr, nullptr, nullptr, sm.ptr, si.ptr, ws, ws_bytes),
     "bn");
  add(
      "bn train bwd", 5 * t,
      [&] {
        return Ok(dnn::BatchNormBackward(h, dnn::BatchNormMode::kSpatial, 1, 0, 1, 0, xd, x.ptr, xd,
                                         dy.ptr, xd, dx.ptr, cd, scale.ptr, ds.ptr, db.ptr, 1e-5,
                                         sm.ptr, si.ptr, ws, ws_bytes),
                  "bn bwd");
      },
      [&] {
        return CudnnOk(
            cudnn,
            cudnn.BatchNormBackward(ch, 1, &one, &zero, &one, &zero, cx, x.ptr, cx, dy.ptr, cx,
                                    dx.ptr, cc, scale.ptr, ds.ptr, db.ptr, 1e-5, sm.ptr, si.ptr),
            "bn bwd");
      });

  // Softmax over 1000 classes for 128 rows.
  const dnn::TensorDescriptor sd = desc({128, 1000, 1, 1});
  bench::cudnnDesc cs = cudnn.ops_loaded ? cudnn_desc(sd) : nullptr;
  const auto softmax = dnn::SoftmaxDescriptor::Instance(dnn::SoftmaxAlgorithm::kAccurate, 4);
  const double ts = 4.0 * 128 * 1000;
  add(
      "softmax 128x1000 fwd", 2 * ts,
      [&] { return Ok(dnn::SoftmaxForward(h, softmax, 1, sd, x.ptr, 0, sd, y.ptr), "softmax"); },
      [&] {
        return CudnnOk(cudnn,
                       cudnn.SoftmaxForward(ch, /*ACCURATE*/ 1, /*INSTANCE*/ 0, &one, cs, x.ptr,
                                            &zero, cs, y.ptr),
                       "softmax");
      });
  add(
      "softmax 128x1000 bwd", 3 * ts,
      [&] {
        return Ok(dnn::SoftmaxBackward(h, softmax, 1, sd, y.ptr, sd, dy.ptr, 0, sd, dx.ptr),
                  "softmax bwd");
      },
      [&] {
        return CudnnOk(
            cudnn, cudnn.SoftmaxBackward(ch, 1, 0, &one, cs, y.ptr, cs, dy.ptr, &zero, cs, dx.ptr),
            "softmax bwd");
      });

  // Channels-last LRN and pooling on CaffeNet's and ResNet-18's shapes (f16, some bf16 and f32).
  bench::AddChannelsLastRows(
      h, cudnn, cudnn.ops_loaded ? ch : nullptr,
      [&](const std::string& op, double bytes, const std::function<bool()>& kiln,
          const std::function<bool()>& theirs) { add(op, bytes, kiln, theirs); });
  CHECK_CUDA(cudaDeviceSynchronize());

  const float big_copy_ms = copy_ms(2.0 * t);
  const double copy_gbs = 2.0 * t / (big_copy_ms * 1e6);
  std::printf("\ndevice copy: %.1f MB read + written in %.4f ms = %.0f GB/s\n\n", 2 * t / 1e6,
              big_copy_ms, copy_gbs);
  std::printf("%-40s %9s %9s %8s %7s %9s %8s %9s %8s\n", "op", "MB", "kiln ms", "GB/s", "%copy",
              "copy-same", "%same", "cudnn ms", "cudnn/kiln");
  for (const Row& r : rows) {
    const double gbs = r.bytes / (r.kiln_ms * 1e6);
    std::printf("%-40s %9.2f %9.4f %8.0f %6.0f%% %9.4f %7.0f%% %9.4f %8.2f\n", r.op.c_str(),
                r.bytes / 1e6, r.kiln_ms, gbs, 100 * gbs / copy_gbs, r.copy_same_ms,
                100 * r.copy_same_ms / r.kiln_ms, r.cudnn_ms,
                r.cudnn_ms > 0 ? r.cudnn_ms / r.kiln_ms : 0.0);
  }
  cudaFree(ws);
  return 0;
}

}  // namespace kiln

int main(int argc, char** argv) { return kiln::Main(argc, argv); }
