// LRN: the CUDA primitives against the CPU reference, f32/f16/bf16, every layout, with
// poisoned outputs; skipped where no CUDA device is usable. Cases of
// //tests/kernels:primitives_cuda_test (tests/util/primitives_cuda_fixture.h).
#include <string>

#include "absl/strings/str_cat.h"
#include "dnn/cuda/normalization.h"
#include "dnn/primitive_reference.h"
#include "gtest/gtest.h"
#include "tests/util/primitives_cuda_fixture.h"

namespace kiln {
namespace primitives_test {
namespace {

TEST_F(PrimitivesCudaTest, Lrn) {
  const dnn::LrnDescriptor lrns[] = {
      *dnn::LrnDescriptor::Create(dnn::LrnMode::kAcrossChannels, 5, 0.3, 0.75, 2.0),
      *dnn::LrnDescriptor::Create(dnn::LrnMode::kAcrossChannels, 3, 1.5, 0.6, 1.0),
      *dnn::LrnDescriptor::Create(dnn::LrnMode::kWithinChannel, 3, 0.8, 0.75, 1.0),
  };
  for (const auto& lrn : lrns) {
    for (DataType dt : kDtypes) {
      for (Layout layout : kLayouts) {
        for (const auto& dims : WithExtra(Shapes(), {{2, 37, 5, 7}})) {
          for (Blend b : kBlends) {
            const std::string what =
                absl::StrCat("lrn ", lrn.ToString(), " ", Label(dt, layout, dims, b));
            TestTensor x(dt, dims, layout), y(dt, dims, layout), dy(dt, dims, layout),
                dx(dt, dims, layout);
            x.Random(rng_, -2, 2);
            RunAndCheck(
                what + " fwd", y, b, ToleranceFor(dt, 4),
                [&] {
                  return dnn::LrnForward(*handle_, lrn, b.alpha, x.desc(), x.d(), b.beta, y.desc(),
                                         y.d());
                },
                [&](double* want) {
                  return ref::LrnForward(lrn, b.alpha, x.desc(), x.h(), b.beta, y.desc(), want);
                });
            ASSERT_TRUE(
                dnn::LrnForward(*handle_, lrn, 1, x.desc(), x.d(), 0, y.desc(), y.d()).ok());
            ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
            y.host() = y.Download();
            dy.Random(rng_, -1, 1);
            RunAndCheck(
                what + " bwd", dx, b, ToleranceFor(dt, 8),
                [&] {
                  return dnn::LrnBackward(*handle_, lrn, b.alpha, y.desc(), y.d(), dy.desc(),
                                          dy.d(), x.desc(), x.d(), b.beta, dx.desc(), dx.d());
                },
                [&](double* want) {
                  return ref::LrnBackward(lrn, b.alpha, y.desc(), y.h(), dy.desc(), dy.h(),
                                          x.desc(), x.h(), b.beta, dx.desc(), want);
                });
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace primitives_test
}  // namespace kiln
