// The CUDA solver update (kernels/cuda/solver_update.h) against the host reference: every solver
// type, L2 and L1 decay with and without grad_scale, three iterations on fresh random gradients,
// lengths 1, 3 and 1000003, buffers aligned (float4 path), all shifted by one float (float4
// after a scalar head) and shifted differently (scalar path). Histories start from random old
// values; a one-history solver's history2 is all NaN and must stay so, and every buffer is
// followed by a NaN guard band that must survive. The kernel computes in the host's f32 order
// with no fused multiply-adds, so the results are expected to be bit-identical; the tolerance
// (1e-6 relative) only keeps a benign compiler difference from failing the test.
// The sum of squares is checked against the host's double sum (1e-12 relative).
// Runs on the GPU machine; the GPU tests skip where no CUDA device is usable, while the argument
// checks (which never reach the device) run everywhere.
// Cases of //tests/kernels:solver_update_cuda_test.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dnn/cuda/solver_update.h"
#include "dnn/solver_update.h"
#include "gtest/gtest.h"

namespace kiln {
namespace dnn {
namespace {

using Floats = std::vector<float>;

constexpr int64_t kGuard = 7;  // NaN floats after every buffer

bool HaveGpu() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    return false;
  }
  return true;
}

// One device buffer: `offset` floats of padding, `count` values, kGuard NaNs.
class DeviceBuffer {
 public:
  DeviceBuffer(int64_t count, int64_t offset) : count_(count), offset_(offset) {
    const size_t bytes = sizeof(float) * (offset + count + kGuard);
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&base_), bytes), cudaSuccess);
  }
  ~DeviceBuffer() { cudaFree(base_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  float* data() { return base_ + offset_; }
  // Writes `values` and the NaN guard.
  void Upload(const Floats& values) {
    Floats all(offset_ + count_ + kGuard, std::nanf(""));
    std::copy(values.begin(), values.end(), all.begin() + offset_);
    ASSERT_EQ(cudaMemcpy(base_, all.data(), sizeof(float) * all.size(), cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  // The values; the guard band must still be NaN.
  Floats Download(const std::string& what) {
    Floats all(offset_ + count_ + kGuard);
    EXPECT_EQ(cudaMemcpy(all.data(), base_, sizeof(float) * all.size(), cudaMemcpyDeviceToHost),
              cudaSuccess);
    for (int64_t i = 0; i < kGuard; ++i) {
      EXPECT_TRUE(std::isnan(all[offset_ + count_ + i])) << what << ": guard " << i << " written";
    }
    return Floats(all.begin() + offset_, all.begin() + offset_ + count_);
  }

 private:
  float* base_ = nullptr;
  int64_t count_, offset_;
};

Floats Random(std::mt19937& rng, int64_t n, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  Floats v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Counts the elements that differ beyond the tolerance and reports the first few.
void ExpectClose(const Floats& got, const Floats& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  int64_t bad = 0, exact = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i]))) {
      ++exact;
      continue;
    }
    if (std::fabs(got[i] - want[i]) <= 1e-6 * std::fabs(want[i]) + 1e-30) continue;
    if (++bad <= 3) {
      ADD_FAILURE() << what << "[" << i << "]: GPU " << got[i] << " host " << want[i];
    }
  }
  EXPECT_EQ(bad, 0) << what;
  if (exact != static_cast<int64_t>(got.size())) {
    std::printf("%s: %lld of %zu bit-identical\n", what.c_str(), static_cast<long long>(exact),
                got.size());
  }
}

SolverStep StepFor(SolverType type, Regularization reg, double decay, double grad_scale) {
  SolverStep step;
  step.type = type;
  step.local_rate = 0.01;
  step.regularization = reg;
  step.local_decay = decay;
  step.grad_scale = grad_scale;
  switch (type) {
    case SolverType::kSgd:
    case SolverType::kNesterov:
    case SolverType::kAdam:
      step.momentum = 0.9;
      break;
    case SolverType::kAdaDelta:
      step.momentum = 0.95;
      step.delta = 1e-6;
      step.local_rate = 1.0;
      break;
    default:
      step.momentum = 0;
      break;
  }
  return step;
}

struct Layout {
  const char* name;
  int64_t offsets[4];  // param, grad, history, history2 (floats)
};
constexpr Layout kLayouts[] = {
    {"aligned", {0, 0, 0, 0}}, {"shifted", {1, 1, 1, 1}}, {"mixed", {0, 1, 2, 3}}};

constexpr SolverType kTypes[] = {SolverType::kSgd,     SolverType::kNesterov, SolverType::kAdaGrad,
                                 SolverType::kRmsProp, SolverType::kAdaDelta, SolverType::kAdam};

TEST(SolverUpdateCudaTest, AgreesWithHost) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(17);
  int checks = 0;
  for (int64_t count : {int64_t{1}, int64_t{3}, int64_t{1000003}}) {
    for (const Layout& layout : kLayouts) {
      for (SolverType type : kTypes) {
        for (const auto& [reg, decay, scale] : {std::make_tuple(Regularization::kL2, 5e-4, 1.0),
                                                std::make_tuple(Regularization::kL1, 1e-3, 0.5)}) {
          SolverStep step = StepFor(type, reg, decay, scale);
          const bool two = HistoryCount(type) == 2;
          const bool signed_history = type == SolverType::kSgd || type == SolverType::kNesterov ||
                                      type == SolverType::kAdam;
          Floats param = Random(rng, count, -1, 1);
          Floats history = Random(rng, count, signed_history ? -0.1f : 0.0f, 0.1f);
          Floats history2 = two ? Random(rng, count, 0, 0.1f) : Floats(count, std::nanf(""));
          DeviceBuffer d_param(count, layout.offsets[0]), d_grad(count, layout.offsets[1]);
          DeviceBuffer d_history(count, layout.offsets[2]), d_history2(count, layout.offsets[3]);
          d_param.Upload(param);
          d_history.Upload(history);
          d_history2.Upload(history2);
          for (int iter = 0; iter < 3; ++iter) {
            const std::string what =
                absl::StrCat(SolverTypeName(type), " count ", count, " ", layout.name,
                             reg == Regularization::kL2 ? " L2" : " L1", " iter ", iter, " ");
            step.iter = iter;
            Floats grad = Random(rng, count, -1, 1);
            d_grad.Upload(grad);
            ASSERT_TRUE(SolverUpdateHost(step, count, param.data(), grad.data(), history.data(),
                                         two ? history2.data() : nullptr)
                            .ok());
            const absl::Status status =
                SolverUpdateCuda(step, count, d_param.data(), d_grad.data(), d_history.data(),
                                 d_history2.data(), /*stream=*/nullptr);
            ASSERT_TRUE(status.ok()) << what << status;
            ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
            ExpectClose(d_param.Download(what + "param"), param, what + "param");
            ExpectClose(d_grad.Download(what + "grad"), grad, what + "grad");
            ExpectClose(d_history.Download(what + "history"), history, what + "history");
            const Floats h2 = d_history2.Download(what + "history2");
            if (two) {
              ExpectClose(h2, history2, what + "history2");
            } else {
              for (float v : h2) ASSERT_TRUE(std::isnan(v)) << what << "history2 was written";
            }
            ++checks;
          }
        }
      }
    }
  }
  std::printf("%d GPU updates checked against the host\n", checks);
}

TEST(SolverUpdateCudaTest, SumOfSquaresAddsIntoTheAccumulator) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(3);
  double* d_sum = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d_sum), sizeof(double)), cudaSuccess);
  for (int64_t count : {int64_t{1}, int64_t{3}, int64_t{1000003}}) {
    for (int64_t offset : {0, 1}) {
      const Floats x = Random(rng, count, -3, 3);
      DeviceBuffer d_x(count, offset);
      d_x.Upload(x);
      ASSERT_EQ(cudaMemset(d_sum, 0, sizeof(double)), cudaSuccess);
      // Twice: the second call adds to the first.
      ASSERT_TRUE(SumOfSquaresCuda(count, d_x.data(), d_sum, nullptr).ok());
      ASSERT_TRUE(SumOfSquaresCuda(count, d_x.data(), d_sum, nullptr).ok());
      double got = 0;
      ASSERT_EQ(cudaMemcpy(&got, d_sum, sizeof(double), cudaMemcpyDeviceToHost), cudaSuccess);
      const double want = 2 * SumOfSquaresHost(count, x.data());
      EXPECT_NEAR(got, want, 1e-12 * want) << "count " << count << " offset " << offset;
    }
  }
  cudaFree(d_sum);
}

// The checks run before anything reaches the device, so these need no GPU.
TEST(SolverUpdateCudaTest, RefusesLikeTheHost) {
  SolverStep step;
  step.type = SolverType::kAdam;
  step.momentum = 1;
  float dummy[4] = {};
  absl::Status status = SolverUpdateCuda(step, 1, dummy, dummy, dummy, dummy, nullptr);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status, SolverUpdateHost(step, 1, dummy, dummy, dummy, dummy));
  step.momentum = 0.9;
  status = SolverUpdateCuda(step, 1, dummy, dummy, dummy, nullptr, nullptr);
  EXPECT_NE(status.message().find("history2"), std::string::npos) << status;
  EXPECT_TRUE(SolverUpdateCuda(step, 0, nullptr, nullptr, nullptr, nullptr, nullptr).ok());
  EXPECT_EQ(SumOfSquaresCuda(-1, dummy, nullptr, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SumOfSquaresCuda(4, dummy, nullptr, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(SumOfSquaresCuda(0, nullptr, nullptr, nullptr).ok());
}

}  // namespace
}  // namespace dnn
}  // namespace kiln
