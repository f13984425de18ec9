// Batch normalization: the CUDA primitives against the CPU reference, f32/f16/bf16, every layout,
// with poisoned outputs; skipped where no CUDA device is usable. Cases of
// //tests/kernels:primitives_cuda_test (tests/util/primitives_cuda_fixture.h).
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dnn/cuda/normalization.h"
#include "dnn/primitive_reference.h"
#include "gtest/gtest.h"
#include "tests/util/primitives_cuda_fixture.h"

namespace kiln {
namespace primitives_test {
namespace {

TEST_F(PrimitivesCudaTest, BatchNorm) {
  // Spatial statistics of channels-last tensors with many rows take the rows kernel with
  // several splits: 64 and 24 channels (whole 16-byte vectors in every dtype) and 20 (not in
  // f16/bf16). Per-activation statistics keep the common shapes: over a batch of 2 some of the
  // thousands of features of the larger shapes have two nearly equal samples, a variance near
  // 0 and a gradient too ill-conditioned for any fixed f32 tolerance.
  const auto spatial_shapes =
      WithExtra(Shapes(), {{4, 64, 14, 14}, {2, 24, 33, 7}, {3, 20, 17, 9}});
  for (auto mode : {dnn::BatchNormMode::kSpatial, dnn::BatchNormMode::kPerActivation}) {
    const auto& shapes = mode == dnn::BatchNormMode::kSpatial ? spatial_shapes : Shapes();
    for (auto rule : {dnn::RunningStatsRule::kExponential, dnn::RunningStatsRule::kCaffeSum}) {
      for (DataType dt : kDtypes) {
        for (Layout layout : kLayouts) {
          for (const auto& dims : shapes) {
            for (Blend b : kBlends) {
              const std::string what =
                  absl::StrCat("bn ", static_cast<int>(mode), "/", static_cast<int>(rule), " ",
                               Label(dt, layout, dims, b));
              std::vector<int64_t> pdims(dims.size(), 1);
              pdims[1] = dims[1];
              if (mode == dnn::BatchNormMode::kPerActivation) {
                for (size_t i = 2; i < dims.size(); ++i) pdims[i] = dims[i];
              }
              const TensorDescriptor pd =
                  *TensorDescriptor::CreatePacked(DataType::kF32, dnn::TensorFormat::kNCHW, pdims);
              const int64_t features = pd.ElementCount();
              TestTensor x(dt, dims, layout), y(dt, dims, layout), dy(dt, dims, layout),
                  dx(dt, dims, layout);
              x.Random(rng_, -1, 3);
              dy.Random(rng_, -1, 1);
              const Vec scale = testing::Uniform(features, 0.5, 1.5, rng_);
              const Vec bias = testing::Uniform(features, -1, 1, rng_);
              Vec rm = testing::Uniform(features, -1, 1, rng_);
              Vec rv = testing::Uniform(features, 0.5, 2, rng_);
              Vec factor = {3.0};
              DeviceBuffer scale_d(scale), bias_d(bias), rm_d(rm), rv_d(rv), factor_d(factor),
                  mean_d(features * 4), inv_d(features * 4),
                  ws(dnn::BatchNormWorkspaceSize(mode, x.desc()));
              dnn::BatchNormTraining bn;
              bn.mode = mode;
              bn.rule = rule;
              bn.factor = rule == dnn::RunningStatsRule::kCaffeSum ? 0.999 : 0.1;
              bn.epsilon = 1e-4;
              const bool caffe = rule == dnn::RunningStatsRule::kCaffeSum;
              Vec save_mean(features), save_inv(features);
              RunAndCheck(
                  what + " train fwd", y, b, ToleranceFor(dt, 8),
                  [&] {
                    return dnn::BatchNormForwardTraining(
                        *handle_, bn, b.alpha, b.beta, x.desc(), x.d(), y.desc(), y.d(), pd,
                        scale_d.get(), bias_d.get(), rm_d.get(), rv_d.get(),
                        caffe ? factor_d.get() : nullptr, mean_d.get(), inv_d.get(), ws.get(),
                        ws.bytes());
                  },
                  [&](double* want) {
                    return ref::BatchNormForwardTraining(
                        bn, b.alpha, b.beta, x.desc(), x.h(), y.desc(), want, pd, scale.data(),
                        bias.data(), rm.data(), rv.data(), caffe ? factor.data() : nullptr,
                        save_mean.data(), save_inv.data());
                  });
              const Tolerance stats = ToleranceFor(DataType::kF32, 50);
              CheckParams(what + " save_mean", mean_d, save_mean, stats);
              CheckParams(what + " save_inv_std", inv_d, save_inv, stats);
              CheckParams(what + " running_mean", rm_d, rm, stats);
              CheckParams(what + " running_var", rv_d, rv, stats);
              if (caffe) CheckParams(what + " caffe factor", factor_d, factor, stats);
              RunAndCheck(
                  what + " inference", y, b, ToleranceFor(dt, 8),
                  [&] {
                    return dnn::BatchNormForwardInference(
                        *handle_, mode, b.alpha, b.beta, x.desc(), x.d(), y.desc(), y.d(), pd,
                        scale_d.get(), bias_d.get(), rm_d.get(), rv_d.get(), bn.epsilon,
                        caffe ? factor_d.get() : nullptr, ws.get(), ws.bytes());
                  },
                  [&](double* want) {
                    return ref::BatchNormForwardInference(
                        mode, b.alpha, b.beta, x.desc(), x.h(), y.desc(), want, pd, scale.data(),
                        bias.data(), rm.data(), rv.data(), bn.epsilon,
                        caffe ? factor.data() : nullptr);
                  });
              for (bool saved : {true, false}) {
                Vec old_ds = testing::Uniform(features, -1, 1, rng_);
                Vec old_db = testing::Uniform(features, -1, 1, rng_);
                DeviceBuffer ds_d(old_ds), db_d(old_db);
                RunAndCheck(
                    what + (saved ? " bwd saved" : " bwd"), dx, b, ToleranceFor(dt, 16),
                    [&] {
                      return dnn::BatchNormBackward(
                          *handle_, mode, b.alpha, b.beta, b.alpha, b.beta, x.desc(), x.d(),
                          dy.desc(), dy.d(), dx.desc(), dx.d(), pd, scale_d.get(), ds_d.get(),
                          db_d.get(), bn.epsilon, saved ? mean_d.get() : nullptr,
                          saved ? inv_d.get() : nullptr, ws.get(), ws.bytes());
                    },
                    [&](double* want) {
                      return ref::BatchNormBackward(
                          mode, b.alpha, b.beta, b.alpha, b.beta, x.desc(), x.h(), dy.desc(),
                          dy.h(), dx.desc(), want, pd, scale.data(), old_ds.data(), old_db.data(),
                          bn.epsilon, saved ? save_mean.data() : nullptr,
                          saved ? save_inv.data() : nullptr);
                    });
                const Tolerance grads = ToleranceFor(DataType::kF32, 200);
                CheckParams(what + " dscale", ds_d, old_ds, grads);
                CheckParams(what + " dbias", db_d, old_db, grads);
              }
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
