// Inner product: the CUDA primitives against the CPU reference, f32/f16/bf16, every layout, with
// poisoned outputs; skipped where no CUDA device is usable. Cases of
// //tests/kernels:primitives_cuda_test (tests/util/primitives_cuda_fixture.h).
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dnn/cuda/inner_product.h"
#include "dnn/primitive_reference.h"
#include "gtest/gtest.h"
#include "tests/util/primitives_cuda_fixture.h"

namespace kiln {
namespace primitives_test {
namespace {

TEST_F(PrimitivesCudaTest, InnerProduct) {
  for (DataType dt : kDtypes) {
    for (auto math : {dnn::MathMode::kFp32, dnn::MathMode::kTf32}) {
      if (dt != DataType::kF32 && math == dnn::MathMode::kTf32) continue;
      for (bool transposed : {false, true}) {
        for (const auto& dims : Shapes()) {
          for (Blend b : kBlends) {
            const int64_t k = dims[1] * dims[2] * dims[3], n = 37;
            const std::string what =
                absl::StrCat("ip ", math == dnn::MathMode::kTf32 ? "tf32 " : "",
                             transposed ? "transposed " : "", Label(dt, Layout::kPacked, dims, b));
            // A tf32/f16/bf16 product rounds inputs; the K-long sums get a K-scaled tolerance.
            const Tolerance tol = dt == DataType::kF32 && math == dnn::MathMode::kTf32
                                      ? Tolerance{2e-3 * std::sqrt(static_cast<double>(k)), 1e-2}
                                      : ToleranceFor(dt, std::sqrt(static_cast<double>(k)) * 4);
            TestTensor x(dt, dims, Layout::kPacked), dx(dt, dims, Layout::kPacked),
                w(dt, transposed ? std::vector<int64_t>{k, n} : std::vector<int64_t>{n, k},
                  Layout::kPacked),
                dw(dt, transposed ? std::vector<int64_t>{k, n} : std::vector<int64_t>{n, k},
                   Layout::kPacked),
                bias(dt, {n}, Layout::kPacked), y(dt, {dims[0], n}, Layout::kPacked),
                dy(dt, {dims[0], n}, Layout::kPacked);
            x.Random(rng_, -1, 1);
            w.Random(rng_, -1, 1);
            bias.Random(rng_, -1, 1);
            dy.Random(rng_, -1, 1);
            RunAndCheck(
                what + " fwd", y, b, tol,
                [&] {
                  return dnn::InnerProductForward(*handle_, 1, transposed, math, b.alpha, x.desc(),
                                                  x.d(), w.desc(), w.d(), bias.d(), b.beta,
                                                  y.desc(), y.d());
                },
                [&](double* want) {
                  return ref::InnerProductForward(1, transposed, b.alpha, x.desc(), x.h(), w.desc(),
                                                  w.h(), bias.h(), b.beta, y.desc(), want);
                });
            RunAndCheck(
                what + " bwd data", dx, b, tol,
                [&] {
                  return dnn::InnerProductBackwardData(*handle_, 1, transposed, math, b.alpha,
                                                       dy.desc(), dy.d(), w.desc(), w.d(), b.beta,
                                                       dx.desc(), dx.d());
                },
                [&](double* want) {
                  return ref::InnerProductBackwardData(1, transposed, b.alpha, dy.desc(), dy.h(),
                                                       w.desc(), w.h(), b.beta, dx.desc(), want);
                });
            const Tolerance ftol =
                dt == DataType::kF32 && math == dnn::MathMode::kTf32
                    ? Tolerance{2e-3 * std::sqrt(static_cast<double>(dims[0])) * 4, 1e-2}
                    : ToleranceFor(dt, std::sqrt(static_cast<double>(dims[0])) * 4);
            RunAndCheck(
                what + " bwd filter", dw, b, ftol,
                [&] {
                  return dnn::InnerProductBackwardFilter(*handle_, 1, transposed, math, b.alpha,
                                                         x.desc(), x.d(), dy.desc(), dy.d(), b.beta,
                                                         dw.desc(), dw.d());
                },
                [&](double* want) {
                  return ref::InnerProductBackwardFilter(1, transposed, b.alpha, x.desc(), x.h(),
                                                         dy.desc(), dy.h(), b.beta, dw.desc(),
                                                         want);
                });
          }
        }
      }
    }
  }
  // A layout cuBLAS cannot take is refused with the reason, not computed wrongly.
  const LaidOut strided = testing::MakeLayout(DataType::kF32, {2, 3, 4, 5}, Layout::kStrided);
  const TensorDescriptor wd =
      *TensorDescriptor::CreatePacked(DataType::kF32, dnn::TensorFormat::kNCHW, {7, 60});
  const TensorDescriptor yd =
      *TensorDescriptor::CreatePacked(DataType::kF32, dnn::TensorFormat::kNCHW, {2, 7});
  const absl::Status s =
      dnn::InnerProductForward(*handle_, 1, false, dnn::MathMode::kFp32, 1, strided.desc, nullptr,
                               wd, nullptr, nullptr, 0, yd, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
}

}  // namespace
}  // namespace primitives_test
}  // namespace kiln
