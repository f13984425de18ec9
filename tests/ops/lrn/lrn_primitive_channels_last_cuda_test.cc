// LRN's channels-last (NHWC) paths against the CPU reference, forward and backward,
// f32/f16/bf16, on fresh random inputs with poisoned outputs, in the channels-last layouts and
// channel counts of tests/util/primitives_cuda_fixture.h. Cases of
// //tests/kernels:primitives_channels_last_cuda_test.
#include <cstdint>
#include <string>
#include <vector>

#include "dnn/cuda/normalization.h"
#include "dnn/primitive_reference.h"
#include "gtest/gtest.h"
#include "tests/util/primitives_cuda_fixture.h"

namespace kiln {
namespace primitives_test {
namespace {

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
