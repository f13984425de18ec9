// Eltwise: the CPU reference of the primitives against finite differences and Caffe/cuDNN
// semantics. Cases of //tests/kernels:primitives_reference_test
// (tests/util/primitive_reference_check.h).
#include <cstdint>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dnn/primitive_reference.h"
#include "gtest/gtest.h"
#include "tests/util/primitive_reference_check.h"
#include "tests/util/primitive_test_util.h"

namespace kiln {
namespace primitives_test {
namespace {

TEST(PrimitivesReferenceTest, EltwiseGradients) {
  std::mt19937 rng(11);
  for (auto op : {dnn::EltwiseOp::kSum, dnn::EltwiseOp::kProd, dnn::EltwiseOp::kMax}) {
    const LaidOut a = testing::MakeLayout(DataType::kF32, {2, 3, 2, 3}, Layout::kPacked);
    const LaidOut b = testing::MakeLayout(DataType::kF32, {2, 3, 2, 3}, Layout::kStrided);
    const LaidOut c = testing::MakeLayout(DataType::kF32, {2, 3, 2, 3}, Layout::kChannelsLast);
    const std::vector<TensorDescriptor> xds = {a.desc, b.desc, c.desc};
    const std::vector<double> coefficients =
        op == dnn::EltwiseOp::kSum ? std::vector<double>{0.5, -2, 1.5} : std::vector<double>{};
    // One pool of distinct values shared by the inputs, so max has a unique winner.
    const Vec pool =
        testing::Distinct(a.BufferElements() + b.BufferElements() + c.BufferElements(), 0.01, rng);
    std::vector<Vec> xs = {Vec(pool.begin(), pool.begin() + a.BufferElements()),
                           Vec(pool.begin() + a.BufferElements(),
                               pool.begin() + a.BufferElements() + b.BufferElements()),
                           Vec(pool.end() - c.BufferElements(), pool.end())};
    for (Vec& v : xs) {
      for (double& e : v) e *= 40;  // values up to ~2 so products have useful gradients
    }
    const LaidOut& yl = a;
    const Vec dy = testing::Uniform(yl.BufferElements(), -1, 1, rng);
    const int64_t offsets[] = {a.offset, b.offset, c.offset};
    auto pointers = [&](const std::vector<Vec>& v) {
      std::vector<const double*> p;
      for (int i = 0; i < 3; ++i) p.push_back(v[i].data() + offsets[i]);
      return p;
    };
    for (int which = 0; which < 3; ++which) {
      Vec dx(xs[which].size(), 0.0);
      ASSERT_OK(ref::EltwiseBackward(op, coefficients, which, 1, xds, pointers(xs), yl.desc,
                                     dy.data(), 0, xds[which], dx.data() + offsets[which]));
      testing::ExpectGradient(
          absl::StrCat("eltwise ", static_cast<int>(op), " input ", which), {}, xs[which],
          [&](const Vec& at) {
            std::vector<Vec> v = xs;
            v[which] = at;
            Vec y(yl.BufferElements(), 0.0);
            EXPECT_OK(
                ref::EltwiseForward(op, coefficients, 1, xds, pointers(v), 0, yl.desc, y.data()));
            return y;
          },
          dy, dx);
    }
  }
}

}  // namespace
}  // namespace primitives_test
}  // namespace kiln
