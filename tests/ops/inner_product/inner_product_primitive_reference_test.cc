// Inner product: the CPU reference of the primitives against finite differences and Caffe/cuDNN
// semantics. Cases of //tests/kernels:primitives_reference_test
// (tests/util/primitive_reference_check.h).
#include <cstdint>
#include <random>
#include <vector>

#include "dnn/primitive_reference.h"
#include "gtest/gtest.h"
#include "tests/util/primitive_reference_check.h"
#include "tests/util/primitive_test_util.h"

namespace kiln {
namespace primitives_test {
namespace {

TEST(PrimitivesReferenceTest, InnerProductGradients) {
  std::mt19937 rng(12);
  for (bool transposed : {false, true}) {
    const LaidOut x = testing::MakeLayout(DataType::kF32, {3, 2, 2, 2}, Layout::kPacked);
    const int64_t k = 8, n = 5;
    const TensorDescriptor wd = *TensorDescriptor::CreatePacked(
        DataType::kF32, dnn::TensorFormat::kNCHW,
        transposed ? std::vector<int64_t>{k, n} : std::vector<int64_t>{n, k});
    const TensorDescriptor yd =
        *TensorDescriptor::CreatePacked(DataType::kF32, dnn::TensorFormat::kNCHW, {3, n});
    Vec xv = testing::Uniform(x.BufferElements(), -1, 1, rng);
    Vec w = testing::Uniform(n * k, -1, 1, rng), bias = testing::Uniform(n, -1, 1, rng);
    const Vec dy = testing::Uniform(3 * n, -1, 1, rng);
    auto f = [&](const Vec& xa, const Vec& wa, const Vec& ba) {
      Vec y(3 * n, 0.0);
      EXPECT_OK(ref::InnerProductForward(1, transposed, 1, x.desc, xa.data(), wd, wa.data(),
                                         ba.data(), 0, yd, y.data()));
      return y;
    };
    Vec dx(xv.size(), 0.0), dw(w.size(), 0.0), db(n, 0.0);
    ASSERT_OK(ref::InnerProductBackwardData(1, transposed, 1, yd, dy.data(), wd, w.data(), 0,
                                            x.desc, dx.data()));
    ASSERT_OK(ref::InnerProductBackwardFilter(1, transposed, 1, x.desc, xv.data(), yd, dy.data(), 0,
                                              wd, dw.data()));
    const TensorDescriptor bd =
        *TensorDescriptor::CreatePacked(DataType::kF32, dnn::TensorFormat::kNCHW, {1, n});
    ASSERT_OK(ref::ReduceTensorSum(1, yd, dy.data(), 0, bd, db.data()));
    testing::ExpectGradient(
        "ip dx", {}, xv, [&](const Vec& a) { return f(a, w, bias); }, dy, dx);
    testing::ExpectGradient(
        "ip dw", {}, w, [&](const Vec& a) { return f(xv, a, bias); }, dy, dw);
    testing::ExpectGradient(
        "ip db", {}, bias, [&](const Vec& a) { return f(xv, w, a); }, dy, db);
  }
}

}  // namespace
}  // namespace primitives_test
}  // namespace kiln
