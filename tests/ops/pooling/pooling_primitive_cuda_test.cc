// Pooling: the CUDA primitives against the CPU reference, f32/f16/bf16, every layout, with
// poisoned outputs; skipped where no CUDA device is usable. Cases of
// //tests/kernels:primitives_cuda_test (tests/util/primitives_cuda_fixture.h).
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dnn/cuda/pooling.h"
#include "dnn/primitive_reference.h"
#include "gtest/gtest.h"
#include "tests/util/primitives_cuda_fixture.h"

namespace kiln {
namespace primitives_test {
namespace {

TEST_F(PrimitivesCudaTest, Pooling) {
  using P = dnn::PoolingMode;
  struct Case {
    std::vector<int64_t> dims, window, pads, strides;
    dnn::PoolingRounding rounding;
    bool global;
  };
  const Case cases[] = {
      {{2, 5, 13, 11}, {3, 3}, {0, 0}, {2, 2}, dnn::PoolingRounding::kCeil, false},
      {{1, 3, 9, 10}, {3, 2}, {1, 1}, {2, 3}, dnn::PoolingRounding::kCeil, false},
      {{64, 8, 7, 7}, {2, 2}, {1, 0}, {1, 1}, dnn::PoolingRounding::kFloor, false},
      {{2, 3, 5, 6, 7}, {2, 3, 2}, {1, 1, 0}, {2, 2, 2}, dnn::PoolingRounding::kFloor, false},
      {{3, 4, 6, 5}, {1, 1}, {0, 0}, {1, 1}, dnn::PoolingRounding::kFloor, true},
      {{4, 16, 7, 7}, {1, 1}, {0, 0}, {1, 1}, dnn::PoolingRounding::kFloor, true},
      // The row kernels' unrolled windows: 2x2/2 and 3x3/1 (3x3/2 is the first case).
      {{2, 3, 8, 9}, {2, 2}, {0, 0}, {2, 2}, dnn::PoolingRounding::kFloor, false},
      {{1, 4, 6, 7}, {3, 3}, {0, 0}, {1, 1}, dnn::PoolingRounding::kFloor, false},
      // Tall enough that the row kernels split a plane into several tiles.
      {{1, 2, 150, 67}, {3, 3}, {1, 1}, {2, 2}, dnn::PoolingRounding::kFloor, false},
      {{1, 2, 120, 70}, {3, 3}, {1, 1}, {1, 1}, dnn::PoolingRounding::kFloor, false},
      // Backward scatters in ceil(window / stride) phases per axis: here 5 x 2, with padding.
      {{2, 3, 17, 19}, {5, 4}, {2, 1}, {1, 2}, dnn::PoolingRounding::kCeil, false},
  };
  for (const Case& pc : cases) {
    for (P mode : {P::kMax, P::kAverageIncludePadding, P::kAverageExcludePadding}) {
      const dnn::PoolingDescriptor pool =
          pc.global
              ? dnn::PoolingDescriptor::Global(mode, static_cast<int>(pc.window.size()))
              : *dnn::PoolingDescriptor::Create(mode, pc.window, pc.pads, pc.strides, pc.rounding);
      for (DataType dt : kDtypes) {
        for (Layout layout : kLayouts) {
          for (Blend b : kBlends) {
            const std::string what =
                absl::StrCat("pool ", pool.ToString(), " ", Label(dt, layout, pc.dims, b));
            TestTensor x(dt, pc.dims, layout), dx(dt, pc.dims, layout);
            x.Random(rng_, -2, 2);
            const LaidOut probe = testing::MakeLayout(dt, pc.dims, layout);
            const std::vector<int64_t> ydims = *dnn::PoolingOutputDims(pool, probe.desc);
            TestTensor y(dt, ydims, layout), dy(dt, ydims, layout);
            RunAndCheck(
                what + " fwd", y, b, ToleranceFor(dt, 2),
                [&] {
                  return dnn::PoolingForward(*handle_, pool, b.alpha, x.desc(), x.d(), b.beta,
                                             y.desc(), y.d());
                },
                [&](double* want) {
                  return ref::PoolingForward(pool, b.alpha, x.desc(), x.h(), b.beta, y.desc(),
                                             want);
                });
            ASSERT_TRUE(
                dnn::PoolingForward(*handle_, pool, 1, x.desc(), x.d(), 0, y.desc(), y.d()).ok());
            ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
            y.host() = y.Download();
            dy.Random(rng_, -1, 1);
            RunAndCheck(
                what + " bwd", dx, b, ToleranceFor(dt, 4),
                [&] {
                  return dnn::PoolingBackward(*handle_, pool, b.alpha, y.desc(), y.d(), dy.desc(),
                                              dy.d(), x.desc(), x.d(), b.beta, dx.desc(), dx.d());
                },
                [&](double* want) {
                  return ref::PoolingBackward(pool, b.alpha, y.desc(), y.h(), dy.desc(), dy.h(),
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
