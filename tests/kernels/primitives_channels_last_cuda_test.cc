// The channels-last (NHWC, NDHWC) paths of pooling and LRN against the CPU reference, forward and
// backward, f32/f16/bf16, on fresh random inputs with poisoned outputs (primitives_cuda_fixture.h).
// The fast kernels move 16-byte chunks of channels (8 of f16/bf16, 4 of f32), so the channel
// counts are chosen around that: multiples of 8 (every access a vector), odd and small counts
// (a partial last chunk, element accesses), and counts whose rows put a warp's first lane in the
// middle of a row (LRN's neighbour chunks by shuffle and by load). Three layouts: packed, packed
// one element into the buffer (every row misaligned), and rows with a gap of 8 channels after
// the channels (aligned, position stride != C). Max pooling is also run on inputs full of ties,
// where the gradient must go to the first maximum of each window as the reference sends it.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dnn/cuda/normalization.h"
#include "dnn/cuda/pooling.h"
#include "dnn/primitive_checks.h"
#include "dnn/primitive_reference.h"
#include "gtest/gtest.h"
#include "tests/kernels/primitives_cuda_fixture.h"

namespace kiln {
namespace primitives_test {
namespace {

enum class Last { kPacked, kOffset, kGapped };
constexpr Last kLasts[] = {Last::kPacked, Last::kOffset, Last::kGapped};

const char* LastName(Last kind) {
  return kind == Last::kPacked ? "nhwc" : kind == Last::kOffset ? "nhwc+1" : "nhwc gapped";
}

// dims (N, C, spatial...) laid out channels-last as `kind` says.
LaidOut ChannelsLast(DataType dtype, const std::vector<int64_t>& dims, Last kind) {
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

std::string What(const std::string& op, DataType dtype, Last kind, const std::vector<int64_t>& dims,
                 Blend b) {
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

TEST_F(ChannelsLastTest, Lrn) {
  using M = dnn::LrnMode;
  const dnn::LrnDescriptor lrns[] = {
      // Every unrolled across-channel width (1 to 11), then one past them (13).
      *dnn::LrnDescriptor::Create(M::kAcrossChannels, 1, 0.5, 0.75, 1.0),
      *dnn::LrnDescriptor::Create(M::kAcrossChannels, 3, 1.5, 0.6, 1.0),
      *dnn::LrnDescriptor::Create(M::kAcrossChannels, 5, 0.3, 0.75, 2.0),
      *dnn::LrnDescriptor::Create(M::kAcrossChannels, 7, 0.8, 0.75, 1.0),
      *dnn::LrnDescriptor::Create(M::kAcrossChannels, 11, 0.9, 0.7, 1.5),
      *dnn::LrnDescriptor::Create(M::kAcrossChannels, 13, 0.9, 0.75, 1.0),
      *dnn::LrnDescriptor::Create(M::kWithinChannel, 3, 0.8, 0.75, 1.0),
      *dnn::LrnDescriptor::Create(M::kWithinChannel, 5, 0.6, 0.75, 1.0),
  };
  const std::vector<std::vector<int64_t>> shapes = {
      {2, 3, 3, 5},   {2, 24, 3, 5},    {1, 37, 4, 3}, {2, 96, 3, 4},
      {1, 200, 2, 3}, {2, 16, 2, 3, 4}, {3, 40, 5},
  };
  for (const auto& lrn : lrns) {
    for (DataType dt : kDtypes) {
      for (Last kind : kLasts) {
        for (const auto& dims : shapes) {
          for (Blend b : kBlends) {
            const std::string what = What("lrn " + lrn.ToString(), dt, kind, dims, b);
            TestTensor x(ChannelsLast(dt, dims, kind)), y(ChannelsLast(dt, dims, kind)),
                dy(ChannelsLast(dt, dims, kind)), dx(ChannelsLast(dt, dims, kind));
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
