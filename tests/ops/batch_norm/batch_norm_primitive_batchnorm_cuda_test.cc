// Batch normalization's training forms that AffineBatchNorm uses, on the GPU against the CPU
// reference (tests/util/primitives_cuda_fixture.h): the fused ReLU
// (BatchNormOps::kBatchNormActivation), forward and backward, and running statistics read from one
// set of buffers and written to another (BatchNormRunningStats), f32/f16/bf16, every layout, both
// modes and both running-rule forms, with poisoned outputs. The backward reads the statistics the
// forward saved, as AffineBatchNormGradient does, and its ReLU mask y is given on its own: a layout
// of y's own (the same as x's, or the next one, so y's strides and alignment differ from x's and
// dy's), values with many exact zeros (what a ReLU writes), so every reduction path (rows kernel,
// strided and vector loops) is run with and without a mask in step with x.
// Cases of //tests/kernels:primitives_batchnorm_cuda_test.
#include <algorithm>
#include <cmath>
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

// A layout other than `layout`, for a mask whose strides differ from the data's.
Layout NextLayout(Layout layout) {
  for (size_t i = 0; i < std::size(kLayouts); ++i) {
    if (kLayouts[i] == layout) return kLayouts[(i + 1) % std::size(kLayouts)];
  }
  return layout;
}

TEST_F(PrimitivesCudaTest, BatchNormFusedReluAndRunningStatisticsApart) {
  // Channels up to 65536 elements take the one-block-per-channel kernels in f32 NCHW, up to 8
  // times that a cluster of 8 blocks per channel on Hopper: 34560 per channel runs a block with
  // several loads per thread, 69120 and 224000 (uneven slices) run clusters (but for the
  // backward through a ReLU), 540800 keeps the two-stage path under test there too.
  const auto spatial_shapes = WithExtra(Shapes(), {{4, 64, 14, 14},
                                                   {2, 24, 33, 7},
                                                   {3, 20, 17, 9},
                                                   {4, 3, 96, 90},
                                                   {8, 2, 96, 90},
                                                   {16, 2, 100, 140},
                                                   {32, 2, 130, 130}});
  for (auto mode : {dnn::BatchNormMode::kSpatial, dnn::BatchNormMode::kPerActivation}) {
    const auto& shapes = mode == dnn::BatchNormMode::kSpatial ? spatial_shapes : Shapes();
    for (auto rule : {dnn::RunningStatsRule::kExponential, dnn::RunningStatsRule::kCaffeSum}) {
      for (DataType dt : kDtypes) {
        for (Layout layout : kLayouts) {
          for (const auto& dims : shapes) {
            for (Blend b : kBlends) {
              const std::string what =
                  absl::StrCat("bn relu ", static_cast<int>(mode), "/", static_cast<int>(rule), " ",
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
              // Rounded to f32 as the device buffers hold them, so "left as they were" can be
              // checked exactly.
              Vec rm_in = testing::Uniform(features, -1, 1, rng_);
              Vec rv_in = testing::Uniform(features, 0.5, 2, rng_);
              for (Vec* v : {&rm_in, &rv_in}) {
                for (double& e : *v) e = static_cast<float>(e);
              }
              const Vec factor_in = {3.0};
              const bool caffe = rule == dnn::RunningStatsRule::kCaffeSum;
              // The outputs start as NaN: every element must be written from the inputs.
              const Vec nan(features, NAN);
              DeviceBuffer scale_d(scale), bias_d(bias), rm_in_d(rm_in), rv_in_d(rv_in),
                  factor_in_d(factor_in), rm_d(nan), rv_d(nan), factor_d(Vec{NAN}),
                  mean_d(features * 4), inv_d(features * 4),
                  ws(dnn::BatchNormWorkspaceSize(mode, x.desc()));
              dnn::BatchNormTraining bn;
              bn.mode = mode;
              bn.rule = rule;
              bn.factor = caffe ? 0.999 : 0.1;
              bn.epsilon = 1e-4;
              bn.ops = dnn::BatchNormOps::kBatchNormActivation;
              bn.activation = *dnn::ActivationDescriptor::Create(dnn::ActivationMode::kRelu);
              dnn::BatchNormRunningStats running;
              running.mean_in = rm_in_d.get();
              running.var_in = rv_in_d.get();
              running.caffe_scale_factor_in = caffe ? factor_in_d.get() : nullptr;
              running.mean = rm_d.get();
              running.var = rv_d.get();
              running.caffe_scale_factor = caffe ? factor_d.get() : nullptr;
              Vec rm = rm_in, rv = rv_in, factor = factor_in;  // updated by the reference
              Vec save_mean(features), save_inv(features);
              RunAndCheck(
                  what + " train fwd", y, b, ToleranceFor(dt, 8),
                  [&] {
                    return dnn::BatchNormForwardTraining(*handle_, bn, b.alpha, b.beta, x.desc(),
                                                         x.d(), y.desc(), y.d(), pd, scale_d.get(),
                                                         bias_d.get(), running, mean_d.get(),
                                                         inv_d.get(), ws.get(), ws.bytes());
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
              // The inputs are left as they were.
              CheckParams(what + " running_mean input", rm_in_d, rm_in, {0, 0});
              CheckParams(what + " running_var input", rv_in_d, rv_in, {0, 0});
              if (caffe) CheckParams(what + " caffe factor input", factor_in_d, factor_in, {0, 0});
              // dx multiplies the f32 rounding of its sums by the inverse std-dev; per
              // activation over two images that can reach 1/sqrt(eps), so the tolerance grows
              // with the largest one there (spatial statistics over many pixels stay near 1).
              double condition = 1;
              if (mode == dnn::BatchNormMode::kPerActivation) {
                for (double v : save_inv) condition = std::max(condition, v);
              }
              for (bool same_layout : {true, false}) {
                // A ReLU's output: about half exact zeros.
                TestTensor mask(dt, dims, same_layout ? layout : NextLayout(layout));
                mask.Random(rng_, -1, 1);
                mask.ForEachElement([&](int64_t at) {
                  if (mask.host()[at] < 0) mask.host()[at] = 0;
                });
                mask.Upload();
                Vec old_ds = testing::Uniform(features, -1, 1, rng_);
                Vec old_db = testing::Uniform(features, -1, 1, rng_);
                DeviceBuffer ds_d(old_ds), db_d(old_db);
                const std::string bwd =
                    what + (same_layout ? " bwd" : " bwd, mask in its own layout");
                RunAndCheck(
                    bwd, dx, b, ToleranceFor(dt, 16 * condition),
                    [&] {
                      return dnn::BatchNormBackward(
                          *handle_, bn, b.alpha, b.beta, b.alpha, b.beta, x.desc(), x.d(),
                          mask.desc(), mask.d(), dy.desc(), dy.d(), dx.desc(), dx.d(), pd,
                          scale_d.get(), ds_d.get(), db_d.get(), mean_d.get(), inv_d.get(),
                          ws.get(), ws.bytes());
                    },
                    [&](double* want) {
                      return ref::BatchNormBackward(
                          bn, b.alpha, b.beta, b.alpha, b.beta, x.desc(), x.h(), mask.desc(),
                          mask.h(), dy.desc(), dy.h(), dx.desc(), want, pd, scale.data(),
                          old_ds.data(), old_db.data(), save_mean.data(), save_inv.data());
                    });
                const Tolerance grads = ToleranceFor(DataType::kF32, 200);
                CheckParams(bwd + " dscale", ds_d, old_ds, grads);
                CheckParams(bwd + " dbias", db_d, old_db, grads);
              }
            }
          }
        }
      }
    }
  }
}

// Activations other than a plain ReLU are refused by name, forward and backward.
TEST_F(PrimitivesCudaTest, BatchNormFusedActivationOtherThanReluIsUnimplemented) {
  const std::vector<int64_t> dims = {2, 3, 4, 5};
  TestTensor x(DataType::kF32, dims, Layout::kPacked), y(DataType::kF32, dims, Layout::kPacked);
  x.Random(rng_, -1, 1);
  const TensorDescriptor pd =
      *TensorDescriptor::CreatePacked(DataType::kF32, dnn::TensorFormat::kNCHW, {1, 3, 1, 1});
  const Vec ones(3, 1.0);
  DeviceBuffer scale(ones), bias(ones), mean(ones), inv(ones), ds(ones), db(ones),
      ws(dnn::BatchNormWorkspaceSize(dnn::BatchNormMode::kSpatial, x.desc()));
  dnn::BatchNormTraining bn;
  bn.ops = dnn::BatchNormOps::kBatchNormActivation;
  bn.activation = *dnn::ActivationDescriptor::Create(dnn::ActivationMode::kRelu, 0.1);
  const absl::Status forward = dnn::BatchNormForwardTraining(
      *handle_, bn, 1, 0, x.desc(), x.d(), y.desc(), y.d(), pd, scale.get(), bias.get(),
      dnn::BatchNormRunningStats{}, nullptr, nullptr, ws.get(), ws.bytes());
  EXPECT_EQ(forward.code(), absl::StatusCode::kUnimplemented) << forward;
  const absl::Status backward = dnn::BatchNormBackward(
      *handle_, bn, 1, 0, 1, 0, x.desc(), x.d(), y.desc(), y.d(), x.desc(), x.d(), y.desc(), y.d(),
      pd, scale.get(), ds.get(), db.get(), mean.get(), inv.get(), ws.get(), ws.bytes());
  EXPECT_EQ(backward.code(), absl::StatusCode::kUnimplemented) << backward;
}

}  // namespace
}  // namespace primitives_test
}  // namespace kiln
