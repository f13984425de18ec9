// Softmax (and softmax with loss): the CUDA primitives against the CPU reference, f32/f16/bf16,
// every layout, with poisoned outputs; skipped where no CUDA device is usable. Cases of
// //tests/kernels:primitives_cuda_test (tests/util/primitives_cuda_fixture.h).
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dnn/cuda/softmax.h"
#include "dnn/primitive_reference.h"
#include "gtest/gtest.h"
#include "tests/util/primitives_cuda_fixture.h"

namespace kiln {
namespace primitives_test {
namespace {

TEST_F(PrimitivesCudaTest, SoftmaxAndLoss) {
  for (auto algo : {dnn::SoftmaxAlgorithm::kAccurate, dnn::SoftmaxAlgorithm::kLog}) {
    for (auto softmax :
         {dnn::SoftmaxDescriptor::Channel(algo), dnn::SoftmaxDescriptor::Instance(algo, 4),
          dnn::SoftmaxDescriptor::Axis(algo, 3)}) {
      for (DataType dt : kDtypes) {
        for (Layout layout : kLayouts) {
          for (const auto& dims : WithExtra(Shapes(), {{3, 1500, 1, 1}, {2, 700, 2, 3}})) {
            for (Blend b : kBlends) {
              const std::string what =
                  absl::StrCat("softmax ", static_cast<int>(algo), " axes ", softmax.first_axis,
                               "-", softmax.last_axis, " ", Label(dt, layout, dims, b));
              TestTensor x(dt, dims, layout), y(dt, dims, layout), dy(dt, dims, layout),
                  dx(dt, dims, layout);
              x.Random(rng_, -3, 3);
              RunAndCheck(
                  what + " fwd", y, b, ToleranceFor(dt, 4),
                  [&] {
                    return dnn::SoftmaxForward(*handle_, softmax, b.alpha, x.desc(), x.d(), b.beta,
                                               y.desc(), y.d());
                  },
                  [&](double* want) {
                    return ref::SoftmaxForward(softmax, b.alpha, x.desc(), x.h(), b.beta, y.desc(),
                                               want);
                  });
              ASSERT_TRUE(
                  dnn::SoftmaxForward(*handle_, softmax, 1, x.desc(), x.d(), 0, y.desc(), y.d())
                      .ok());
              ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
              y.host() = y.Download();
              dy.Random(rng_, -1, 1);
              RunAndCheck(
                  what + " bwd", dx, b, ToleranceFor(dt, 8),
                  [&] {
                    return dnn::SoftmaxBackward(*handle_, softmax, b.alpha, y.desc(), y.d(),
                                                dy.desc(), dy.d(), b.beta, dx.desc(), dx.d());
                  },
                  [&](double* want) {
                    return ref::SoftmaxBackward(softmax, b.alpha, y.desc(), y.h(), dy.desc(),
                                                dy.h(), b.beta, dx.desc(), want);
                  });
            }
          }
        }
      }
    }
  }
  // The loss: every normalization, an ignore label, labels stored as f32.
  using N = dnn::LossNormalization;
  for (N norm : {N::kFull, N::kValid, N::kBatchSize, N::kNone}) {
    for (DataType dt : kDtypes) {
      for (Layout layout : kLayouts) {
        for (const auto& dims : Shapes()) {
          const Blend b = kBlends[static_cast<int>(norm) % 2];
          const std::string what = absl::StrCat("softmax loss ", static_cast<int>(norm), " ",
                                                Label(dt, layout, dims, b));
          dnn::SoftmaxLossDescriptor loss;
          loss.normalization = norm;
          loss.has_ignore_label = true;
          loss.ignore_label = 1;
          loss.loss_weight = 0.5;
          std::vector<int64_t> ldims = dims;
          ldims[1] = 1;
          TestTensor x(dt, dims, layout), prob(dt, dims, layout), dx(dt, dims, layout),
              labels(DataType::kF32, ldims, Layout::kPacked);
          x.Random(rng_, -3, 3);
          std::uniform_int_distribution<int> cls(0, static_cast<int>(dims[1]) - 1);
          labels.ForEachElement([&](int64_t at) { labels.host()[at] = cls(rng_); });
          labels.Upload();
          DeviceBuffer loss_d(4), ws(dnn::kSoftmaxLossWorkspaceBytes);
          Vec want_loss(1);
          RunAndCheck(
              what + " prob", prob, {1, 0}, ToleranceFor(dt, 4),
              [&] {
                return dnn::SoftmaxLossForward(*handle_, loss, x.desc(), x.d(), labels.desc(),
                                               labels.d(), prob.desc(), prob.d(), loss_d.get());
              },
              [&](double* want) {
                return ref::SoftmaxLossForward(loss, x.desc(), x.h(), labels.desc(), labels.h(),
                                               prob.desc(), want, want_loss.data());
              });
          CheckParams(what + " loss", loss_d, want_loss, ToleranceFor(dt, 4));
          prob.host() = prob.Download();
          RunAndCheck(
              what + " bwd", dx, b, ToleranceFor(dt, 4),
              [&] {
                return dnn::SoftmaxLossBackward(*handle_, loss, prob.desc(), prob.d(),
                                                labels.desc(), labels.d(), b.alpha, b.beta,
                                                dx.desc(), dx.d(), ws.get(), ws.bytes());
              },
              [&](double* want) {
                return ref::SoftmaxLossBackward(loss, prob.desc(), prob.h(), labels.desc(),
                                                labels.h(), b.alpha, b.beta, dx.desc(), want);
              });
        }
      }
    }
  }
}

}  // namespace
}  // namespace primitives_test
}  // namespace kiln
