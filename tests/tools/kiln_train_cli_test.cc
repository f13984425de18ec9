// `kiln train` and `kiln test` end to end on the CPU: a tiny solver trains, writes its curve and
// snapshot, resumes from the snapshot; `kiln test` reads the snapshot back; usage errors exit 2
// with a message.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "frontends/caffe/caffe_io.h"
#include "frontends/caffe/data/datum_db.h"
#include "gtest/gtest.h"
#include "runtime/device.h"
#include "tests/util/scratch_file.h"
#include "tools/train_command.h"

namespace kiln {
namespace {

struct Result {
  int rc = -1;
  std::string out, err;
};

Result Call(std::vector<std::string> args) {
  args.insert(args.begin(), "kiln");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(&a[0]);
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  Result r;
  const int argc = static_cast<int>(argv.size());
  r.rc = args[1] == "train" ? TrainCommand(argc, argv.data()) : TestCommand(argc, argv.data());
  r.out = ::testing::internal::GetCapturedStdout();
  r.err = ::testing::internal::GetCapturedStderr();
  return r;
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A solver and net in the scratch folder over a 64-record LMDB of 1x8x8 images; the net's
// source is relative, so it is found beside the solver (the test's working directory is its
// runfiles). Returns the solver path.
std::string WriteTinySolver() {
  static const std::string solver = [] {
    DatumWriterOptions options;
    options.overwrite = true;
    auto writer = DatumWriter::Open(ScratchFile("cli_lmdb"), DbBackend::kLmdb, options);
    EXPECT_TRUE(writer.ok()) << writer.status();
    for (int i = 0; i < 64; ++i) {
      caffe::Datum d;
      d.set_channels(1);
      d.set_height(8);
      d.set_width(8);
      // Class 1 has a bright top half, class 0 a bright bottom half: learnable in a few steps.
      std::string pixels(64, '\0');
      for (int p = 0; p < 64; ++p) pixels[p] = static_cast<char>(((p < 32) == (i % 2)) ? 200 : 20);
      d.set_data(pixels);
      d.set_label(i % 2);
      EXPECT_TRUE((*writer)->Put(DatumKey(i), d).ok());
    }
    EXPECT_TRUE((*writer)->Close().ok());
    const std::string net = R"pb(
      name: "cli_tiny"
      layer {
        name: "data"
        type: "Data"
        top: "data"
        top: "label"
        transform_param { scale: 0.00390625 }
        data_param { source: "cli_lmdb" batch_size: 16 backend: LMDB }
      }
      layer {
        name: "conv"
        type: "Convolution"
        bottom: "data"
        top: "conv"
        convolution_param {
          num_output: 2
          kernel_size: 3
          weight_filler { type: "xavier" }
        }
      }
      layer { name: "relu" type: "ReLU" bottom: "conv" top: "conv" }
      layer {
        name: "ip"
        type: "InnerProduct"
        bottom: "conv"
        top: "ip"
        inner_product_param {
          num_output: 2
          weight_filler { type: "xavier" }
        }
      }
      layer {
        name: "accuracy"
        type: "Accuracy"
        bottom: "ip"
        bottom: "label"
        top: "accuracy"
        include { phase: TEST }
      }
      layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
    )pb";
    EXPECT_TRUE(WriteFileBytes(ScratchFile("cli_net.prototxt"), net).ok());
    const std::string text = absl::StrCat(
        "net: \"cli_net.prototxt\"\ntest_iter: 2\ntest_interval: 100\nbase_lr: 0.05\n"
        "momentum: 0.9\nlr_policy: \"fixed\"\ndisplay: 1\nmax_iter: 1000\nsnapshot: 0\n"
        "random_seed: 2\nsnapshot_prefix: \"",
        ScratchFile("cli_run"), "\"\n");
    EXPECT_TRUE(WriteFileBytes(ScratchFile("cli_solver.prototxt"), text).ok());
    return ScratchFile("cli_solver.prototxt");
  }();
  return solver;
}

// A solver over WriteTinySolver's net and data with its own prefix and `fields`.
std::string WriteSolverWith(const std::string& name, const std::string& fields) {
  WriteTinySolver();  // the net and the LMDB
  const std::string path = ScratchFile(name + "_solver.prototxt");
  EXPECT_TRUE(WriteFileBytes(path, absl::StrCat("net: \"cli_net.prototxt\"\nlr_policy: \"fixed\"\n",
                                                "momentum: 0.9\nrandom_seed: 2\n", fields,
                                                "snapshot_prefix: \"", ScratchFile(name), "\"\n"))
                  .ok());
  return path;
}

// Raises `signal` in this process once `file` exists (the run has reached its training loop,
// where the handlers are installed), from a thread, while `Call` trains on the test's thread.
std::thread RaiseWhenExists(const std::string& file, int signal) {
  return std::thread([file, signal] {
    for (int i = 0; i < 6000 && !std::filesystem::exists(file); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::raise(signal);
  });
}

// The highest N of the <prefix>_iter_N.manifest files in the scratch folder, or -1.
int64_t LastManifest(const std::string& prefix) {
  int64_t last = -1;
  const std::string start =
      std::filesystem::path(ScratchFile(prefix)).filename().string() + "_iter_";
  for (const auto& e : std::filesystem::directory_iterator(ScratchFile(""))) {
    const std::string name = e.path().filename().string();
    if (name.rfind(start, 0) != 0 || e.path().extension() != ".manifest") continue;
    last = std::max<int64_t>(last, std::stoll(name.substr(start.size())));
  }
  return last;
}

TEST(KilnTrainCliTest, SigtermSnapshotsAndTheSnapshotResumes) {
  const std::string solver =
      WriteSolverWith("sig_term", "base_lr: 0.05\nsnapshot: 5\nmax_iter: 100000000\n");
  const std::string stale = ScratchFile("sig_term_iter_3.caffemodel.kiln-partial-1-0");
  ASSERT_TRUE(WriteFileBytes(stale, "half a snapshot a killed run left").ok());
  std::thread raiser = RaiseWhenExists(ScratchFile("sig_term_iter_5.manifest"), SIGTERM);
  Result r = Call({"train", "--solver", solver, "--device", "cpu"});
  raiser.join();
  EXPECT_NE(r.rc, 0);
  EXPECT_TRUE(Contains(r.err, "interrupted by SIGTERM (snapshot written)")) << r.err;
  EXPECT_TRUE(Contains(r.out, "Interrupted by SIGTERM at iteration")) << r.out;
  EXPECT_FALSE(std::filesystem::exists(stale)) << "the stale partial file stayed";
  EXPECT_TRUE(Contains(r.err, "removed " + stale)) << r.err;
  const int64_t last = LastManifest("sig_term");
  ASSERT_GE(last, 5);
  const std::string state = ScratchFile(absl::StrCat("sig_term_iter_", last, ".solverstate"));
  Result resumed = Call({"train", "--solver", solver, "--snapshot", state, "--iterations",
                         std::to_string(last + 3), "--device", "cpu"});
  ASSERT_EQ(resumed.rc, 0) << resumed.out << resumed.err;
  EXPECT_TRUE(Contains(resumed.out, "kiln train: 3 iterations in ")) << resumed.out;
  EXPECT_FALSE(Contains(resumed.err, "note:")) << resumed.err;  // a Kiln snapshot: exact resume
}

TEST(KilnTrainCliTest, Sigusr1SnapshotsAndTrainingGoesOn) {
  const std::string solver =
      WriteSolverWith("sig_usr1", "base_lr: 0.05\nsnapshot: 5\nmax_iter: 100000000\n");
  std::thread warner = RaiseWhenExists(ScratchFile("sig_usr1_iter_5.manifest"), SIGUSR1);
  std::thread stopper = RaiseWhenExists(ScratchFile("sig_usr1_iter_20.manifest"), SIGINT);
  Result r = Call({"train", "--solver", solver, "--device", "cpu"});
  warner.join();
  stopper.join();
  EXPECT_TRUE(Contains(r.out, ": snapshotting, training goes on")) << r.out;
  EXPECT_TRUE(Contains(r.err, "interrupted by SIGINT (snapshot written)")) << r.err;
}

TEST(KilnTrainCliTest, ADivergedLossSnapshotsTheLastGoodState) {
  const std::string solver = WriteSolverWith("nan_loss", "base_lr: 1e30\nmax_iter: 1000\n");
  Result r = Call({"train", "--solver", solver, "--device", "cpu"});
  EXPECT_NE(r.rc, 0);
  EXPECT_TRUE(Contains(r.err, "update was not applied; the last good state was snapshotted"))
      << r.err;
  const int64_t last = LastManifest("nan_loss");
  ASSERT_GE(last, 0) << r.out;
  auto weights = ReadNetParameter(ScratchFile(absl::StrCat("nan_loss_iter_", last, ".caffemodel")));
  ASSERT_TRUE(weights.ok()) << weights.status();
  int values = 0;
  for (const caffe::LayerParameter& layer : weights->layer()) {
    for (const caffe::BlobProto& blob : layer.blobs()) {
      for (float v : blob.data()) {
        EXPECT_TRUE(std::isfinite(v)) << layer.name();
        ++values;
      }
    }
  }
  EXPECT_GT(values, 0);
}

TEST(KilnTrainCliTest, TrainsWritesCurveAndSnapshotResumesAndTests) {
  const std::string solver = WriteTinySolver();
  const std::string curve = ScratchFile("cli_curve.svg");
  std::filesystem::remove(curve);
  Result train =
      Call({"train", "--solver", solver, "--iterations", "5", "--curve", curve, "--device", "cpu"});
  ASSERT_EQ(train.rc, 0) << train.out << train.err;
  EXPECT_TRUE(Contains(train.out, "5 iterations of 16 images")) << train.out;
  EXPECT_TRUE(Contains(train.out, "Iteration 0, Testing net (#0)")) << train.out;
  EXPECT_TRUE(Contains(train.out, "Iteration 4 (")) << train.out;  // display: 1
  EXPECT_TRUE(Contains(train.out, "Test net output #0: accuracy = ")) << train.out;
  EXPECT_TRUE(Contains(train.out, "kiln train: 5 iterations in ")) << train.out;
  // snapshot_after_train (Caffe's default) writes the final state.
  const std::string model = ScratchFile("cli_run_iter_5.caffemodel");
  const std::string state = ScratchFile("cli_run_iter_5.solverstate");
  EXPECT_TRUE(Contains(train.out, "Snapshotting to " + model + " and " + state)) << train.out;
  EXPECT_TRUE(std::filesystem::exists(model));
  EXPECT_TRUE(std::filesystem::exists(state));
  EXPECT_TRUE(Contains(train.out, "curve written to " + curve)) << train.out;
  auto svg = ReadFileBytes(curve);
  ASSERT_TRUE(svg.ok()) << svg.status();
  EXPECT_TRUE(Contains(*svg, "<svg")) << *svg;
  EXPECT_TRUE(Contains(*svg, "</svg>"));
  EXPECT_TRUE(Contains(*svg, "accuracy"));

  // --snapshot continues at iteration 5 up to --iterations.
  Result resumed = Call(
      {"train", "--solver", solver, "--snapshot", state, "--iterations", "7", "--device", "cpu"});
  ASSERT_EQ(resumed.rc, 0) << resumed.out << resumed.err;
  EXPECT_TRUE(Contains(resumed.out, "kiln train: 2 iterations in ")) << resumed.out;
  EXPECT_TRUE(std::filesystem::exists(ScratchFile("cli_run_iter_7.caffemodel")));
  // The default curve path follows the snapshot prefix.
  EXPECT_TRUE(std::filesystem::exists(ScratchFile("cli_run_iter_7_curve.svg")));

  // `kiln test` on the snapshot: the TEST phase's scalar outputs, accuracy among them.
  Result test = Call({"test", "--model", ScratchFile("cli_net.prototxt"), "--weights", model,
                      "--iterations", "2", "--device", "cpu"});
  ASSERT_EQ(test.rc, 0) << test.out << test.err;
  EXPECT_TRUE(Contains(test.out, "accuracy = ")) << test.out;
  EXPECT_TRUE(Contains(test.out, "loss = ")) << test.out;
  EXPECT_TRUE(Contains(test.out, "(* 1 = ")) << test.out;  // the loss with its weight
}

TEST(KilnTrainCliTest, UsageErrorsExitTwoWithAMessage) {
  const std::string solver = WriteTinySolver();
  Result r = Call({"train", "--solver", solver, "--no-such-flag", "1"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_TRUE(Contains(r.err, "kiln train: ")) << r.err;
  EXPECT_TRUE(Contains(r.err, "unknown flag --no-such-flag")) << r.err;

  r = Call({"train", "--solver", solver, "--iterations", "0"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_TRUE(Contains(r.err, "--iterations must be a positive number")) << r.err;

  r = Call({"train", "--iterations", "3"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_TRUE(Contains(r.err, "--solver is required")) << r.err;

  r = Call({"train", "--solver", solver, "--weights", "w.caffemodel", "--snapshot", "s"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_TRUE(Contains(r.err, "not both")) << r.err;

  r = Call({"test", "--model", ScratchFile("cli_net.prototxt")});
  EXPECT_EQ(r.rc, 2);
  EXPECT_TRUE(Contains(r.err, "kiln test: ")) << r.err;
  EXPECT_TRUE(Contains(r.err, "--weights")) << r.err;

  // A missing solver file is an error of the environment, not of usage: exit 1, naming it.
  r = Call({"train", "--solver", ScratchFile("no_such_solver.prototxt")});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(Contains(r.err, "no_such_solver.prototxt")) << r.err;
}

// The multi-GPU flags through `kiln train`: usage errors exit 2 naming the flag; --gpus on a
// machine without a GPU and a rank on the CPU fail with the reason (exit 1).
TEST(KilnTrainCliTest, MultiGpuFlagsFailClearly) {
  const std::string solver = WriteTinySolver();
  Result r = Call({"train", "--solver", solver, "--rank", "0", "--world-size", "2"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_TRUE(Contains(r.err, "--rendezvous is missing")) << r.err;

  r = Call({"train", "--solver", solver, "--gpus", "0,1", "--rank", "1"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_TRUE(Contains(r.err, "give either --gpus or --rank")) << r.err;

  r = Call({"train", "--solver", solver, "--sync-bn"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_TRUE(Contains(r.err, "--sync-bn needs several ranks")) << r.err;

  r = Call({"train", "--solver", solver, "--no-overlap"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_TRUE(Contains(r.err, "--no-overlap needs several ranks")) << r.err;

  r = Call({"train", "--gpus", "all"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_TRUE(Contains(r.err, "--solver is required")) << r.err;

  // A rank needs NCCL and a GPU: on the CPU backend it says so before touching the rendezvous.
  r = Call({"train", "--solver", solver, "--rank", "0", "--world-size", "1", "--rendezvous",
            "file:" + ScratchFile("cli_rdzv"), "--device", "cpu"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(Contains(r.err, "--rank/--world-size need GPUs")) << r.err;

  if (ProbeCuda().usable) GTEST_SKIP() << "this machine has a GPU: --gpus would launch";
  r = Call({"train", "--solver", solver, "--gpus", "all"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(Contains(r.err, "FAILED_PRECONDITION")) << r.err;
  EXPECT_TRUE(Contains(r.err, "--gpus all: no usable CUDA device on this machine")) << r.err;
  r = Call({"train", "--solver", solver, "--gpus", "0,1"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(Contains(r.err, "--gpus 0,1: no usable CUDA device")) << r.err;
}

}  // namespace
}  // namespace kiln
