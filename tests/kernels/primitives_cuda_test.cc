// Every CUDA primitive beyond convolution against the CPU reference, forward and backward, on
// fresh random inputs (rounded to the dtype, so both sides see the same numbers) in f32, f16 and
// bf16; packed, channels-last and strided sub-region layouts; odd sizes, batch 1 and a large
// batch; alpha/beta (1, 0) and (0.75, 0.5). Outputs are poisoned (NaN when beta == 0, random old
// values otherwise) and the gaps of strided layouts must still hold their NaN afterwards.
// Runs on the GPU machine; skips where no CUDA device is usable.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dnn/cuda/activation.h"
#include "dnn/cuda/inner_product.h"
#include "dnn/cuda/normalization.h"
#include "dnn/cuda/pooling.h"
#include "dnn/cuda/softmax.h"
#include "dnn/cuda/tensor_ops.h"
#include "dnn/primitive_checks.h"
#include "dnn/primitive_reference.h"
#include "gtest/gtest.h"
#include "tests/kernels/primitives_cuda_fixture.h"
#include "tests/util/primitive_test_util.h"

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

TEST_F(PrimitivesCudaTest, InnerProduct) {
  for (DataType dt : kDtypes) {
    for (auto math : {dnn::MathMode::kFp32, dnn::MathMode::kTf32}) {
      if (dt != DataType::kF32 && math == dnn::MathMode::kTf32) continue;
      for (bool transposed : {false, true}) {
        for (const auto& dims : Shapes()) {
          for (Blend b : kBlends) {
            const int64_t k = dims[1] * dims[2] * dims[3], n = 37;
            const std::string what =
                absl::StrCat("ip ", math == dnn::MathMode::kTf32 ? "tf32 " : "",
                             transposed ? "transposed " : "", Label(dt, Layout::kPacked, dims, b));
            // A tf32/f16/bf16 product rounds inputs; the K-long sums get a K-scaled tolerance.
            const Tolerance tol = dt == DataType::kF32 && math == dnn::MathMode::kTf32
                                      ? Tolerance{2e-3 * std::sqrt(static_cast<double>(k)), 1e-2}
                                      : ToleranceFor(dt, std::sqrt(static_cast<double>(k)) * 4);
            TestTensor x(dt, dims, Layout::kPacked), dx(dt, dims, Layout::kPacked),
                w(dt, transposed ? std::vector<int64_t>{k, n} : std::vector<int64_t>{n, k},
                  Layout::kPacked),
                dw(dt, transposed ? std::vector<int64_t>{k, n} : std::vector<int64_t>{n, k},
                   Layout::kPacked),
                bias(dt, {n}, Layout::kPacked), y(dt, {dims[0], n}, Layout::kPacked),
                dy(dt, {dims[0], n}, Layout::kPacked);
            x.Random(rng_, -1, 1);
            w.Random(rng_, -1, 1);
            bias.Random(rng_, -1, 1);
            dy.Random(rng_, -1, 1);
            RunAndCheck(
                what + " fwd", y, b, tol,
                [&] {
                  return dnn::InnerProductForward(*handle_, 1, transposed, math, b.alpha, x.desc(),
                                                  x.d(), w.desc(), w.d(), bias.d(), b.beta,
                                                  y.desc(), y.d());
                },
                [&](double* want) {
                  return ref::InnerProductForward(1, transposed, b.alpha, x.desc(), x.h(), w.desc(),
                                                  w.h(), bias.h(), b.beta, y.desc(), want);
                });
            RunAndCheck(
                what + " bwd data", dx, b, tol,
                [&] {
                  return dnn::InnerProductBackwardData(*handle_, 1, transposed, math, b.alpha,
                                                       dy.desc(), dy.d(), w.desc(), w.d(), b.beta,
                                                       dx.desc(), dx.d());
                },
                [&](double* want) {
                  return ref::InnerProductBackwardData(1, transposed, b.alpha, dy.desc(), dy.h(),
                                                       w.desc(), w.h(), b.beta, dx.desc(), want);
                });
            const Tolerance ftol =
                dt == DataType::kF32 && math == dnn::MathMode::kTf32
                    ? Tolerance{2e-3 * std::sqrt(static_cast<double>(dims[0])) * 4, 1e-2}
                    : ToleranceFor(dt, std::sqrt(static_cast<double>(dims[0])) * 4);
            RunAndCheck(
                what + " bwd filter", dw, b, ftol,
                [&] {
                  return dnn::InnerProductBackwardFilter(*handle_, 1, transposed, math, b.alpha,
                                                         x.desc(), x.d(), dy.desc(), dy.d(), b.beta,
                                                         dw.desc(), dw.d());
                },
                [&](double* want) {
                  return ref::InnerProductBackwardFilter(1, transposed, b.alpha, x.desc(), x.h(),
                                                         dy.desc(), dy.h(), b.beta, dw.desc(),
                                                         want);
                });
          }
        }
      }
    }
  }
  // A layout cuBLAS cannot take is refused with the reason, not computed wrongly.
  const LaidOut strided = testing::MakeLayout(DataType::kF32, {2, 3, 4, 5}, Layout::kStrided);
  const TensorDescriptor wd =
      *TensorDescriptor::CreatePacked(DataType::kF32, dnn::TensorFormat::kNCHW, {7, 60});
  const TensorDescriptor yd =
      *TensorDescriptor::CreatePacked(DataType::kF32, dnn::TensorFormat::kNCHW, {2, 7});
  const absl::Status s =
      dnn::InnerProductForward(*handle_, 1, false, dnn::MathMode::kFp32, 1, strided.desc, nullptr,
                               wd, nullptr, nullptr, 0, yd, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
}

}  // namespace
}  // namespace primitives_test
}  // namespace kiln
