// Tensor ops, Eltwise and Concat: the CUDA primitives against the CPU reference, f32/f16/bf16,
// every layout, with poisoned outputs; skipped where no CUDA device is usable. Cases of
// //tests/kernels:primitives_cuda_test (tests/util/primitives_cuda_fixture.h).
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dnn/cuda/tensor_ops.h"
#include "dnn/primitive_checks.h"
#include "dnn/primitive_reference.h"
#include "gtest/gtest.h"
#include "tests/util/primitives_cuda_fixture.h"

namespace kiln {
namespace primitives_test {
namespace {

TEST_F(PrimitivesCudaTest, TensorOpsEltwiseConcat) {
  for (DataType dt : kDtypes) {
    for (Layout layout : kLayouts) {
      for (const auto& dims : Shapes()) {
        for (Blend b : kBlends) {
          const std::string what = Label(dt, layout, dims, b);
          // Transform from every layout and dtype into this one.
          for (Layout from : kLayouts) {
            for (DataType from_dt : kDtypes) {
              TestTensor x(from_dt, dims, from), y(dt, dims, layout);
              x.Random(rng_, -2, 2);
              RunAndCheck(
                  absl::StrCat("transform from ", DataTypeName(from_dt), " ",
                               testing::LayoutName(from), " to ", what),
                  y, b, ToleranceFor(dt),
                  [&] {
                    return dnn::TransformTensor(*handle_, b.alpha, x.desc(), x.d(), b.beta,
                                                y.desc(), y.d());
                  },
                  [&](double* want) {
                    return ref::TransformTensor(b.alpha, x.desc(), x.h(), b.beta, y.desc(), want);
                  });
            }
          }
          TestTensor y(dt, dims, layout);
          std::vector<int64_t> bias_dims(dims.size(), 1);
          bias_dims[1] = dims[1];
          for (std::vector<int64_t> bdims : {bias_dims, std::vector<int64_t>(dims.size(), 1),
                                             std::vector<int64_t>{dims[0], 1, dims[2], 1}}) {
            TestTensor bt(dt, bdims, Layout::kPacked);
            bt.Random(rng_, -1, 1);
            RunAndCheck(
                absl::StrCat("add [", absl::StrJoin(bdims, ","), "] ", what), y, b,
                ToleranceFor(dt),
                [&] {
                  return dnn::AddTensor(*handle_, b.alpha, bt.desc(), bt.d(), b.beta, y.desc(),
                                        y.d());
                },
                [&](double* want) {
                  return ref::AddTensor(b.alpha, bt.desc(), bt.h(), b.beta, y.desc(), want);
                });
            // The bias gradient: dy summed onto b's shape, in f32.
            const TensorDescriptor dbd =
                *TensorDescriptor::CreatePacked(DataType::kF32, dnn::TensorFormat::kNCHW, bdims);
            Vec old_db = testing::Uniform(dbd.ElementCount(), -1, 1, rng_);
            DeviceBuffer db_d(old_db), ws(dnn::ReduceTensorSumWorkspaceSize(y.desc(), dbd));
            y.Random(rng_, -1, 1);
            ASSERT_TRUE(dnn::ReduceTensorSum(*handle_, b.alpha, y.desc(), y.d(), b.beta, dbd,
                                             db_d.get(), ws.get(), ws.bytes())
                            .ok());
            ASSERT_TRUE(
                ref::ReduceTensorSum(b.alpha, y.desc(), y.h(), b.beta, dbd, old_db.data()).ok());
            CheckParams(absl::StrCat("reduce to [", absl::StrJoin(bdims, ","), "] ", what), db_d,
                        old_db, ToleranceFor(dt, 100));
            // The scale gradient: Σ y other onto b's shape in one pass, against the sum of the
            // product (gaps are NaN in both, and the reference reads no gap).
            TestTensor other(dt, dims, layout);
            other.Random(rng_, -1, 1);
            Vec old_dot = testing::Uniform(dbd.ElementCount(), -1, 1, rng_);
            DeviceBuffer dot_d(old_dot), dot_ws(dnn::ReduceTensorDotWorkspaceSize(y.desc(), dbd));
            ASSERT_TRUE(dnn::ReduceTensorDot(*handle_, b.alpha, y.desc(), y.d(), other.desc(),
                                             other.d(), b.beta, dbd, dot_d.get(), dot_ws.get(),
                                             dot_ws.bytes())
                            .ok());
            Vec product = y.host();
            for (size_t i = 0; i < product.size(); ++i) product[i] *= other.host()[i];
            const ptrdiff_t first = y.h() - y.host().data();  // the layout's leading offset
            ASSERT_TRUE(ref::ReduceTensorSum(b.alpha, y.desc(), product.data() + first, b.beta, dbd,
                                             old_dot.data())
                            .ok());
            CheckParams(absl::StrCat("dot to [", absl::StrJoin(bdims, ","), "] ", what), dot_d,
                        old_dot, ToleranceFor(dt, 100));
          }
          // Scale in place.
          y.Random(rng_, -1, 1);
          Vec want = y.host();
          for (double& v : want) v *= 0.5;
          Check("scale " + what, dnn::ScaleTensor(*handle_, y.desc(), y.d(), 0.5f), y, want,
                ToleranceFor(dt));
          // Eltwise with three inputs in three layouts.
          for (auto op : {dnn::EltwiseOp::kSum, dnn::EltwiseOp::kProd, dnn::EltwiseOp::kMax}) {
            TestTensor a(dt, dims, Layout::kPacked), c(dt, dims, Layout::kStrided),
                d(dt, dims, Layout::kChannelsLast), dy(dt, dims, layout), dx(dt, dims, layout);
            a.Random(rng_, -2, 2);
            c.Random(rng_, -2, 2);
            d.Random(rng_, -2, 2);
            dy.Random(rng_, -1, 1);
            const std::vector<TensorDescriptor> xds = {a.desc(), c.desc(), d.desc()};
            const std::vector<const void*> xs = {a.d(), c.d(), d.d()};
            const std::vector<const double*> hs = {a.h(), c.h(), d.h()};
            const std::vector<double> coef = op == dnn::EltwiseOp::kSum
                                                 ? std::vector<double>{0.5, -2, 1.5}
                                                 : std::vector<double>{};
            const std::string w = absl::StrCat("eltwise ", static_cast<int>(op), " ", what);
            RunAndCheck(
                w, y, b, ToleranceFor(dt, 4),
                [&] {
                  return dnn::EltwiseForward(*handle_, op, coef, b.alpha, xds, xs, b.beta, y.desc(),
                                             y.d());
                },
                [&](double* want) {
                  return ref::EltwiseForward(op, coef, b.alpha, xds, hs, b.beta, y.desc(), want);
                });
            for (int which = 0; which < 3; ++which) {
              RunAndCheck(
                  absl::StrCat(w, " bwd ", which), dx, b, ToleranceFor(dt, 4),
                  [&] {
                    return dnn::EltwiseBackward(*handle_, op, coef, which, b.alpha, xds, xs,
                                                dy.desc(), dy.d(), b.beta, dx.desc(), dx.d());
                  },
                  [&](double* want) {
                    return ref::EltwiseBackward(op, coef, which, b.alpha, xds, hs, dy.desc(),
                                                dy.h(), b.beta, dx.desc(), want);
                  });
            }
          }
        }
        // Concat along channels then slice back; parts in different layouts.
        std::vector<int64_t> d1 = dims, d2 = dims;
        d1[1] = 2;
        d2[1] = 3;
        std::vector<int64_t> whole = dims;
        whole[1] = 5;
        TestTensor p1(dt, d1, Layout::kPacked), p2(dt, d2, Layout::kStrided),
            cat(dt, whole, layout), s1(dt, d1, Layout::kChannelsLast), s2(dt, d2, Layout::kPacked);
        p1.Random(rng_, -1, 1);
        p2.Random(rng_, -1, 1);
        const std::string what = Label(dt, layout, whole, {1, 0});
        RunAndCheck(
            "concat " + what, cat, {1, 0}, ToleranceFor(dt),
            [&] {
              return dnn::ConcatForward(*handle_, 1, {p1.desc(), p2.desc()}, {p1.d(), p2.d()},
                                        cat.desc(), cat.d());
            },
            [&](double* want) {
              const dnn::SubTensor a = dnn::SliceAlong(cat.desc(), 1, 0, 2);
              const dnn::SubTensor c = dnn::SliceAlong(cat.desc(), 1, 2, 3);
              absl::Status s =
                  ref::TransformTensor(1, p1.desc(), p1.h(), 0, a.desc, want + a.offset);
              if (s.ok())
                s = ref::TransformTensor(1, p2.desc(), p2.h(), 0, c.desc, want + c.offset);
              return s;
            });
        cat.host() = cat.Download();
        s1.Poison(rng_, 0);
        s2.Poison(rng_, 0);
        ASSERT_TRUE(dnn::SliceForward(*handle_, 1, cat.desc(), cat.d(), {s1.desc(), s2.desc()},
                                      {s1.d(), s2.d()})
                        .ok());
        Vec want1 = s1.host(), want2 = s2.host();
        ASSERT_TRUE(
            ref::TransformTensor(1, p1.desc(), p1.h(), 0, s1.desc(), want1.data() + s1.offset())
                .ok());
        ASSERT_TRUE(
            ref::TransformTensor(1, p2.desc(), p2.h(), 0, s2.desc(), want2.data() + s2.offset())
                .ok());
        Check("slice part 1 " + what, absl::OkStatus(), s1, want1, ToleranceFor(dt));
        Check("slice part 2 " + what, absl::OkStatus(), s2, want2, ToleranceFor(dt));
      }
    }
  }
}

}  // namespace
}  // namespace primitives_test
}  // namespace kiln
