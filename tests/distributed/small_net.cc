#include "tests/distributed/small_net.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "frontends/caffe/caffe_io.h"
#include "frontends/caffe/data/datum_db.h"
#include "gtest/gtest.h"
#include "tests/util/scratch_file.h"

namespace kiln {
namespace testing_dp {

std::string Db() {
  static const std::string path = [] {
    const std::string p = ScratchFile("dp_lmdb");
    DatumWriterOptions options;
    options.overwrite = true;
    auto writer = DatumWriter::Open(p, DbBackend::kLmdb, options);
    EXPECT_TRUE(writer.ok()) << writer.status();
    for (int i = 0; i < kRecords; ++i) {
      caffe::Datum d;
      d.set_channels(1);
      d.set_height(8);
      d.set_width(8);
      std::string pixels(64, '\0');
      uint32_t state = 2246822519u * static_cast<uint32_t>(i + 1);
      for (char& c : pixels) {
        state = state * 1664525u + 1013904223u;
        c = static_cast<char>(state >> 24);
      }
      d.set_data(pixels);
      d.set_label(i % 3);
      EXPECT_TRUE((*writer)->Put(DatumKey(i), d).ok());
    }
    EXPECT_TRUE((*writer)->Close().ok());
    return p;
  }();
  return path;
}

std::string Net(int batch, bool batch_norm) {
  const std::string text = absl::StrCat(
      R"pb(
        name: "small"
        layer {
          name: "data"
          type: "Data"
          top: "data"
          top: "label"
          include { phase: TRAIN }
          transform_param { scale: 0.00390625 }
          data_param { source: "SOURCE" batch_size: BATCH backend: LMDB }
        }
        layer {
          name: "data"
          type: "Data"
          top: "data"
          top: "label"
          include { phase: TEST }
          transform_param { scale: 0.00390625 }
          data_param { source: "SOURCE" batch_size: 8 backend: LMDB }
        }
        layer {
          name: "conv"
          type: "Convolution"
          bottom: "data"
          top: "conv"
          param { lr_mult: 1 }
          param { lr_mult: 2 }
          convolution_param {
            num_output: 4
            kernel_size: 3
            weight_filler { type: "xavier" }
            bias_filler { type: "constant" value: 0.1 }
          }
        })pb",
      batch_norm ? R"pb(
            layer { name: "bn" type: "BatchNorm" bottom: "conv" top: "conv" })pb"
                 : "",
      R"pb(
        layer { name: "relu1" type: "ReLU" bottom: "conv" top: "conv" }
        layer {
          name: "pool"
          type: "Pooling"
          bottom: "conv"
          top: "pool"
          pooling_param { pool: MAX kernel_size: 2 stride: 2 }
        }
        layer {
          name: "ip1"
          type: "InnerProduct"
          bottom: "pool"
          top: "ip1"
          inner_product_param {
            num_output: 16
            weight_filler { type: "xavier" }
          }
        }
        layer { name: "relu2" type: "ReLU" bottom: "ip1" top: "ip1" }
        layer {
          name: "ip2"
          type: "InnerProduct"
          bottom: "ip1"
          top: "ip2"
          inner_product_param {
            num_output: 3
            weight_filler { type: "xavier" }
          }
        }
        layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss" }
        layer {
          name: "accuracy"
          type: "Accuracy"
          bottom: "ip2"
          bottom: "label"
          top: "accuracy"
          include { phase: TEST }
        })pb");
  return absl::StrReplaceAll(text, {{"SOURCE", Db()}, {"BATCH", absl::StrCat(batch)}});
}

SolverConfig Solver(const std::string& name, int batch, const std::string& extra, bool batch_norm) {
  const std::string net_file = ScratchFile(name + "_net.prototxt");
  EXPECT_TRUE(WriteFileBytes(net_file, Net(batch, batch_norm)).ok());
  const std::string solver_file = ScratchFile(name + "_solver.prototxt");
  EXPECT_TRUE(WriteFileBytes(
                  solver_file,
                  absl::StrCat("net: \"", net_file, "\"\n", "type: \"SGD\"\n",
                               "base_lr: 0.05\nmomentum: 0.9\nweight_decay: 0.0005\n",
                               "lr_policy: \"fixed\"\nmax_iter: 100\n", "random_seed: 3\n", extra))
                  .ok());
  absl::StatusOr<SolverConfig> config = LoadSolver(solver_file);
  EXPECT_TRUE(config.ok()) << config.status();
  return *config;
}

TrainerOptions CpuOptions() {
  TrainerOptions options;
  options.compile.backend = BackendChoice::kCpu;
  return options;
}

// Every blob of every layer with parameters, flattened, in order.
std::vector<float> Parameters(SolverTrainer& trainer) {
  absl::StatusOr<caffe::NetParameter> net = trainer.WeightsAsNet();
  EXPECT_TRUE(net.ok()) << net.status();
  std::vector<float> out;
  for (const caffe::LayerParameter& layer : net->layer()) {
    for (const caffe::BlobProto& blob : layer.blobs()) {
      out.insert(out.end(), blob.data().begin(), blob.data().end());
    }
  }
  return out;
}

std::vector<float> LayerBlobs(SolverTrainer& trainer, const std::string& name) {
  absl::StatusOr<caffe::NetParameter> net = trainer.WeightsAsNet();
  EXPECT_TRUE(net.ok()) << net.status();
  std::vector<float> out;
  for (const caffe::LayerParameter& layer : net->layer()) {
    if (layer.name() != name) continue;
    for (const caffe::BlobProto& blob : layer.blobs()) {
      out.insert(out.end(), blob.data().begin(), blob.data().end());
    }
  }
  return out;
}

Group MakeGroup(int n, absl::Duration timeout) {
  Group g;
  FakeCommunicatorOptions options;
  options.timeout = timeout;
  g.group = *FakeCommunicatorGroup::Create(n, options);
  for (int r = 0; r < n; ++r) {
    g.comms.push_back(std::move(*g.group->TakeRank(r)));
    g.pointers.push_back(g.comms.back().get());
  }
  return g;
}

double MaxAbsDifference(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]));
  }
  return worst;
}

}  // namespace testing_dp
}  // namespace kiln
