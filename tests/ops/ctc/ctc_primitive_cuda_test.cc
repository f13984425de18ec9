// The CTC loss on the GPU (dnn/cuda/ctc/ctc_loss.h) against the CPU reference on fresh random
// inputs rounded to each dtype: losses and gradient, outputs and workspace poisoned before the
// call, every input mode and reduction, long inputs (T = 1000, C = 5000), labels long enough to
// loop over the state threads, ragged lengths, impossible alignments, bitwise determinism.
// Skips where no CUDA device is usable.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dnn/ctc/ctc_loss.h"
#include "dnn/cuda/ctc/ctc_loss.h"
#include "gtest/gtest.h"
#include "tests/util/primitives_cuda_fixture.h"

namespace kiln {
namespace primitives_test {
namespace {

using dnn::CtcLossDescriptor;
using dnn::CtcLossInputs;
using dnn::CtcReduction;

struct Case {
  int64_t T, C;
  int32_t blank;
  std::vector<int32_t> label_lengths, input_lengths;
};

// The gradient's tolerance: the output's rounding (ToleranceFor) plus the f32 recursion's error,
// which grows with the number of frames (at T = 1000 the posteriors of a label were seen 1.2e-4
// off relative, 3.4e-5 absolute, on an H100).
Tolerance GradTolerance(DataType dtype, int64_t T) {
  Tolerance t = ToleranceFor(dtype);
  if (dtype == DataType::kF32) t.atol = 2e-6 + 1e-7 * T;
  return t;
}

// |got - want| <= atol + rtol |want|, NaN matching NaN and infinities matching exactly.
void ExpectClose(const std::string& what, const Vec& got, const Vec& want, Tolerance tol) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int failures = 0;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    bool ok;
    if (std::isnan(want[i]) || std::isinf(want[i])) {
      ok = std::isnan(want[i]) ? std::isnan(got[i]) : got[i] == want[i];
    } else {
      const double err = std::fabs(got[i] - want[i]);
      worst = std::max(worst, err / (tol.atol + tol.rtol * std::fabs(want[i])));
      ok = err <= tol.atol + tol.rtol * std::fabs(want[i]);
    }
    if (!ok && ++failures <= 5) {
      ADD_FAILURE() << what << ": element " << i << " got " << got[i] << " want " << want[i];
    }
  }
  EXPECT_EQ(failures, 0) << what;
  std::printf("%s: worst error %.3g of tolerance\n", what.c_str(), worst);
}

class CtcCudaTest : public PrimitivesCudaTest {
 protected:
  // Random labels; repeats (which need a blank between) where the input length leaves room.
  std::vector<int32_t> Labels(const Case& k) {
    std::vector<int32_t> labels;
    for (size_t n = 0; n < k.label_lengths.size(); ++n) {
      std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(k.C) - 2);
      std::bernoulli_distribution repeat(0.3);
      int32_t room = k.input_lengths[n] - k.label_lengths[n];
      for (int32_t i = 0; i < k.label_lengths[n]; ++i) {
        int32_t v;
        if (i > 0 && room > 0 && repeat(rng_)) {
          v = labels.back();
        } else {
          do {
            v = pick(rng_);
            if (v >= k.blank) ++v;
          } while (i > 0 && v == labels.back() && room == 0);
        }
        if (i > 0 && v == labels.back()) --room;
        labels.push_back(v);
      }
    }
    return labels;
  }

  struct Outputs {
    Vec losses, grad;
    std::vector<char> loss_bits, grad_bits;
  };

  // One GPU call over poisoned outputs and workspace.
  Outputs RunGpu(const CtcLossDescriptor& d, const CtcLossInputs& in, const TestTensor& x,
                 TestTensor& grad, bool with_grad) {
    Outputs o;
    const int64_t count = dnn::CtcLossOutputCount(d, in.batch);
    DeviceBuffer losses(Vec(count, NAN));
    grad.Poison(rng_, 0);
    absl::StatusOr<size_t> bytes = dnn::CtcLossWorkspaceBytes(d, in);
    EXPECT_TRUE(bytes.ok()) << bytes.status();
    if (!bytes.ok()) return o;
    DeviceBuffer ws(*bytes);
    EXPECT_EQ(cudaMemset(ws.get(), 0xff, *bytes), cudaSuccess);  // NaN floats, -1 ints
    const absl::Status s = dnn::CtcLoss(*handle_, d, in, x.d(), static_cast<float*>(losses.get()),
                                        with_grad ? grad.d() : nullptr, ws.get(), ws.bytes());
    EXPECT_TRUE(s.ok()) << s;
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    o.losses = losses.Get(count);
    o.grad = grad.Download();
    o.loss_bits.resize(count * 4);
    EXPECT_EQ(cudaMemcpy(o.loss_bits.data(), losses.get(), count * 4, cudaMemcpyDeviceToHost),
              cudaSuccess);
    o.grad_bits.resize(grad.host().size() * DataTypeSize(grad.dtype()));
    EXPECT_EQ(cudaMemcpy(o.grad_bits.data(), grad.d(), o.grad_bits.size(), cudaMemcpyDeviceToHost),
              cudaSuccess);
    return o;
  }

  // Runs the case on the GPU and the reference and compares; returns the GPU's outputs.
  Outputs Compare(const Case& k, DataType dtype, const CtcLossDescriptor& d, bool with_grad = true,
                  std::vector<int32_t> labels = {}) {
    const int64_t N = static_cast<int64_t>(k.label_lengths.size());
    if (labels.empty()) labels = Labels(k);
    CtcLossInputs in;
    in.dtype = dtype;
    in.max_time = k.T;
    in.batch = N;
    in.classes = k.C;
    in.labels = labels;
    in.label_lengths = k.label_lengths;
    in.input_lengths = k.input_lengths;
    const std::vector<int64_t> dims = {k.T, N, k.C};
    TestTensor x(dtype, dims, Layout::kPacked), grad(dtype, dims, Layout::kPacked);
    x.Random(rng_, -3, 3);
    if (d.inputs_are_log_probs) {  // rows normalized, as PyTorch expects, then rounded
      for (int64_t r = 0; r < k.T * N; ++r) {
        double* row = x.h() + r * k.C;
        double m = row[0], s = 0;
        for (int64_t c = 1; c < k.C; ++c) m = std::max(m, row[c]);
        for (int64_t c = 0; c < k.C; ++c) s += std::exp(row[c] - m);
        for (int64_t c = 0; c < k.C; ++c) row[c] = RoundTo(dtype, row[c] - m - std::log(s));
      }
      x.Upload();
    }
    const std::string what =
        absl::StrCat(DataTypeName(dtype), " T", k.T, " N", N, " C", k.C, " blank ", k.blank,
                     d.inputs_are_log_probs ? " log-probs" : " logits", " reduction ",
                     static_cast<int>(d.reduction), d.zero_infinity ? " zero_infinity" : "");
    Vec want_losses(dnn::CtcLossOutputCount(d, N)), want_grad(x.host().size());
    const absl::Status rs = dnn::reference::CtcLoss(d, in, x.h(), want_losses.data(),
                                                    with_grad ? want_grad.data() : nullptr);
    EXPECT_TRUE(rs.ok()) << what << ": " << rs;
    Outputs got = RunGpu(d, in, x, grad, with_grad);
    ++checks_;
    // f32 log-space sums over T frames: relative error of a few ulps of the loss per frame.
    ExpectClose(what + " losses", got.losses, want_losses, {1e-4, 2e-6 + 2e-9 * k.T});
    if (with_grad) {
      ExpectClose(what + " grad", got.grad, want_grad, GradTolerance(dtype, k.T));
    } else {
      bool untouched = true;
      for (double g : got.grad) untouched = untouched && std::isnan(g);
      EXPECT_TRUE(untouched) << what << ": grad written without a gradient asked for";
    }
    return got;
  }
};

TEST_F(CtcCudaTest, SmallEveryDtypeModeAndReduction) {
  const Case k = {50, 30, 0, {0, 5, 12, 20}, {50, 37, 50, 44}};
  for (DataType dtype : kDtypes) {
    for (bool log_probs : {false, true}) {
      for (CtcReduction red :
           {CtcReduction::kNone, CtcReduction::kSum, CtcReduction::kMeanByTargetLength}) {
        CtcLossDescriptor d;
        d.inputs_are_log_probs = log_probs;
        d.reduction = red;
        d.grad_scale = red == CtcReduction::kSum ? 0.5f : 1.0f;
        Compare(k, dtype, d);
      }
    }
  }
}

TEST_F(CtcCudaTest, BlankNotZeroAndLossOnly) {
  const Case k = {40, 17, 16, {3, 9, 1}, {40, 25, 0}};
  CtcLossDescriptor d;
  d.blank = 16;
  Compare(k, DataType::kF32, d);
  d.blank = 7;
  Compare({40, 17, 7, {3, 9, 1}, {40, 25, 3}}, DataType::kF16, d, /*with_grad=*/false);
}

// T = 1000 frames over a 5000-class vocabulary, labels up to 100 long, ragged input lengths.
TEST_F(CtcCudaTest, LongInputsLargeVocabulary) {
  const Case k = {1000, 5000, 0, {100, 63}, {1000, 811}};
  for (DataType dtype : kDtypes) {
    CtcLossDescriptor d;
    Compare(k, dtype, d);
  }
  CtcLossDescriptor d;
  d.inputs_are_log_probs = true;
  d.blank = 4999;
  Compare({1000, 5000, 4999, {100, 1}, {977, 1000}}, DataType::kF32, d);
}

// 2 L + 1 beyond the 512 threads of a state block (the block loops), and a larger batch.
TEST_F(CtcCudaTest, LongLabelsAndLargeBatch) {
  Compare({700, 40, 0, {300, 150, 1}, {700, 640, 5}}, DataType::kF32, CtcLossDescriptor());
  Compare({700, 40, 0, {300, 150, 1}, {700, 640, 5}}, DataType::kBF16, CtcLossDescriptor());
  Case k = {120, 50, 0, {}, {}};
  std::uniform_int_distribution<int32_t> frames(0, 120), length(0, 40);
  for (int n = 0; n < 64; ++n) {
    k.input_lengths.push_back(frames(rng_));
    k.label_lengths.push_back(std::min(length(rng_), k.input_lengths.back() / 2));
  }
  CtcLossDescriptor d;
  d.reduction = CtcReduction::kMeanByTargetLength;
  Compare(k, DataType::kF32, d);
  Compare(k, DataType::kF16, d);
}

// Labels needing more frames than the input has: infinite loss and NaN gradient rows, or 0 for
// both with zero_infinity; the possible samples beside them are unaffected.
TEST_F(CtcCudaTest, ImpossibleAlignments) {
  const Case k = {6, 5, 0, {3, 2, 4}, {2, 6, 4}};
  const std::vector<int32_t> labels = {1, 2, 3, 4, 4, 2, 2, 3, 1};  // "2 2 3 1" needs 5 frames
  for (bool zero : {false, true}) {
    for (CtcReduction red : {CtcReduction::kNone, CtcReduction::kMeanByTargetLength}) {
      CtcLossDescriptor d;
      d.zero_infinity = zero;
      d.reduction = red;
      Compare(k, DataType::kF32, d, true, labels);
    }
  }
}

// Two runs of the same call give the same bits.
TEST_F(CtcCudaTest, Deterministic) {
  const Case k = {1000, 5000, 0, {80, 100, 37}, {1000, 900, 1000}};
  for (DataType dtype : {DataType::kF32, DataType::kBF16}) {
    const std::vector<int32_t> labels = Labels(k);
    CtcLossInputs in;
    in.dtype = dtype;
    in.max_time = k.T;
    in.batch = 3;
    in.classes = k.C;
    in.labels = labels;
    in.label_lengths = k.label_lengths;
    in.input_lengths = k.input_lengths;
    TestTensor x(dtype, {k.T, 3, k.C}, Layout::kPacked),
        grad(dtype, {k.T, 3, k.C}, Layout::kPacked);
    x.Random(rng_, -3, 3);
    CtcLossDescriptor d;
    d.reduction = CtcReduction::kSum;
    const Outputs a = RunGpu(d, in, x, grad, true);
    const Outputs b = RunGpu(d, in, x, grad, true);
    ++checks_;
    EXPECT_EQ(a.loss_bits, b.loss_bits) << DataTypeName(dtype);
    EXPECT_TRUE(a.grad_bits == b.grad_bits) << DataTypeName(dtype) << ": gradients differ";
    EXPECT_TRUE(std::isfinite(a.losses[0]));
  }
}

// The GPU entry refuses what the reference refuses, plus null operands and a short workspace.
TEST_F(CtcCudaTest, RefusesBadArguments) {
  std::vector<int32_t> labels = {1, 2, 3}, label_lengths = {1, 2}, input_lengths = {3, 5};
  CtcLossInputs in;
  in.max_time = 5;
  in.batch = 2;
  in.classes = 4;
  in.labels = labels;
  in.label_lengths = label_lengths;
  in.input_lengths = input_lengths;
  const CtcLossDescriptor d;
  absl::StatusOr<size_t> bytes = dnn::CtcLossWorkspaceBytes(d, in);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  DeviceBuffer x(40 * 4), losses(2 * 4), ws(*bytes);
  float* l = static_cast<float*>(losses.get());
  EXPECT_EQ(dnn::CtcLoss(*handle_, d, in, nullptr, l, nullptr, ws.get(), *bytes).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(dnn::CtcLoss(*handle_, d, in, x.get(), nullptr, nullptr, ws.get(), *bytes).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(dnn::CtcLoss(*handle_, d, in, x.get(), l, nullptr, ws.get(), *bytes - 1).code(),
            absl::StatusCode::kResourceExhausted);
  labels[2] = 9;
  const absl::Status s = dnn::CtcLoss(*handle_, d, in, x.get(), l, nullptr, ws.get(), *bytes);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.message()).find("labels[2] = 9"), std::string::npos) << s;
  labels[2] = 3;
  EXPECT_TRUE(dnn::CtcLoss(*handle_, d, in, x.get(), l, nullptr, ws.get(), *bytes).ok());
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

}  // namespace
}  // namespace primitives_test
}  // namespace kiln
