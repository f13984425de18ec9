// The shared pieces of the training tests (declared in trainer_fixtures.h).
#include "tests/training/trainer_fixtures.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "frontends/caffe/caffe_io.h"
#include "frontends/caffe/data/datum_db.h"
#include "gtest/gtest.h"
#include "tests/util/scratch_file.h"

namespace kiln {

std::string WriteDb(const std::string& name, int records,
                    const std::function<caffe::Datum(int)>& make) {
  const std::string path = ScratchFile(name);
  DatumWriterOptions options;
  options.overwrite = true;
  auto writer = DatumWriter::Open(path, DbBackend::kLmdb, options);
  EXPECT_TRUE(writer.ok()) << writer.status();
  if (!writer.ok()) return path;
  for (int i = 0; i < records; ++i) EXPECT_TRUE((*writer)->Put(DatumKey(i), make(i)).ok());
  EXPECT_TRUE((*writer)->Close().ok());
  return path;
}

absl::StatusOr<SolverConfig> WriteAndLoadSolver(const std::string& name, const std::string& net,
                                                const std::string& solver) {
  const std::string net_file = name + "_net.prototxt";
  if (absl::Status s = WriteFileBytes(ScratchFile(net_file), net); !s.ok()) return s;
  const std::string solver_file = ScratchFile(name + "_solver.prototxt");
  const std::string text = absl::StrCat("net: \"", net_file, "\"\n", solver);
  if (absl::Status s = WriteFileBytes(solver_file, text); !s.ok()) return s;
  return LoadSolver(solver_file);
}

absl::StatusOr<std::unique_ptr<SolverTrainer>> MakeTrainer(const SolverConfig& solver,
                                                           double loss_scale, bool optimize) {
  TrainerOptions options;
  options.loss_scale = loss_scale;
  options.compile.optimize = optimize;
  const std::string any = ScratchFile("x");
  options.solver_dir = any.substr(0, any.rfind('/'));
  return SolverTrainer::Create(solver, options);
}

std::vector<std::vector<float>> Blobs(const caffe::NetParameter& net, const std::string& layer) {
  std::vector<std::vector<float>> out;
  for (const caffe::LayerParameter& l : net.layer()) {
    if (l.name() != layer) continue;
    for (const caffe::BlobProto& b : l.blobs()) out.emplace_back(b.data().begin(), b.data().end());
  }
  return out;
}

namespace {
constexpr int kRecords = 10 * kResumeBatch;
}  // namespace

// Written once per process: a later test must not rewrite a database an open Trainer reads.
std::string ResumeDb() {
  static const std::string path = WriteDb("resume_lmdb", kRecords, [](int i) {
    caffe::Datum d;
    d.set_channels(1);
    d.set_height(8);
    d.set_width(8);
    std::string pixels(64, '\0');
    uint32_t state = 2654435761u * static_cast<uint32_t>(i + 1);
    for (char& p : pixels) {
      state = state * 1664525u + 1013904223u;  // a fixed pseudo-random stream per record
      p = static_cast<char>(state >> 24);
    }
    d.set_data(pixels);
    d.set_label(i % 3);
    return d;
  });
  return path;
}

std::string ResumeNet(const std::string& source, bool batch_norm, bool with_scale) {
  const std::string head = R"pb(
    name: "tiny"
    layer {
      name: "data"
      type: "Data"
      top: "data"
      top: "label"
      transform_param { scale: 0.00390625 }
      data_param { source: "SOURCE" batch_size: 32 backend: LMDB }
    }
    layer {
      name: "conv"
      type: "Convolution"
      bottom: "data"
      top: "conv"
      param { lr_mult: 1 }
      param { lr_mult: 2 }
      convolution_param {
        num_output: 3
        kernel_size: 3
        weight_filler { type: "xavier" }
        bias_filler { type: "constant" value: 0.1 }
      }
    }
  )pb";
  const std::string bn = R"pb(
    layer { name: "bn" type: "BatchNorm" bottom: "conv" top: "conv" }
  )pb";
  const std::string tail = R"pb(
    layer { name: "relu" type: "ReLU" bottom: "conv" top: "conv" }
    layer {
      name: "pool"
      type: "Pooling"
      bottom: "conv"
      top: "pool"
      pooling_param { pool: MAX kernel_size: 2 stride: 2 }
    }
    layer {
      name: "ip"
      type: "InnerProduct"
      bottom: "pool"
      top: "ip"
      param { lr_mult: 1 }
      param { lr_mult: 2 }
      inner_product_param {
        num_output: 3
        weight_filler { type: "xavier" }
      }
    }
    layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
  )pb";
  const std::string scale = R"pb(
    layer {
      name: "bn_scale"
      type: "Scale"
      bottom: "conv"
      top: "conv"
      scale_param {
        bias_term: true
        filler { type: "uniform" min: 0.5 max: 1.5 }
        bias_filler { type: "uniform" min: -0.2 max: 0.2 }
      }
    }
  )pb";
  return absl::StrReplaceAll(
      absl::StrCat(head, batch_norm ? bn : "", batch_norm && with_scale ? scale : "", tail),
      {{"SOURCE", source}});
}

}  // namespace kiln
