// Activations, PReLU (with dropout, on the same inputs): the CUDA primitives against the CPU
// reference, f32/f16/bf16, every layout, with poisoned outputs; skipped where no CUDA device is
// usable. Cases of
// //tests/kernels:primitives_cuda_test (tests/util/primitives_cuda_fixture.h).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dnn/cuda/activation.h"
#include "dnn/primitive_reference.h"
#include "gtest/gtest.h"
#include "tests/util/primitives_cuda_fixture.h"

namespace kiln {
namespace primitives_test {
namespace {

TEST_F(PrimitivesCudaTest, Activations) {
  const std::vector<dnn::ActivationDescriptor> acts = testing::TestActivations();
  for (const auto& act : acts) {
    for (DataType dt : kDtypes) {
      for (Layout layout : kLayouts) {
        for (const auto& dims : Shapes()) {
          for (Blend b : kBlends) {
            const std::string what = absl::StrCat(act.ToString(), " ", Label(dt, layout, dims, b));
            TestTensor x(dt, dims, layout), y(dt, dims, layout), dy(dt, dims, layout),
                dx(dt, dims, layout);
            x.Random(rng_, -2, 2);
            RunAndCheck(
                what + " fwd", y, b, ToleranceFor(dt),
                [&] {
                  return dnn::ActivationForward(*handle_, act, b.alpha, x.desc(), x.d(), b.beta,
                                                y.desc(), y.d());
                },
                [&](double* want) {
                  return ref::ActivationForward(act, b.alpha, x.desc(), x.h(), b.beta, y.desc(),
                                                want);
                });
            // Backward from the forward output (computed with (1, 0), so y is act(x)).
            ASSERT_TRUE(
                dnn::ActivationForward(*handle_, act, 1, x.desc(), x.d(), 0, y.desc(), y.d()).ok());
            ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
            y.host() = y.Download();
            dy.Random(rng_, -1, 1);
            RunAndCheck(
                what + " bwd", dx, b, ToleranceFor(dt),
                [&] {
                  return dnn::ActivationBackward(*handle_, act, b.alpha, y.desc(), y.d(), dy.desc(),
                                                 dy.d(), x.desc(), x.d(), b.beta, dx.desc(),
                                                 dx.d());
                },
                [&](double* want) {
                  return ref::ActivationBackward(act, b.alpha, y.desc(), y.h(), dy.desc(), dy.h(),
                                                 x.desc(), x.h(), b.beta, dx.desc(), want);
                });
          }
        }
      }
    }
  }
}

TEST_F(PrimitivesCudaTest, PReluAndDropout) {
  for (DataType dt : kDtypes) {
    for (Layout layout : kLayouts) {
      for (const auto& dims : Shapes()) {
        for (Blend b : kBlends) {
          const std::string what = Label(dt, layout, dims, b);
          TestTensor x(dt, dims, layout), y(dt, dims, layout), dy(dt, dims, layout),
              dx(dt, dims, layout);
          x.Random(rng_, -2, 2);
          dy.Random(rng_, -1, 1);
          for (bool shared : {false, true}) {
            const TensorDescriptor sd = *TensorDescriptor::CreatePacked(
                DataType::kF32, dnn::TensorFormat::kNCHW, {1, shared ? 1 : dims[1], 1, 1});
            const Vec slope = testing::Uniform(sd.ElementCount(), 0.05, 0.5, rng_);
            DeviceBuffer dslope_dev(sd.ElementCount() * 4), slope_dev(slope);
            Vec old_dslope = testing::Uniform(sd.ElementCount(), -1, 1, rng_);
            dslope_dev.Set(old_dslope);
            const std::string w = absl::StrCat("prelu", shared ? " shared " : " ", what);
            RunAndCheck(
                w + " fwd", y, b, ToleranceFor(dt),
                [&] {
                  return dnn::PReluForward(*handle_, x.desc(), x.d(), sd, slope_dev.get(), b.alpha,
                                           b.beta, y.desc(), y.d());
                },
                [&](double* want) {
                  return ref::PReluForward(x.desc(), x.h(), sd, slope.data(), b.alpha, b.beta,
                                           y.desc(), want);
                });
            DeviceBuffer ws(dnn::PReluBackwardWorkspaceSize(x.desc(), sd));
            Vec want_dslope = old_dslope;
            RunAndCheck(
                w + " bwd", dx, b, ToleranceFor(dt),
                [&] {
                  return dnn::PReluBackward(*handle_, x.desc(), x.d(), dy.desc(), dy.d(), sd,
                                            slope_dev.get(), b.alpha, b.beta, dx.desc(), dx.d(),
                                            b.alpha, b.beta, dslope_dev.get(), ws.get(),
                                            ws.bytes());
                },
                [&](double* want) {
                  return ref::PReluBackward(x.desc(), x.h(), dy.desc(), dy.h(), sd, slope.data(),
                                            b.alpha, b.beta, dx.desc(), want, b.alpha, b.beta,
                                            want_dslope.data());
                });
            CheckParams(w + " dslope", dslope_dev, want_dslope, ToleranceFor(DataType::kF32, 10));
          }
          const auto dropout = *dnn::DropoutDescriptor::Create(0.3, 77);
          RunAndCheck(
              "dropout " + what, y, b, ToleranceFor(dt),
              [&] {
                return dnn::DropoutForward(*handle_, dropout, b.alpha, x.desc(), x.d(), b.beta,
                                           y.desc(), y.d());
              },
              [&](double* want) {
                return ref::DropoutForward(dropout, b.alpha, x.desc(), x.h(), b.beta, y.desc(),
                                           want);
              });
          RunAndCheck(
              "dropout bwd " + what, dx, b, ToleranceFor(dt),
              [&] {
                return dnn::DropoutBackward(*handle_, dropout, b.alpha, dy.desc(), dy.d(), b.beta,
                                            dx.desc(), dx.d());
              },
              [&](double* want) {
                return ref::DropoutForward(dropout, b.alpha, dy.desc(), dy.h(), b.beta, dx.desc(),
                                           want);
              });
        }
      }
    }
  }
}

}  // namespace
}  // namespace primitives_test
}  // namespace kiln
