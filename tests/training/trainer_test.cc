// The Trainer on the CPU: snapshot and resume reproduce a straight run bit for bit (SGD and
// Adam), the solver's rules (lr_mult, decay_mult, momentum, iter_size, clip_gradients) give the
// update worked out by hand on a linear model, and the errors a user meets name what is wrong.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "frontends/caffe/caffe_io.h"
#include "frontends/caffe/data/datum_db.h"
#include "frontends/caffe/solver.h"
#include "frontends/caffe/training/solver_trainer.h"
#include "gtest/gtest.h"
#include "tests/training/trainer_fixtures.h"
#include "tests/util/image_files.h"
#include "tests/util/scratch_file.h"
#include "training/memory_batch_source.h"

namespace kiln {
namespace {

// ---------------------------------------------------------------------------------------------
// The update rules, by hand, on a linear model y = w·x (+ b) with EuclideanLoss
// L = Σ_i (y_i - t_i)^2 / (2N), whose gradient is dL/dw = Σ_i r_i x_i / N, dL/db = Σ_i r_i / N
// with r_i = y_i - t_i.

struct Example {
  double x0, x1, t;
};

// Four examples; a batch of 4 sees them all, two batches of 2 see them in the same order.
const std::vector<Example>& Examples() {
  static const std::vector<Example> examples = {
      {0.5, 1.0, 0}, {0.75, 0.5, 1}, {1.0, 0.0, 2}, {1.25, -0.5, 1}};
  return examples;
}

std::string LinearDb() {
  static const std::string path = WriteDb("linear_lmdb", 4, [](int i) {
    caffe::Datum d;
    d.set_channels(2);
    d.set_height(1);
    d.set_width(1);
    d.add_float_data(static_cast<float>(Examples()[i].x0));
    d.add_float_data(static_cast<float>(Examples()[i].x1));
    d.set_label(static_cast<int>(Examples()[i].t));
    return d;
  });
  return path;
}

// `param_specs` goes into the InnerProduct layer; `bias` turns its bias on.
std::string LinearNet(int batch, const std::string& param_specs, bool bias) {
  return absl::StrCat(R"(name: "linear"
layer {
  name: "data" type: "Data" top: "data" top: "label"
  data_param { source: ")",
                      LinearDb(), "\" batch_size: ", batch, R"( backend: LMDB }
}
layer {
  name: "ip" type: "InnerProduct" bottom: "data" top: "y"
  )",
                      param_specs, R"(
  inner_product_param {
    num_output: 1 bias_term: )",
                      bias ? "true" : "false", R"(
    weight_filler { type: "constant" value: 0.5 }
    bias_filler { type: "constant" value: 0.25 }
  }
}
layer { name: "loss" type: "EuclideanLoss" bottom: "y" bottom: "label" top: "loss" }
)");
}

// The gradient of L over examples [first, first + count) at (w0, w1, b).
struct Grad {
  double w0 = 0, w1 = 0, b = 0;
};
Grad LinearGradient(const double w[2], double b, int first, int count) {
  Grad g;
  for (int i = first; i < first + count; ++i) {
    const Example& e = Examples()[i];
    const double r = w[0] * e.x0 + w[1] * e.x1 + b - e.t;
    g.w0 += r * e.x0 / count;
    g.w1 += r * e.x1 / count;
    g.b += r / count;
  }
  return g;
}

// The current (w0, w1, b) of the linear net's trainer.
std::vector<float> LinearParams(SolverTrainer& trainer) {
  auto net = trainer.WeightsAsNet();
  EXPECT_TRUE(net.ok());
  std::vector<float> out;
  for (const auto& blob : Blobs(*net, "ip")) out.insert(out.end(), blob.begin(), blob.end());
  return out;
}

// Caffe's SGD: v = momentum v + rate lr_mult (g + weight_decay decay_mult w); w -= v.
TEST(TrainerRules, LrMultDecayMultAndMomentumMatchTheHandUpdate) {
  auto config =
      WriteAndLoadSolver("rules_mult", LinearNet(4, "param { lr_mult: 2 decay_mult: 3 }", false),
                         "type: \"SGD\"\nbase_lr: 0.1\nmomentum: 0.9\n"
                         "weight_decay: 0.01\nlr_policy: \"fixed\"\nmax_iter: 3\n");
  ASSERT_TRUE(config.ok()) << config.status();
  auto trainer = MakeTrainer(*config);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  double w[2] = {0.5, 0.5}, v[2] = {0, 0};
  EXPECT_EQ(LinearParams(**trainer), (std::vector<float>{0.5f, 0.5f}));
  for (int step = 0; step < 3; ++step) {
    ASSERT_TRUE((*trainer)->Step().ok());
    const Grad g = LinearGradient(w, 0, 0, 4);
    const double gw[2] = {g.w0, g.w1};
    for (int k = 0; k < 2; ++k) {
      v[k] = 0.9 * v[k] + 0.1 * 2 * (gw[k] + 0.01 * 3 * w[k]);
      w[k] -= v[k];
    }
    const std::vector<float> got = LinearParams(**trainer);
    ASSERT_EQ(got.size(), 2u);
    EXPECT_NEAR(got[0], w[0], 1e-6) << "step " << step;
    EXPECT_NEAR(got[1], w[1], 1e-6) << "step " << step;
  }
  EXPECT_FLOAT_EQ((*trainer)->last_rate(), 0.1f);  // base_lr is a float field
}

// iter_size 2 with batches of 2 accumulates the two batch gradients and divides by 2: for a
// linear model that is the gradient of one batch of 4, so the runs agree at every step (weight
// decay and momentum are applied once per update in both).
TEST(TrainerRules, IterSizeTwoEqualsOneBatchOfTwiceTheSize) {
  const std::string rules =
      "type: \"SGD\"\nbase_lr: 0.1\nmomentum: 0.5\nweight_decay: 0.02\nlr_policy: \"fixed\"\n"
      "max_iter: 4\n";
  auto halves = WriteAndLoadSolver("rules_iter2", LinearNet(2, "", true),
                                   absl::StrCat(rules, "iter_size: 2\n"));
  auto whole = WriteAndLoadSolver("rules_iter1", LinearNet(4, "", true), rules);
  ASSERT_TRUE(halves.ok()) << halves.status();
  ASSERT_TRUE(whole.ok()) << whole.status();
  auto a = MakeTrainer(*halves);
  auto b = MakeTrainer(*whole);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*a)->images_per_iteration(), 4);
  EXPECT_EQ((*b)->images_per_iteration(), 4);
  double w[2] = {0.5, 0.5}, bias = 0.25, v[3] = {0, 0, 0};
  for (int step = 0; step < 4; ++step) {
    ASSERT_TRUE((*a)->Step().ok());
    ASSERT_TRUE((*b)->Step().ok());
    // By hand, from the two halves.
    const Grad g1 = LinearGradient(w, bias, 0, 2), g2 = LinearGradient(w, bias, 2, 2);
    double* params[3] = {&w[0], &w[1], &bias};
    const double g[3] = {(g1.w0 + g2.w0) / 2, (g1.w1 + g2.w1) / 2, (g1.b + g2.b) / 2};
    for (int k = 0; k < 3; ++k) {
      v[k] = 0.5 * v[k] + 0.1 * (g[k] + 0.02 * *params[k]);
      *params[k] -= v[k];
    }
    const std::vector<float> pa = LinearParams(**a), pb = LinearParams(**b);
    ASSERT_EQ(pa.size(), 3u);
    ASSERT_EQ(pb.size(), 3u);
    for (int k = 0; k < 3; ++k) {
      EXPECT_NEAR(pa[k], pb[k], 1e-6) << "step " << step << " param " << k;
      EXPECT_NEAR(pa[k], *params[k], 1e-6) << "step " << step << " param " << k;
    }
    // The reported loss is the mean of the two halves' losses, which is the whole batch's.
    EXPECT_NEAR((*a)->last_loss(), (*b)->last_loss(), 1e-6);
  }
}

// clip_gradients scales every gradient by clip / ||g|| when the global L2 norm over all
// parameters exceeds it, before weight decay is added (Caffe's ClipGradients runs first).
TEST(TrainerRules, ClipGradientsScalesByTheGlobalNormBeforeDecay) {
  const double w[2] = {0.5, 0.5}, bias = 0.25;
  const Grad g = LinearGradient(w, bias, 0, 4);
  const double norm = std::sqrt(g.w0 * g.w0 + g.w1 * g.w1 + g.b * g.b);
  const double clip = 0.1;
  ASSERT_GT(norm, 2 * clip) << "the examples must give a gradient the clip cuts";
  for (const double limit : {clip, 10 * norm}) {
    SCOPED_TRACE(absl::StrCat("clip_gradients ", limit));
    auto config = WriteAndLoadSolver(
        "rules_clip", LinearNet(4, "", true),
        absl::StrCat("type: \"SGD\"\nbase_lr: 0.1\nweight_decay: 0.01\nlr_policy: \"fixed\"\n",
                     "max_iter: 1\nclip_gradients: ", limit, "\n"));
    ASSERT_TRUE(config.ok()) << config.status();
    auto trainer = MakeTrainer(*config);
    ASSERT_TRUE(trainer.ok()) << trainer.status();
    ASSERT_TRUE((*trainer)->Step().ok());
    const double scale = norm > limit ? limit / norm : 1.0;
    const double want[3] = {w[0] - 0.1 * (scale * g.w0 + 0.01 * w[0]),
                            w[1] - 0.1 * (scale * g.w1 + 0.01 * w[1]),
                            bias - 0.1 * (scale * g.b + 0.01 * bias)};
    const std::vector<float> got = LinearParams(**trainer);
    ASSERT_EQ(got.size(), 3u);
    for (int k = 0; k < 3; ++k) EXPECT_NEAR(got[k], want[k], 1e-6) << "param " << k;
  }
}

// Static loss scaling changes only rounding: the same clipped, decayed update as without it
// (the gradients are divided by the scale before clipping), and a scale that is not positive
// is refused.
TEST(TrainerRules, LossScalingGivesTheUnscaledUpdate) {
  const double w[2] = {0.5, 0.5}, bias = 0.25;
  const Grad g = LinearGradient(w, bias, 0, 4);
  const double norm = std::sqrt(g.w0 * g.w0 + g.w1 * g.w1 + g.b * g.b);
  // Without clipping a gradient left scaled would move the weights 1024 times as far; with it,
  // the clip must see the unscaled norm.
  for (const double clip : {0.0, 0.1}) {
    SCOPED_TRACE(absl::StrCat("clip_gradients ", clip));
    auto config = WriteAndLoadSolver(
        "rules_loss_scale", LinearNet(4, "", true),
        absl::StrCat("type: \"SGD\"\nbase_lr: 0.1\nweight_decay: 0.01\nlr_policy: \"fixed\"\n",
                     "max_iter: 1\nclip_gradients: ", clip > 0 ? clip : -1.0, "\n"));
    ASSERT_TRUE(config.ok()) << config.status();
    auto trainer = MakeTrainer(*config, /*loss_scale=*/1024.0);
    ASSERT_TRUE(trainer.ok()) << trainer.status();
    ASSERT_TRUE((*trainer)->Step().ok());
    const double scale = clip > 0 && norm > clip ? clip / norm : 1.0;
    const double want[3] = {w[0] - 0.1 * (scale * g.w0 + 0.01 * w[0]),
                            w[1] - 0.1 * (scale * g.w1 + 0.01 * w[1]),
                            bias - 0.1 * (scale * g.b + 0.01 * bias)};
    const std::vector<float> got = LinearParams(**trainer);
    ASSERT_EQ(got.size(), 3u);
    for (int k = 0; k < 3; ++k) EXPECT_NEAR(got[k], want[k], 1e-6) << "param " << k;
    // The reported loss is the loss, not the scaled one.
    EXPECT_LT((*trainer)->last_loss(), 100.0);
    EXPECT_EQ(MakeTrainer(*config, 0.0).status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(MakeTrainer(*config, -2.0).status().code(), absl::StatusCode::kInvalidArgument);
  }
}

// BatchNorm in training mode accumulates its three blobs as Caffe does (the factor by
// 0.999 f + 1 per iteration, the means by the batch means), and the snapshot holds them.
TEST(TrainerRules, BatchNormStatisticsAccumulateAsCaffes) {
  const std::string net = ResumeNet(ResumeDb(), /*batch_norm=*/true);
  auto config =
      WriteAndLoadSolver("batchnorm", net, "type: \"SGD\"\nbase_lr: 0.01\nlr_policy: \"fixed\"\n");
  ASSERT_TRUE(config.ok()) << config.status();
  auto trainer = MakeTrainer(*config);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*trainer)->Step().ok());
  auto weights = (*trainer)->WeightsAsNet();
  ASSERT_TRUE(weights.ok());
  const auto blobs = Blobs(*weights, "bn");
  ASSERT_EQ(blobs.size(), 3u);
  // Caffe: factor <- 0.999 factor + 1 per iteration, from Kiln's filled 1.
  const double factor = ((1 * 0.999 + 1) * 0.999 + 1) * 0.999 + 1;
  EXPECT_NEAR(blobs[2][0], factor, 1e-4);
  // The accumulated means of the convolution outputs (before the ReLU) are not all zero.
  EXPECT_NE(blobs[0], std::vector<float>(blobs[0].size(), 0.0f));
}

// With the training rewrites on (the CLI's default), BatchNorm + Scale and the in-place ReLU after
// them train as one AffineBatchNorm: the same losses, weights and running statistics as the
// Caffe layers, to f32 rounding.
TEST(TrainerRules, FusedBatchNormScaleTrainsLikeThePair) {
  const std::string net = ResumeNet(ResumeDb(), /*batch_norm=*/true, /*with_scale=*/true);
  auto config = WriteAndLoadSolver("batchnorm_scale", net,
                                   "type: \"SGD\"\nbase_lr: 0.05\nmomentum: 0.9\n"
                                   "lr_policy: \"fixed\"\nrandom_seed: 3\n");
  ASSERT_TRUE(config.ok()) << config.status();
  auto pair = MakeTrainer(*config, 1.0, /*optimize=*/false);
  auto fused = MakeTrainer(*config, 1.0, /*optimize=*/true);
  ASSERT_TRUE(pair.ok()) << pair.status();
  ASSERT_TRUE(fused.ok()) << fused.status();
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE((*pair)->Step().ok());
    ASSERT_TRUE((*fused)->Step().ok());
    EXPECT_NEAR((*fused)->last_loss(), (*pair)->last_loss(), 1e-4 * std::fabs((*pair)->last_loss()))
        << "iteration " << i;
  }
  auto want = (*pair)->WeightsAsNet();
  auto got = (*fused)->WeightsAsNet();
  ASSERT_TRUE(want.ok() && got.ok());
  for (const char* layer : {"conv", "bn", "bn_scale", "ip"}) {
    const auto w = Blobs(*want, layer), g = Blobs(*got, layer);
    ASSERT_EQ(w.size(), g.size()) << layer;
    ASSERT_FALSE(w.empty()) << layer;
    for (size_t b = 0; b < w.size(); ++b) {
      ASSERT_EQ(w[b].size(), g[b].size()) << layer;
      for (size_t i = 0; i < w[b].size(); ++i) {
        EXPECT_NEAR(g[b][i], w[b][i], 1e-4 * (1 + std::fabs(w[b][i]))) << layer << " blob " << b;
      }
    }
  }
  // The fused plan runs one AffineBatchNorm forward and one backward, and no Scale (profiled
  // after the steps: a pass before the first batch would read unfed data buffers).
  auto ops = [](SolverTrainer& t) {
    std::map<std::string, int> count;
    auto steps = t.ProfilePass();
    EXPECT_TRUE(steps.ok()) << steps.status();
    if (steps.ok()) {
      for (const SolverTrainer::StepTime& s : *steps) ++count[s.op];
    }
    return count;
  };
  auto fused_ops = ops(**fused), pair_ops = ops(**pair);
  EXPECT_EQ(fused_ops["AffineBatchNorm"], 1);
  EXPECT_EQ(fused_ops["AffineBatchNormGradient"], 1);
  EXPECT_EQ(fused_ops["Scale"], 0);
  // The in-place ReLU after the pair is folded in too: no ReLU pass either way.
  EXPECT_EQ(fused_ops["ReLU"], 0);
  EXPECT_EQ(fused_ops["ActivationGradient"], 0);
  EXPECT_EQ(pair_ops["ReLU"], 1);
  EXPECT_EQ(pair_ops["AffineBatchNorm"], 0);
  EXPECT_EQ(pair_ops["Scale"], 2);  // forward and Scale's dx
}

// ---------------------------------------------------------------------------------------------
// Errors.

// HDF5Data trains (tests/examples/char_lm_vs_torch_test.sh); a list that is not there is a
// status naming the layer and the list.
TEST(TrainerErrors, AnHdf5DataLayerWithoutItsListNamesTheLayerAndTheList) {
  const std::string net = R"pb(
    name: "hdf5"
    layer {
      name: "arrays"
      type: "HDF5Data"
      top: "data"
      top: "label"
      hdf5_data_param { source: "list.txt" batch_size: 4 }
    }
    layer {
      name: "ip"
      type: "InnerProduct"
      bottom: "data"
      top: "ip"
      inner_product_param { num_output: 2 }
    }
    layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
  )pb";
  auto config =
      WriteAndLoadSolver("hdf5_data", net, "type: \"SGD\"\nbase_lr: 0.1\nlr_policy: \"fixed\"\n");
  ASSERT_TRUE(config.ok()) << config.status();
  auto trainer = MakeTrainer(*config);
  ASSERT_FALSE(trainer.ok());
  EXPECT_EQ(trainer.status().code(), absl::StatusCode::kNotFound) << trainer.status();
  EXPECT_NE(trainer.status().message().find("'arrays'"), std::string::npos) << trainer.status();
  EXPECT_NE(trainer.status().message().find("list.txt"), std::string::npos) << trainer.status();
}

// `kiln time --train` on a recurrent net: an HDF5Data layer's tops take their shapes from the
// synthetic data, every one of them (a missing one is named), and are filled with the integers
// 0..9, which an Embed accepts as indices.
TEST(TrainerSyntheticData, AnHdf5DataLayerNeedsAShapeForEveryTop) {
  const std::string net = R"pb(
    name: "synthetic_lm"
    layer {
      name: "text"
      type: "HDF5Data"
      top: "input"
      top: "target"
      hdf5_data_param { source: "never_read.txt" batch_size: 4 }
    }
    layer {
      name: "embed"
      type: "Embed"
      bottom: "input"
      top: "embedded"
      embed_param { input_dim: 10 num_output: 3 }
    }
    layer {
      name: "ip"
      type: "InnerProduct"
      bottom: "embedded"
      top: "ip"
      inner_product_param { num_output: 10 axis: 2 }
    }
    layer {
      name: "loss"
      type: "SoftmaxWithLoss"
      bottom: "ip"
      bottom: "target"
      top: "loss"
      softmax_param { axis: 2 }
    }
  )pb";
  auto config = WriteAndLoadSolver("synthetic_lm", net,
                                   "type: \"SGD\"\nbase_lr: 0.1\nlr_policy: \"fixed\"\n");
  ASSERT_TRUE(config.ok()) << config.status();
  TrainerOptions options;
  options.synthetic_data = {{"input", {4, 2}}, {"target", {4, 2}}};
  auto trainer = SolverTrainer::Create(*config, options);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*trainer)->Step().ok());
  EXPECT_TRUE(std::isfinite((*trainer)->last_loss()));
  options.synthetic_data.erase("target");
  auto missing = SolverTrainer::Create(*config, options);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("'target'"), std::string::npos) << missing.status();
  EXPECT_NE(missing.status().message().find("'text'"), std::string::npos) << missing.status();
}

// An ImageData layer feeds the trainer like a Data layer: its list and root folder are found
// beside the solver, the images are resized to new_height x new_width, and a linear classifier
// learns dark (label 0) from bright (label 1) pictures.
TEST(TrainerImageData, TrainsFromAnImageList) {
  std::filesystem::create_directories(ScratchFile("train_images"));
  std::string list;
  for (int i = 0; i < 8; ++i) {
    const uint8_t base = i % 2 == 0 ? 30 : 220;
    Image image = SolidImage(5 + i % 3, 7, base, base, base);
    for (size_t p = 0; p < image.pixels.size(); ++p) image.pixels[p] += (p * 7 + i) % 11;
    const std::string name = absl::StrCat("pic", i, ".png");
    ASSERT_TRUE(WriteBytes(ScratchFile("train_images/" + name), EncodePng(image)));
    absl::StrAppend(&list, name, " ", i % 2, "\n");
  }
  ASSERT_TRUE(WriteBytes(ScratchFile("train_images.txt"), list));
  const std::string net = R"pb(
    name: "images"
    layer {
      name: "photos"
      type: "ImageData"
      top: "data"
      top: "label"
      transform_param { scale: 0.00390625 }
      image_data_param {
        source: "train_images.txt"
        root_folder: "train_images/"
        batch_size: 4
        new_height: 6
        new_width: 6
        shuffle: true
      }
    }
    layer {
      name: "ip"
      type: "InnerProduct"
      bottom: "data"
      top: "ip"
      inner_product_param { num_output: 2 }
    }
    layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
  )pb";
  auto config =
      WriteAndLoadSolver("image_data", net, "type: \"SGD\"\nbase_lr: 0.05\nlr_policy: \"fixed\"\n");
  ASSERT_TRUE(config.ok()) << config.status();
  auto trainer = MakeTrainer(*config);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  ASSERT_TRUE((*trainer)->Step().ok());
  const double first = (*trainer)->last_loss();
  EXPECT_NEAR(first, std::log(2.0), 1e-4);  // zero-filled weights: both classes at 1/2
  for (int i = 0; i < 30; ++i) ASSERT_TRUE((*trainer)->Step().ok());
  EXPECT_LT((*trainer)->last_loss(), 0.7 * first);  // about 0.35 after 31 steps
}

TEST(TrainerErrors, AMissingSourceIsNamed) {
  const std::string net = ResumeNet("no_such_train_lmdb");
  auto config = WriteAndLoadSolver("missing_source", net,
                                   "type: \"SGD\"\nbase_lr: 0.1\nlr_policy: \"fixed\"\n");
  ASSERT_TRUE(config.ok()) << config.status();
  auto trainer = MakeTrainer(*config);
  ASSERT_FALSE(trainer.ok());
  EXPECT_NE(trainer.status().message().find("no_such_train_lmdb"), std::string::npos)
      << trainer.status();
  EXPECT_NE(trainer.status().message().find("'data'"), std::string::npos) << trainer.status();
}

// A .solverstate of the linear net (one history blob of 2 values) cannot continue the
// convolutional net (four parameters), nor one with the same count but other sizes.
TEST(TrainerErrors, RestoringAnotherNetsStateIsInvalidArgument) {
  const std::string sgd = "type: \"SGD\"\nbase_lr: 0.1\nlr_policy: \"fixed\"\nmax_iter: 1\n";
  auto linear_config = WriteAndLoadSolver("other_linear", LinearNet(4, "", false), sgd);
  ASSERT_TRUE(linear_config.ok()) << linear_config.status();
  auto linear = MakeTrainer(*linear_config);
  ASSERT_TRUE(linear.ok()) << linear.status();
  ASSERT_TRUE((*linear)->Step().ok());
  auto paths = (*linear)->Snapshot(ScratchFile("other_linear"));
  ASSERT_TRUE(paths.ok()) << paths.status();

  auto conv_config = WriteAndLoadSolver("other_conv", ResumeNet(ResumeDb()), sgd);
  ASSERT_TRUE(conv_config.ok()) << conv_config.status();
  auto conv = MakeTrainer(*conv_config);
  ASSERT_TRUE(conv.ok()) << conv.status();
  absl::Status restored = (*conv)->Restore(paths->second);
  EXPECT_EQ(restored.code(), absl::StatusCode::kInvalidArgument) << restored;
  EXPECT_NE(restored.message().find(paths->second), std::string::npos) << restored;
  EXPECT_EQ((*conv)->iter(), 0);

  // One parameter each, of 2 and of 3 x 2 values.
  auto wide_config = WriteAndLoadSolver(
      "other_wide",
      absl::StrReplaceAll(LinearNet(4, "", false), {{"num_output: 1", "num_output: 3"},
                                                    {"EuclideanLoss", "SoftmaxWithLoss"}}),
      sgd);
  ASSERT_TRUE(wide_config.ok()) << wide_config.status();
  auto wide = MakeTrainer(*wide_config);
  ASSERT_TRUE(wide.ok()) << wide.status();
  restored = (*wide)->Restore(paths->second);
  EXPECT_EQ(restored.code(), absl::StatusCode::kInvalidArgument) << restored;

  // Same net, other solver: SGD keeps one history per parameter, Adam two.
  auto adam_config =
      WriteAndLoadSolver("other_adam", LinearNet(4, "", false),
                         "type: \"Adam\"\nbase_lr: 0.1\nlr_policy: \"fixed\"\nmax_iter: 1\n");
  ASSERT_TRUE(adam_config.ok()) << adam_config.status();
  auto adam = MakeTrainer(*adam_config);
  ASSERT_TRUE(adam.ok()) << adam.status();
  restored = (*adam)->Restore(paths->second);
  EXPECT_EQ(restored.code(), absl::StatusCode::kInvalidArgument) << restored;
}

// ---------------------------------------------------------------------------------------------
// MemoryData: Caffe's layer for arrays the caller holds, fed through the training engine's
// BatchSource (TrainerOptions::memory_data).

constexpr char kMemoryNet[] = R"(
name: "memory"
layer { name: "data" type: "MemoryData" top: "data" top: "label"
        memory_data_param { batch_size: 8 channels: 1 height: 2 width: 2 } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
        inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
)";

constexpr char kMemorySolver[] = R"(
base_lr: 0.5 lr_policy: "fixed" momentum: 0.9 max_iter: 40 type: "SGD" random_seed: 3
)";

// 48 examples of three classes: class c lights pixel c (plus a small offset per example).
absl::StatusOr<std::unique_ptr<BatchSource>> ThreeClasses(int64_t batch) {
  std::vector<float> x, y;
  for (int i = 0; i < 48; ++i) {
    const int c = i % 3;
    for (int p = 0; p < 4; ++p) x.push_back(p == c ? 1.0f : 0.01f * static_cast<float>(i % 5));
    y.push_back(static_cast<float>(c));
  }
  MemoryBatchOptions options;
  options.batch_size = batch;
  options.shuffle = true;
  absl::StatusOr<std::unique_ptr<MemoryBatchSource>> source =
      MemoryBatchSource::Create(std::move(x), {1, 2, 2}, std::move(y), options);
  if (!source.ok()) return source.status();
  return std::unique_ptr<BatchSource>(std::move(*source));
}

TEST(TrainerMemoryData, TrainsFromTheCallersArrays) {
  absl::StatusOr<SolverConfig> solver =
      WriteAndLoadSolver("memory_data", kMemoryNet, kMemorySolver);
  ASSERT_TRUE(solver.ok()) << solver.status();
  TrainerOptions options;
  options.memory_data["data"] = [] { return ThreeClasses(8); };
  absl::StatusOr<std::unique_ptr<SolverTrainer>> trainer = SolverTrainer::Create(*solver, options);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  ASSERT_TRUE((*trainer)->Step().ok());
  const double first = (*trainer)->last_loss();
  for (int i = 0; i < 39; ++i) ASSERT_TRUE((*trainer)->Step().ok());
  EXPECT_GT(first, 0.9);  // about log(3) at the start
  EXPECT_LT((*trainer)->last_loss(), 0.1 * first);
  EXPECT_EQ((*trainer)->images_per_iteration(), 8);
}

TEST(TrainerMemoryData, AMissingOrMisshapenSourceIsNamed) {
  absl::StatusOr<SolverConfig> solver =
      WriteAndLoadSolver("memory_data_errors", kMemoryNet, kMemorySolver);
  ASSERT_TRUE(solver.ok()) << solver.status();
  absl::StatusOr<std::unique_ptr<SolverTrainer>> none = SolverTrainer::Create(*solver, {});
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(none.status().message().find("MemoryData layer 'data'"), std::string::npos)
      << none.status();
  TrainerOptions wrong;
  wrong.memory_data["data"] = [] { return ThreeClasses(4); };  // batches of 4, the layer says 8
  absl::StatusOr<std::unique_ptr<SolverTrainer>> misshapen = SolverTrainer::Create(*solver, wrong);
  EXPECT_EQ(misshapen.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(misshapen.status().message().find("declares batches of [8,1,2,2]"), std::string::npos)
      << misshapen.status();
}

}  // namespace
}  // namespace kiln
