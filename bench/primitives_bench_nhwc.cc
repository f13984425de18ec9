#include "bench/primitives_bench_nhwc.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/dtype.h"
#include "dnn/cuda/normalization.h"
#include "dnn/cuda/pooling.h"

namespace kiln {
namespace bench {

namespace {

// A device buffer of `count` random values in [lo, hi), stored as `dtype`.
class DeviceTensor {
 public:
  DeviceTensor(DataType dtype, int64_t count, float lo, float hi, uint32_t seed) {
    const size_t bytes = static_cast<size_t>(count) * DataTypeSize(dtype);
    if (cudaMalloc(&ptr_, bytes) != cudaSuccess) {
      ptr_ = nullptr;
      return;
    }
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<uint8_t> host(bytes);
    for (int64_t i = 0; i < count; ++i) {
      const float v = dist(rng);
      if (dtype == DataType::kF32) {
        reinterpret_cast<float*>(host.data())[i] = v;
      } else {
        reinterpret_cast<uint16_t*>(host.data())[i] =
            dtype == DataType::kF16 ? FloatToHalf(v) : FloatToBFloat16(v);
      }
    }
    if (cudaMemcpy(ptr_, host.data(), bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
      cudaFree(ptr_);
      ptr_ = nullptr;
    }
  }
  ~DeviceTensor() { cudaFree(ptr_); }
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;
  void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
};

bool Ok(const absl::Status& s, const std::string& what) {
  if (s.ok()) return true;
  std::fprintf(stderr, "%s: %s\n", what.c_str(), std::string(s.message()).c_str());
  return false;
}

bool CudnnOk(const Cudnn& c, int status, const std::string& what) {
  if (status == 0) return true;
  std::fprintf(stderr, "cuDNN %s: %s\n", what.c_str(), c.GetErrorString(status));
  return false;
}

int CudnnType(DataType dtype) {
  return dtype == DataType::kF16    ? kCudnnHalf
         : dtype == DataType::kBF16 ? kCudnnBFloat16
                                    : kCudnnFloat;
}

const char* Short(DataType dtype) {
  return dtype == DataType::kF16 ? "f16" : dtype == DataType::kBF16 ? "bf16" : "f32";
}

// A cuDNN tensor descriptor of `d`, or null without cuDNN. Not destroyed: the loader has no
// destroy call, and the benchmark makes a few dozen.
cudnnDesc CudnnTensor(const Cudnn& c, cudnnHandle ch, const dnn::TensorDescriptor& d) {
  if (ch == nullptr) return nullptr;
  cudnnDesc t = nullptr;
  c.CreateTensorDescriptor(&t);
  std::vector<int> dims(d.dims.begin(), d.dims.end()), strides(d.strides.begin(), d.strides.end());
  c.SetTensorNdDescriptor(t, CudnnType(d.dtype), d.rank(), dims.data(), strides.data());
  return t;
}

struct Shape {
  int64_t n, c, h, w;
  std::string Label() const { return absl::StrCat(n, "x", c, "x", h, "x", w); }
  int64_t Count() const { return n * c * h * w; }
};

dnn::TensorDescriptor Nhwc(DataType dtype, const Shape& s) {
  return *dnn::TensorDescriptor::CreatePacked(dtype, dnn::TensorFormat::kNHWC,
                                              {s.n, s.c, s.h, s.w});
}

void LrnRows(dnn::Handle& h, const Cudnn& cudnn, cudnnHandle ch, const AddRow& add, DataType dtype,
             const Shape& s) {
  const float one = 1, zero = 0;
  const dnn::TensorDescriptor xd = Nhwc(dtype, s);
  DeviceTensor x(dtype, s.Count(), -2, 2, 21), y(dtype, s.Count(), -1, 1, 22),
      dy(dtype, s.Count(), -1, 1, 23), dx(dtype, s.Count(), -1, 1, 24);
  if (!x.get() || !y.get() || !dy.get() || !dx.get()) {
    std::fprintf(stderr, "lrn %s: out of device memory\n", s.Label().c_str());
    return;
  }
  cudnnDesc cx = CudnnTensor(cudnn, ch, xd), lrn = nullptr;
  if (ch) {
    cudnn.CreateLRNDescriptor(&lrn);
    cudnn.SetLRNDescriptor(lrn, 5, 1e-4, 0.75, 1.0);
  }
  const auto lrn5 = *dnn::LrnDescriptor::Create(dnn::LrnMode::kAcrossChannels, 5, 1e-4, 0.75, 1.0);
  const double t = static_cast<double>(s.Count()) * DataTypeSize(dtype);
  const std::string name = absl::StrCat(Short(dtype), " nhwc lrn5 ", s.Label());
  add(
      name + " fwd", 2 * t,
      [&] { return Ok(dnn::LrnForward(h, lrn5, 1, xd, x.get(), 0, xd, y.get()), name); },
      [&] {
        return CudnnOk(
            cudnn, cudnn.LRNCrossChannelForward(ch, lrn, 0, &one, cx, x.get(), &zero, cx, y.get()),
            name);
      });
  Ok(dnn::LrnForward(h, lrn5, 1, xd, x.get(), 0, xd, y.get()), name);
  add(
      name + " bwd", 3 * t,
      [&] {
        return Ok(
            dnn::LrnBackward(h, lrn5, 1, xd, y.get(), xd, dy.get(), xd, x.get(), 0, xd, dx.get()),
            name);
      },
      [&] {
        return CudnnOk(cudnn,
                       cudnn.LRNCrossChannelBackward(ch, lrn, 0, &one, cx, y.get(), cx, dy.get(),
                                                     cx, x.get(), &zero, cx, dx.get()),
                       name);
      });
}

// 3x3 stride-2 pooling with padding `pad`; cuDNN mode 0 max, 1 average including padding.
void PoolRows(dnn::Handle& h, const Cudnn& cudnn, cudnnHandle ch, const AddRow& add, DataType dtype,
              const Shape& s, int pad, bool max) {
  const float one = 1, zero = 0;
  const auto mode = max ? dnn::PoolingMode::kMax : dnn::PoolingMode::kAverageIncludePadding;
  const auto pool = *dnn::PoolingDescriptor::Create(mode, {3, 3}, {pad, pad}, {2, 2});
  const dnn::TensorDescriptor xd = Nhwc(dtype, s);
  const std::vector<int64_t> ydims = *dnn::PoolingOutputDims(pool, xd);
  const Shape p{ydims[0], ydims[1], ydims[2], ydims[3]};
  const dnn::TensorDescriptor yd = Nhwc(dtype, p);
  DeviceTensor x(dtype, s.Count(), -2, 2, 31), dx(dtype, s.Count(), -1, 1, 32),
      y(dtype, p.Count(), -1, 1, 33), dy(dtype, p.Count(), -1, 1, 34);
  if (!x.get() || !y.get() || !dy.get() || !dx.get()) {
    std::fprintf(stderr, "pool %s: out of device memory\n", s.Label().c_str());
    return;
  }
  cudnnDesc cx = CudnnTensor(cudnn, ch, xd), cy = CudnnTensor(cudnn, ch, yd), cp = nullptr;
  if (ch) {
    cudnn.CreatePoolingDescriptor(&cp);
    cudnn.SetPooling2dDescriptor(cp, max ? 0 : 1, 0, 3, 3, pad, pad, 2, 2);
  }
  const double t = static_cast<double>(s.Count()) * DataTypeSize(dtype);
  const double tp = static_cast<double>(p.Count()) * DataTypeSize(dtype);
  const std::string name = absl::StrCat(Short(dtype), " nhwc ", max ? "max" : "avg", "pool ",
                                        s.Label(), pad ? " p1" : "");
  add(
      name + " fwd", t + tp,
      [&] { return Ok(dnn::PoolingForward(h, pool, 1, xd, x.get(), 0, yd, y.get()), name); },
      [&] {
        return CudnnOk(cudnn, cudnn.PoolingForward(ch, cp, &one, cx, x.get(), &zero, cy, y.get()),
                       name);
      });
  // Backward wants y as forward wrote it. Max reads x, y, dy and writes dx; average reads dy.
  Ok(dnn::PoolingForward(h, pool, 1, xd, x.get(), 0, yd, y.get()), name);
  add(
      name + " bwd", max ? 2 * t + 2 * tp : t + tp,
      [&] {
        return Ok(dnn::PoolingBackward(h, pool, 1, yd, y.get(), yd, dy.get(), xd, x.get(), 0, xd,
                                       dx.get()),
                  name);
      },
      [&] {
        return CudnnOk(cudnn,
                       cudnn.PoolingBackward(ch, cp, &one, cy, y.get(), cy, dy.get(), cx, x.get(),
                                             &zero, cx, dx.get()),
                       name);
      });
}

}  // namespace

void AddChannelsLastRows(dnn::Handle& handle, const Cudnn& cudnn, cudnnHandle ch,
                         const AddRow& add) {
  const Shape norm1{128, 96, 27, 27}, norm2{128, 256, 13, 13};
  const Shape pool1{128, 96, 55, 55}, pool2{128, 256, 27, 27}, pool5{128, 256, 13, 13};
  const Shape resnet_pool1{64, 64, 112, 112};
  const DataType f16 = DataType::kF16;
  LrnRows(handle, cudnn, ch, add, f16, norm1);
  LrnRows(handle, cudnn, ch, add, f16, norm2);
  LrnRows(handle, cudnn, ch, add, DataType::kBF16, norm1);
  LrnRows(handle, cudnn, ch, add, DataType::kF32, norm1);
  PoolRows(handle, cudnn, ch, add, f16, pool1, 0, true);
  PoolRows(handle, cudnn, ch, add, f16, pool2, 0, true);
  PoolRows(handle, cudnn, ch, add, f16, pool5, 0, true);
  PoolRows(handle, cudnn, ch, add, f16, resnet_pool1, 1, true);
  PoolRows(handle, cudnn, ch, add, DataType::kBF16, pool1, 0, true);
  PoolRows(handle, cudnn, ch, add, DataType::kF32, pool1, 0, true);
  PoolRows(handle, cudnn, ch, add, f16, pool1, 0, false);
}

}  // namespace bench
}  // namespace kiln
