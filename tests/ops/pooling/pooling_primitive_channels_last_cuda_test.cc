// Pooling's channels-last (NHWC, NDHWC) paths against the CPU reference, forward and backward,
// f32/f16/bf16, on fresh random inputs with poisoned outputs, in the channels-last layouts and
// channel counts of tests/util/primitives_cuda_fixture.h. Max pooling is also run on inputs full
// of ties, where the gradient must go to the first maximum of each window as the reference sends
// it. Cases of //tests/kernels:primitives_channels_last_cuda_test.
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

TEST_F(ChannelsLastTest, Pooling) {
  using P = dnn::PoolingMode;
  using R = dnn::PoolingRounding;
  struct Case {
    std::vector<int64_t> dims, window, pads, strides;
    R rounding;
    bool global;
  };
  const Case cases[] = {
      // The unrolled windows: 3x3/2 (with and without padding, ceil), 2x2/2, 3x3/1.
      {{2, 24, 13, 11}, {3, 3}, {0, 0}, {2, 2}, R::kCeil, false},
      {{3, 16, 12, 12}, {3, 3}, {1, 1}, {2, 2}, R::kFloor, false},
      {{1, 37, 9, 10}, {3, 3}, {1, 1}, {2, 2}, R::kCeil, false},
      {{1, 136, 5, 5}, {3, 3}, {1, 1}, {2, 2}, R::kFloor, false},
      {{2, 3, 6, 7}, {3, 3}, {0, 0}, {2, 2}, R::kCeil, false},
      {{2, 40, 8, 9}, {2, 2}, {0, 0}, {2, 2}, R::kFloor, false},
      {{2, 12, 7, 6}, {3, 3}, {1, 1}, {1, 1}, R::kFloor, false},
      // Several tiles of outputs a side in the tiled backward (up to 8 outputs a tile).
      {{1, 16, 40, 37}, {3, 3}, {1, 1}, {2, 2}, R::kFloor, false},
      {{2, 8, 35, 33}, {3, 3}, {0, 0}, {2, 2}, R::kCeil, false},
      {{1, 8, 21, 19}, {3, 3}, {0, 0}, {1, 1}, R::kFloor, false},
      {{1, 24, 36, 34}, {2, 2}, {0, 0}, {2, 2}, R::kFloor, false},
      // Run-time windows: rectangular with padding and ceil, 3-d, global.
      {{2, 20, 17, 19}, {5, 4}, {2, 1}, {1, 2}, R::kCeil, false},
      {{2, 9, 5, 6, 7}, {2, 3, 2}, {1, 1, 0}, {2, 2, 2}, R::kFloor, false},
      {{2, 24, 6, 5}, {1, 1}, {0, 0}, {1, 1}, R::kFloor, true},
  };
  for (const Case& pc : cases) {
    for (P mode : {P::kMax, P::kAverageIncludePadding, P::kAverageExcludePadding}) {
      const dnn::PoolingDescriptor pool =
          pc.global
              ? dnn::PoolingDescriptor::Global(mode, static_cast<int>(pc.window.size()))
              : *dnn::PoolingDescriptor::Create(mode, pc.window, pc.pads, pc.strides, pc.rounding);
      for (DataType dt : kDtypes) {
        for (Last kind : kLasts) {
          for (Blend b : kBlends) {
            for (bool ties : {false, true}) {
              if (ties && mode != P::kMax) continue;
              const std::string what =
                  What(absl::StrCat("pool ", pool.ToString(), ties ? " ties" : ""), dt, kind,
                       pc.dims, b);
              TestTensor x(ChannelsLast(dt, pc.dims, kind)), dx(ChannelsLast(dt, pc.dims, kind));
              if (ties) {
                Ties(x);
              } else {
                x.Random(rng_, -2, 2);
              }
              const std::vector<int64_t> ydims = *dnn::PoolingOutputDims(pool, x.desc());
              TestTensor y(ChannelsLast(dt, ydims, kind)), dy(ChannelsLast(dt, ydims, kind));
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
}

}  // namespace
}  // namespace primitives_test
}  // namespace kiln
