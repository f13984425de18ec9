// The fixture of the CUDA primitive tests (tests/ops/<family>/<family>_primitive_cuda_test.cc,
// _primitive_channels_last_cuda_test.cc and _primitive_batchnorm_cuda_test.cc, linked into
// //tests/kernels:primitives_cuda_test, primitives_channels_last_cuda_test and
// primitives_batchnorm_cuda_test): host/device test tensors with poisoned outputs, the per-dtype
// tolerances, a check of a GPU result against the CPU reference's, gaps included, and the
// channels-last layouts of the channels-last tests.
#ifndef KILN_TESTS_UTIL_PRIMITIVES_CUDA_FIXTURE_H_
#define KILN_TESTS_UTIL_PRIMITIVES_CUDA_FIXTURE_H_

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dnn/cuda/dnn_handle.h"
#include "dnn/primitive_reference.h"
#include "gtest/gtest.h"
#include "tests/util/primitive_test_util.h"

namespace kiln {
namespace primitives_test {

// The tolerances, in one place: |got - want| <= atol + rtol |want|. Inputs are representable in
// the dtype, so the error is the kernel's f32 arithmetic plus the output's rounding; ops that
// sum many terms (batch norm, softmax, LRN windows, inner product) get `sum_factor` times more.
struct Tolerance {
  double atol, rtol;
};
inline Tolerance ToleranceFor(DataType dtype, double sum_factor = 1) {
  if (dtype == DataType::kF16) return {2e-3 * sum_factor, 2e-3};
  if (dtype == DataType::kBF16) return {1.6e-2 * sum_factor, 1e-2};
  return {2e-5 * sum_factor, 2e-5};
}

constexpr DataType kDtypes[] = {DataType::kF32, DataType::kF16, DataType::kBF16};
struct Blend {
  float alpha, beta;
};
constexpr Blend kBlends[] = {{1, 0}, {0.75f, 0.5f}};

inline const std::vector<std::vector<int64_t>>& Shapes() {
  static const auto* shapes =
      new std::vector<std::vector<int64_t>>{{2, 5, 7, 9}, {1, 3, 9, 11}, {64, 8, 5, 5}};
  return *shapes;
}

// `shapes` and `extra`: the common shapes plus ones an op's fast paths need (more channels than
// an LRN chunk, rows longer than a softmax block holds in registers).
inline std::vector<std::vector<int64_t>> WithExtra(std::vector<std::vector<int64_t>> shapes,
                                                   const std::vector<std::vector<int64_t>>& extra) {
  shapes.insert(shapes.end(), extra.begin(), extra.end());
  return shapes;
}

inline bool HaveGpu() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    return false;
  }
  return true;
}

inline double RoundTo(DataType dtype, double v) {
  const float f = static_cast<float>(v);
  if (dtype == DataType::kF16) return HalfToFloat(FloatToHalf(f));
  if (dtype == DataType::kBF16) return BFloat16ToFloat(FloatToBFloat16(f));
  return f;
}

// A host copy and a device copy of one tensor's buffer (gaps included).
class TestTensor {
 public:
  TestTensor(DataType dtype, const std::vector<int64_t>& dims, Layout layout)
      : TestTensor(testing::MakeLayout(dtype, dims, layout)) {}
  // Any descriptor, its first element `offset` elements into the buffer.
  explicit TestTensor(LaidOut lay) : lay_(std::move(lay)), host_(lay_.BufferElements(), NAN) {
    EXPECT_EQ(cudaMalloc(&dev_, host_.size() * DataTypeSize(dtype()) + 16), cudaSuccess);
  }
  ~TestTensor() { cudaFree(dev_); }
  TestTensor(const TestTensor&) = delete;
  TestTensor& operator=(const TestTensor&) = delete;

  // Random values in [lo, hi) at the tensor's elements (gaps stay NaN), rounded to the dtype.
  TestTensor& Random(std::mt19937& rng, double lo, double hi) {
    std::uniform_real_distribution<double> dist(lo, hi);
    ForEachElement([&](int64_t at) { host_[at] = RoundTo(dtype(), dist(rng)); });
    Upload();
    return *this;
  }
  // An output: NaN when it must not be read (beta 0), random old values otherwise.
  TestTensor& Poison(std::mt19937& rng, float beta) {
    if (beta != 0) return Random(rng, -1, 1);
    std::fill(host_.begin(), host_.end(), NAN);
    Upload();
    return *this;
  }
  void Upload() {
    const size_t n = host_.size();
    if (dtype() == DataType::kF32) {
      std::vector<float> f(host_.begin(), host_.end());
      ASSERT_EQ(cudaMemcpy(dev_, f.data(), n * 4, cudaMemcpyHostToDevice), cudaSuccess);
      return;
    }
    std::vector<uint16_t> bits(n);
    for (size_t i = 0; i < n; ++i) {
      const float f = static_cast<float>(host_[i]);
      bits[i] = dtype() == DataType::kF16 ? FloatToHalf(f) : FloatToBFloat16(f);
    }
    ASSERT_EQ(cudaMemcpy(dev_, bits.data(), n * 2, cudaMemcpyHostToDevice), cudaSuccess);
  }
  Vec Download() const {
    const size_t n = host_.size();
    Vec out(n);
    if (dtype() == DataType::kF32) {
      std::vector<float> f(n);
      EXPECT_EQ(cudaMemcpy(f.data(), dev_, n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
      for (size_t i = 0; i < n; ++i) out[i] = f[i];
      return out;
    }
    std::vector<uint16_t> bits(n);
    EXPECT_EQ(cudaMemcpy(bits.data(), dev_, n * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    for (size_t i = 0; i < n; ++i) {
      out[i] = dtype() == DataType::kF16 ? HalfToFloat(bits[i]) : BFloat16ToFloat(bits[i]);
    }
    return out;
  }
  template <class F>
  void ForEachElement(F f) const {
    std::vector<int64_t> index(desc().rank(), 0);
    const std::vector<int64_t>& dims = desc().dims;
    while (true) {
      int64_t at = lay_.offset;
      for (int i = 0; i < desc().rank(); ++i) at += index[i] * desc().strides[i];
      f(at);
      int i = desc().rank() - 1;
      for (; i >= 0; --i) {
        if (++index[i] < dims[i]) break;
        index[i] = 0;
      }
      if (i < 0) return;
    }
  }

  const TensorDescriptor& desc() const { return lay_.desc; }
  DataType dtype() const { return lay_.desc.dtype; }
  // Host and device pointers to the first element.
  double* h() { return host_.data() + lay_.offset; }
  const double* h() const { return host_.data() + lay_.offset; }
  void* d() const {
    return static_cast<char*>(dev_) + lay_.offset * static_cast<int64_t>(DataTypeSize(dtype()));
  }
  Vec& host() { return host_; }
  const Vec& host() const { return host_; }
  int64_t offset() const { return lay_.offset; }

 private:
  LaidOut lay_;
  Vec host_;
  void* dev_ = nullptr;
};

// A device scratch buffer (workspaces, f32 parameters).
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    EXPECT_EQ(cudaMalloc(&ptr_, bytes > 0 ? bytes : 1), cudaSuccess);
  }
  DeviceBuffer(const Vec& values) : DeviceBuffer(values.size() * sizeof(float)) { Set(values); }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void Set(const Vec& values) {
    std::vector<float> f(values.begin(), values.end());
    ASSERT_EQ(cudaMemcpy(ptr_, f.data(), f.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  }
  Vec Get(size_t count) const {
    std::vector<float> f(count);
    EXPECT_EQ(cudaMemcpy(f.data(), ptr_, count * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    return Vec(f.begin(), f.end());
  }
  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

class PrimitivesCudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
    auto h = dnn::Handle::Create();
    ASSERT_TRUE(h.ok()) << h.status();
    handle_ = std::move(*h);
  }
  void TearDown() override {
    if (handle_) std::printf("%s: %d GPU results checked\n", name_.c_str(), checks_);
  }

  // Runs `gpu` (a primitive call), then compares `out` with `want` (the reference's buffer):
  // every element within tolerance, every gap still NaN.
  void Check(const std::string& what, const absl::Status& gpu, const TestTensor& out,
             const Vec& want, Tolerance tol) {
    SCOPED_TRACE(what);
    ASSERT_TRUE(gpu.ok()) << gpu;
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const Vec got = out.Download();
    ++checks_;
    std::vector<bool> element(got.size(), false);
    out.ForEachElement([&](int64_t at) { element[at] = true; });
    for (size_t i = 0; i < got.size(); ++i) {
      if (!element[i]) {
        if (!std::isnan(got[i])) {
          ADD_FAILURE() << what << ": gap " << i << " was overwritten with " << got[i];
          return;
        }
        continue;
      }
      const double err = std::fabs(got[i] - want[i]);
      if (!(err <= tol.atol + tol.rtol * std::fabs(want[i]))) {
        ADD_FAILURE() << what << ": element " << i << " got " << got[i] << " want " << want[i]
                      << " (tolerance " << tol.atol << " + " << tol.rtol << " |want|)";
        return;
      }
    }
  }
  void CheckParams(const std::string& what, const DeviceBuffer& got, const Vec& want,
                   Tolerance tol) {
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const Vec g = got.Get(want.size());
    ++checks_;
    for (size_t i = 0; i < want.size(); ++i) {
      if (!(std::fabs(g[i] - want[i]) <= tol.atol + tol.rtol * std::fabs(want[i]))) {
        ADD_FAILURE() << what << ": parameter " << i << " got " << g[i] << " want " << want[i];
        return;
      }
    }
  }
  // Poisons `out`, computes the reference into a copy of its buffer, runs the GPU call and
  // checks. `reference(double* out_first_element)` and `gpu()` return statuses.
  template <class Gpu, class Ref>
  void RunAndCheck(const std::string& what, TestTensor& out, Blend b, Tolerance tol, Gpu gpu,
                   Ref reference) {
    out.Poison(rng_, b.beta);
    Vec want = out.host();
    const absl::Status rs = reference(want.data() + out.offset());
    ASSERT_TRUE(rs.ok()) << what << ": " << rs;
    Check(what, gpu(), out, want, tol);
  }
  std::string Label(DataType dtype, Layout layout, const std::vector<int64_t>& dims, Blend b) {
    return absl::StrCat(DataTypeName(dtype), " ", testing::LayoutName(layout), " [",
                        absl::StrJoin(dims, ","), "] a", b.alpha, " b", b.beta);
  }

  std::unique_ptr<dnn::Handle> handle_;
  std::mt19937 rng_{2026};
  int checks_ = 0;
  std::string name_ = ::testing::UnitTest::GetInstance()->current_test_info()->name();
};

// The channels-last tests (the channels-last (NHWC, NDHWC) paths of pooling and LRN, forward and
// backward). The fast kernels move 16-byte chunks of channels (8 of f16/bf16, 4 of f32), so the
// channel counts are chosen around that: multiples of 8 (every access a vector), odd and small
// counts (a partial last chunk, element accesses), and counts whose rows put a warp's first lane
// in the middle of a row (LRN's neighbour chunks by shuffle and by load). Three layouts: packed,
// packed one element into the buffer (every row misaligned), and rows with a gap of 8 channels
// after the channels (aligned, position stride != C).
enum class Last { kPacked, kOffset, kGapped };
constexpr Last kLasts[] = {Last::kPacked, Last::kOffset, Last::kGapped};

inline const char* LastName(Last kind) {
  return kind == Last::kPacked ? "nhwc" : kind == Last::kOffset ? "nhwc+1" : "nhwc gapped";
}

// dims (N, C, spatial...) laid out channels-last as `kind` says.
inline LaidOut ChannelsLast(DataType dtype, const std::vector<int64_t>& dims, Last kind) {
  const int rank = static_cast<int>(dims.size());
  std::vector<int> order;  // outermost to innermost
  order.push_back(0);
  for (int d = 2; d < rank; ++d) order.push_back(d);
  order.push_back(1);
  std::vector<int64_t> strides(rank);
  int64_t s = 1;
  for (int k = rank - 1; k >= 0; --k) {
    const int d = order[k];
    strides[d] = s;
    s *= dims[d] + (d == 1 && kind == Last::kGapped ? 8 : 0);
  }
  LaidOut out;
  absl::StatusOr<TensorDescriptor> desc = TensorDescriptor::Create(dtype, dims, strides);
  EXPECT_TRUE(desc.ok()) << desc.status();
  out.desc = *desc;
  out.offset = kind == Last::kOffset ? 1 : 0;
  return out;
}

inline std::string What(const std::string& op, DataType dtype, Last kind,
                        const std::vector<int64_t>& dims, Blend b) {
  return absl::StrCat(op, " ", DataTypeName(dtype), " ", LastName(kind), " [",
                      absl::StrJoin(dims, ","), "] a", b.alpha, " b", b.beta);
}

class ChannelsLastTest : public PrimitivesCudaTest {
 protected:
  // Values from {-1, -0.5, 0, 0.5, 1}: exact in every dtype, and a 3x3 window holds ties.
  void Ties(TestTensor& t) {
    std::uniform_int_distribution<int> pick(-2, 2);
    t.ForEachElement([&](int64_t at) { t.host()[at] = 0.5 * pick(rng_); });
    t.Upload();
  }
};

}  // namespace primitives_test
}  // namespace kiln

#endif  // KILN_TESTS_UTIL_PRIMITIVES_CUDA_FIXTURE_H_
