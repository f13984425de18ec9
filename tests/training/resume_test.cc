// Snapshot and resume: a run interrupted at any iteration and resumed from its snapshot ends with
// the same parameters, to the bit, as one that never stopped. The snapshot records the
// optimizer's histories, the iteration and (SolverState.kiln_progress) where every data source and
// the dropout masks stood and the state the recurrent layers carry; the sources seek there,
// drawing the same shuffles and random transforms.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "base/file_io.h"
#include "frontends/caffe/data/datum_batch_source.h"
#include "frontends/caffe/solver_state.h"
#include "gtest/gtest.h"
#include "tests/training/trainer_fixtures.h"
#include "tests/util/hdf5_files.h"
#include "tests/util/scratch_file.h"
#include "training/memory_batch_source.h"

namespace kiln {
namespace {

// ResumeNet with random crops and mirrors in its data layer and a Dropout after the pooling:
// every random stream a training run draws from.
std::string RandomizedNet() {
  std::string net = absl::StrReplaceAll(
      ResumeNet(ResumeDb()), {{"transform_param { scale: 0.00390625 }",
                               "transform_param { scale: 0.00390625 mirror: true crop_size: 6 }"}});
  const std::string ip = "layer {\n      name: \"ip\"";
  const size_t at = net.find(ip);
  EXPECT_NE(at, std::string::npos);
  net.insert(at,
             "layer { name: \"drop\" type: \"Dropout\" bottom: \"pool\" top: \"pool\" "
             "dropout_param { dropout_ratio: 0.3 } }\n    ");
  return net;
}

// The learnable layers' blobs of two WeightsAsNet results, compared byte for byte; also checks
// that the parameters moved between `mid` and `want` (the comparison is not vacuous).
void ExpectSameBits(const caffe::NetParameter& want, const caffe::NetParameter& have,
                    const caffe::NetParameter& mid,
                    const std::vector<std::string>& layers = {"conv", "ip"}) {
  for (const std::string& layer : layers) {
    const auto w = Blobs(want, layer), h = Blobs(have, layer), m = Blobs(mid, layer);
    ASSERT_FALSE(w.empty()) << layer;
    ASSERT_EQ(h.size(), w.size()) << layer;
    for (size_t b = 0; b < w.size(); ++b) {
      ASSERT_EQ(w[b].size(), h[b].size());
      int differing = 0;
      for (size_t k = 0; k < w[b].size(); ++k) {
        differing += std::memcmp(&w[b][k], &h[b][k], sizeof(float)) != 0;
      }
      EXPECT_EQ(differing, 0) << layer << " blob " << b << " (of " << w[b].size() << ")";
      EXPECT_NE(w[b], m[b]) << layer << " blob " << b;
    }
  }
}

// A run of `total` iterations straight, and one stopped at `stop` with a snapshot.
struct Interrupted {
  caffe::NetParameter expected;  // the straight run's final weights
  caffe::NetParameter at_stop;   // the stopped run's weights when it stopped
  std::string state_path;        // its .solverstate
};

void TrainStraightAndStopped(const SolverConfig& config, const std::string& name, int stop,
                             int total, Interrupted& out) {
  auto straight = MakeTrainer(config);
  ASSERT_TRUE(straight.ok()) << straight.status();
  for (int i = 0; i < total; ++i) ASSERT_TRUE((*straight)->Step().ok());
  auto expected = (*straight)->WeightsAsNet();
  ASSERT_TRUE(expected.ok());
  out.expected = *expected;
  auto first = MakeTrainer(config);
  ASSERT_TRUE(first.ok()) << first.status();
  for (int i = 0; i < stop; ++i) ASSERT_TRUE((*first)->Step().ok());
  auto paths = (*first)->Snapshot(ScratchFile(name));
  ASSERT_TRUE(paths.ok()) << paths.status();
  EXPECT_EQ(paths->second, absl::StrCat(ScratchFile(name), "_iter_", stop, ".solverstate"));
  out.state_path = paths->second;
  out.at_stop = *(*first)->WeightsAsNet();
}

// Trains `total` iterations straight, and `stop` + snapshot + restore into a new Trainer + the
// rest; the final parameters must be identical to the bit.
void CheckResumeIsExact(const std::string& name, const std::string& net,
                        const std::string& solver_fields, int stop, int total) {
  const std::string solver =
      absl::StrCat(solver_fields, "max_iter: ", total, "\nrandom_seed: 5\nweight_decay: 0.001\n",
                   "snapshot_prefix: \"", ScratchFile(name), "\"\n");
  auto config = WriteAndLoadSolver(name, net, solver);
  ASSERT_TRUE(config.ok()) << config.status();
  Interrupted run;
  ASSERT_NO_FATAL_FAILURE(TrainStraightAndStopped(*config, name, stop, total, run));
  auto resumed = MakeTrainer(*config);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  absl::Status restored = (*resumed)->Restore(run.state_path);
  ASSERT_TRUE(restored.ok()) << restored;
  EXPECT_EQ((*resumed)->restore_note(), "");
  EXPECT_EQ((*resumed)->iter(), stop);
  for (int i = stop; i < total; ++i) ASSERT_TRUE((*resumed)->Step().ok());
  auto got = (*resumed)->WeightsAsNet();
  ASSERT_TRUE(got.ok());
  ExpectSameBits(run.expected, *got, run.at_stop);
}

TEST(TrainerResume, SgdWithMomentumAndStepScheduleResumesExactly) {
  // The step schedule changes the rate at 7 and 14: the restored iteration must drive it.
  CheckResumeIsExact("resume_sgd", ResumeNet(ResumeDb()),
                     "type: \"SGD\"\nbase_lr: 0.05\nmomentum: 0.9\nlr_policy: \"step\"\n"
                     "stepsize: 7\ngamma: 0.5\n",
                     10, 20);
}

TEST(TrainerResume, AdamResumesExactly) {
  // Adam keeps two histories, and its bias correction depends on the restored iteration.
  CheckResumeIsExact("resume_adam", ResumeNet(ResumeDb()),
                     "type: \"Adam\"\nbase_lr: 0.01\nmomentum: 0.9\nmomentum2: 0.999\n"
                     "delta: 1e-8\nlr_policy: \"fixed\"\n",
                     10, 20);
}

TEST(TrainerResume, MidEpochWithDropoutCropsAndMirrorsResumesExactly) {
  // Stopped at 7 of the database's 10 batches and run across two epoch ends: the data must go on
  // at batch 7, with the crops, mirrors and dropout masks the straight run drew.
  CheckResumeIsExact("resume_random", RandomizedNet(),
                     "type: \"SGD\"\nbase_lr: 0.05\nmomentum: 0.9\nlr_policy: \"fixed\"\n", 7, 23);
}

// A sequence net whose LSTM carries its state from one iteration to the next, as Caffe's does:
// HDF5Data rows are time steps (T = 4 a batch, 3 streams), cont is 0 only at each stream's
// first step, so every batch goes on from the state the last one left, and the file wraps after
// 5 batches (where cont 0 starts the streams again).
std::string RecurrentNet() {
  static const std::string* const list = [] {
    std::mt19937 rng(3);
    std::uniform_real_distribution<double> uniform(-1, 1);
    testing::H5Array x, cont, label;
    x.dims = {20, 3, 2};
    cont.dims = label.dims = {20, 3};
    for (int i = 0; i < 20 * 3 * 2; ++i) x.values.push_back(uniform(rng));
    for (int i = 0; i < 20 * 3; ++i) {
      cont.values.push_back(i < 3 ? 0 : 1);
      label.values.push_back((i * 7 + i / 3) % 3);
    }
    const std::string file = ScratchFile("recurrent_resume.h5");
    testing::WriteH5(file, {{"x", x}, {"cont", cont}, {"label", label}});
    auto* path = new std::string(ScratchFile("recurrent_resume_list.txt"));
    EXPECT_TRUE(WriteFileBytes(*path, file + "\n").ok());
    return path;
  }();
  return absl::StrCat(R"(
    layer { name: "data" type: "HDF5Data" top: "x" top: "cont" top: "label"
            hdf5_data_param { source: ")",
                      *list, R"(" batch_size: 4 } }
    layer { name: "lstm" type: "LSTM" bottom: "x" bottom: "cont" top: "h"
            recurrent_param { num_output: 5
                              weight_filler { type: "uniform" min: -0.5 max: 0.5 }
                              bias_filler { type: "uniform" min: -0.1 max: 0.1 } } }
    layer { name: "ip" type: "InnerProduct" bottom: "h" top: "score"
            inner_product_param { num_output: 3 axis: 2
                                  weight_filler { type: "uniform" min: -0.5 max: 0.5 } } }
    layer { name: "loss" type: "SoftmaxWithLoss" bottom: "score" bottom: "label" top: "loss"
            softmax_param { axis: 2 } }
  )");
}

// The snapshot records the LSTM's state (kiln_progress), and the resumed run goes on from it to
// the same bits as the straight run; resumed from zeros instead (Caffe's resume, which keeps no
// such state), it ends elsewhere: the carried state is part of what the run is.
TEST(TrainerResume, CarriedRecurrentStateResumesExactly) {
  const std::string name = "resume_recurrent";
  const std::string solver =
      absl::StrCat("type: \"SGD\"\nbase_lr: 0.5\nmomentum: 0.9\nlr_policy: \"fixed\"\n",
                   "max_iter: 8\nrandom_seed: 5\nsnapshot_prefix: \"", ScratchFile(name), "\"\n");
  auto config = WriteAndLoadSolver(name, RecurrentNet(), solver);
  ASSERT_TRUE(config.ok()) << config.status();
  Interrupted run;
  ASSERT_NO_FATAL_FAILURE(TrainStraightAndStopped(*config, name, 3, 8, run));
  const std::string& state_path = run.state_path;
  // The state file holds the trained net's h and c (3 streams x 5 values each), not zeros.
  auto bytes = ReadFileBytes(state_path);
  ASSERT_TRUE(bytes.ok());
  auto state = ParseSolverState(*bytes, state_path);
  ASSERT_TRUE(state.ok()) << state.status();
  ASSERT_TRUE(state->progress.has_value());
  const std::vector<std::vector<float>>& carried = state->progress->nets[0].carried_state;
  ASSERT_EQ(carried.size(), 2u);
  ASSERT_EQ(carried[0].size(), 15u);
  EXPECT_NE(carried[0], std::vector<float>(15, 0.0f));

  for (const bool from_zeros : {false, true}) {
    SCOPED_TRACE(from_zeros ? "state zeroed" : "state restored");
    auto resumed = MakeTrainer(*config);
    ASSERT_TRUE(resumed.ok()) << resumed.status();
    absl::Status restored = (*resumed)->Restore(state_path);
    ASSERT_TRUE(restored.ok()) << restored;
    if (from_zeros) {
      auto progress = (*resumed)->Progress();
      ASSERT_TRUE(progress.ok());
      for (auto& values : progress->nets[0].carried_state) {
        std::fill(values.begin(), values.end(), 0.0f);
      }
      ASSERT_TRUE((*resumed)->RestoreProgress(*progress).ok());
    }
    for (int i = 3; i < 8; ++i) ASSERT_TRUE((*resumed)->Step().ok());
    auto got = (*resumed)->WeightsAsNet();
    ASSERT_TRUE(got.ok());
    if (!from_zeros) {
      ExpectSameBits(run.expected, *got, run.at_stop, {"lstm", "ip"});
    } else {
      EXPECT_NE(Blobs(run.expected, "ip"), Blobs(*got, "ip"));
    }
  }
  // A state of another size is refused, naming the state.
  auto resumed = MakeTrainer(*config);
  ASSERT_TRUE(resumed.ok());
  ASSERT_TRUE((*resumed)->Restore(state_path).ok());
  auto progress = (*resumed)->Progress();
  ASSERT_TRUE(progress.ok());
  progress->nets[0].carried_state[1].pop_back();
  absl::Status refused = (*resumed)->RestoreProgress(*progress);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.message().find("carried/lstm/c"), std::string::npos) << refused;
}

TEST(TrainerResume, TheSolverStateRecordsWhereTheDataStood) {
  auto config = WriteAndLoadSolver(
      "resume_progress", RandomizedNet(),
      absl::StrCat("type: \"SGD\"\nbase_lr: 0.01\nlr_policy: \"fixed\"\nmax_iter: 3\n",
                   "snapshot_prefix: \"", ScratchFile("resume_progress"), "\"\n"));
  ASSERT_TRUE(config.ok()) << config.status();
  auto trainer = MakeTrainer(*config);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*trainer)->Step().ok());
  auto paths = (*trainer)->Snapshot(ScratchFile("resume_progress"));
  ASSERT_TRUE(paths.ok()) << paths.status();
  auto state = ReadSolverStateData(paths->second);
  ASSERT_TRUE(state.ok()) << state.status();
  ASSERT_TRUE(state->progress.has_value());
  ASSERT_GE(state->progress->nets.size(), 1u);
  const NetProgress& train = state->progress->nets[0];
  EXPECT_EQ(train.passes, 3);
  ASSERT_EQ(train.batches_served.size(), 1u);
  EXPECT_EQ(train.batches_served[0], 3);
}

TEST(TrainerResume, ACaffeSnapshotResumesWithANote) {
  // Caffe's .solverstate has no data position: the resume works, and says the data restarts.
  auto config = WriteAndLoadSolver(
      "resume_caffe_state", ResumeNet(ResumeDb()),
      absl::StrCat("type: \"SGD\"\nbase_lr: 0.01\nlr_policy: \"fixed\"\nmax_iter: 4\n",
                   "snapshot_prefix: \"", ScratchFile("resume_caffe_state"), "\"\n"));
  ASSERT_TRUE(config.ok()) << config.status();
  auto first = MakeTrainer(*config);
  ASSERT_TRUE(first.ok()) << first.status();
  for (int i = 0; i < 2; ++i) ASSERT_TRUE((*first)->Step().ok());
  auto paths = (*first)->Snapshot(ScratchFile("resume_caffe_state"));
  ASSERT_TRUE(paths.ok()) << paths.status();
  auto state = ReadSolverStateData(paths->second);
  ASSERT_TRUE(state.ok()) << state.status();
  state->progress.reset();
  const std::string caffe_state = ScratchFile("resume_caffe_state_as_caffe.solverstate");
  ASSERT_TRUE(WriteSolverState(caffe_state, *state).ok());
  auto resumed = MakeTrainer(*config);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  absl::Status restored = (*resumed)->Restore(caffe_state, paths->first);
  ASSERT_TRUE(restored.ok()) << restored;
  EXPECT_NE((*resumed)->restore_note().find("records no data position"), std::string::npos)
      << (*resumed)->restore_note();
  EXPECT_TRUE((*resumed)->Step().ok());
}

// A kill between the files of a snapshot leaves a state beside a model of another snapshot, or
// a pair without its manifest: refused, while the previous pair still resumes.
TEST(TrainerResume, ATornSnapshotPairIsRefused) {
  const std::string prefix = ScratchFile("resume_torn");
  auto config = WriteAndLoadSolver(
      "resume_torn", ResumeNet(ResumeDb()),
      absl::StrCat("type: \"SGD\"\nbase_lr: 0.01\nlr_policy: \"fixed\"\nmax_iter: 4\n",
                   "snapshot_prefix: \"", prefix, "\"\n"));
  ASSERT_TRUE(config.ok()) << config.status();
  auto trainer = MakeTrainer(*config);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  ASSERT_TRUE((*trainer)->Step().ok());
  auto first = (*trainer)->Snapshot(prefix);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE((*trainer)->Step().ok());
  auto second = (*trainer)->Snapshot(prefix);
  ASSERT_TRUE(second.ok()) << second.status();
  for (const auto& entry : std::filesystem::directory_iterator(ScratchFile(""))) {
    EXPECT_EQ(entry.path().string().find(".kiln-partial"), std::string::npos) << entry.path();
  }

  // The second state beside the first snapshot's model (a kill after the model's rename).
  auto first_model = ReadFileBytes(first->first);
  ASSERT_TRUE(first_model.ok());
  ASSERT_TRUE(WriteFileBytes(second->first, *first_model).ok());
  auto resumed = MakeTrainer(*config);
  ASSERT_TRUE(resumed.ok());
  absl::Status mixed = (*resumed)->Restore(second->second);
  EXPECT_EQ(mixed.code(), absl::StatusCode::kFailedPrecondition) << mixed;
  EXPECT_NE(mixed.message().find("is not the caffemodel"), std::string::npos) << mixed;
  EXPECT_EQ((*resumed)->iter(), 0);  // nothing was restored

  // A pair without its manifest (a kill before the manifest's rename).
  ASSERT_TRUE(std::filesystem::remove(prefix + "_iter_2.manifest"));
  absl::Status unfinished = (*resumed)->Restore(second->second);
  EXPECT_EQ(unfinished.code(), absl::StatusCode::kFailedPrecondition) << unfinished;
  EXPECT_NE(unfinished.message().find("manifest"), std::string::npos) << unfinished;

  // The previous pair is whole and resumes.
  absl::Status previous = (*resumed)->Restore(first->second);
  EXPECT_TRUE(previous.ok()) << previous;
  EXPECT_EQ((*resumed)->iter(), 1);
}

// A data-parallel rank other than 0 has no test nets: a snapshot that records test nets (written
// by rank 0) restores the trained net's progress there. (Found on two GPUs: rank 1 refused the
// snapshot and the job hung.)
TEST(TrainerResume, ATrainerWithoutTestNetsIgnoresTheirProgress) {
  const std::string prefix = ScratchFile("resume_no_tests");
  auto config = WriteAndLoadSolver(
      "resume_no_tests", ResumeNet(ResumeDb()),
      absl::StrCat("type: \"SGD\"\nbase_lr: 0.01\nlr_policy: \"fixed\"\nmax_iter: 4\n",
                   "snapshot_prefix: \"", prefix, "\"\n"));
  ASSERT_TRUE(config.ok()) << config.status();
  auto trainer = MakeTrainer(*config);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  for (int i = 0; i < 2; ++i) ASSERT_TRUE((*trainer)->Step().ok());
  absl::StatusOr<TrainingProgress> read = (*trainer)->Progress();
  ASSERT_TRUE(read.ok()) << read.status();
  TrainingProgress progress = *read;
  ASSERT_EQ(progress.nets.size(), 1u);  // this solver has no test net
  progress.nets.push_back({5, {5}});    // as rank 0 records its test net
  auto resumed = MakeTrainer(*config);
  ASSERT_TRUE(resumed.ok());
  absl::Status restored = (*resumed)->RestoreProgress(progress);
  EXPECT_TRUE(restored.ok()) << restored;
  EXPECT_EQ((*resumed)->Progress()->nets[0].batches_served, progress.nets[0].batches_served);
  progress.nets.clear();
  EXPECT_EQ((*resumed)->RestoreProgress(progress).code(), absl::StatusCode::kFailedPrecondition);
}

// The batches a fresh MemoryBatchSource hands out after Seek(k) are batches k, k+1, ... of an
// uninterrupted one, across epoch ends and reshuffles.
TEST(BatchSourceSeek, MemorySourceContinuesTheShuffledStream) {
  std::vector<float> examples(10 * 2), labels(10);
  for (int i = 0; i < 20; ++i) examples[i] = static_cast<float>(i);
  for (int i = 0; i < 10; ++i) labels[i] = static_cast<float>(i);
  MemoryBatchOptions options;
  options.batch_size = 3;
  options.shuffle = true;
  options.seed = 11;
  auto straight = MemoryBatchSource::Create(examples, {2}, labels, options);
  ASSERT_TRUE(straight.ok()) << straight.status();
  std::vector<std::vector<std::vector<float>>> stream(16);
  for (auto& batch : stream) ASSERT_TRUE((*straight)->NextBatch(batch).ok());
  EXPECT_EQ((*straight)->BatchesServed(), 16);
  for (int k = 0; k < 12; ++k) {
    auto source = MemoryBatchSource::Create(examples, {2}, labels, options);
    ASSERT_TRUE(source.ok());
    ASSERT_TRUE((*source)->Seek(k).ok());
    for (int b = k; b < 16; ++b) {
      std::vector<std::vector<float>> batch;
      ASSERT_TRUE((*source)->NextBatch(batch).ok());
      EXPECT_EQ(batch, stream[b]) << "seek " << k << ", batch " << b;
    }
  }
  auto source = MemoryBatchSource::Create(examples, {2}, labels, options);
  ASSERT_TRUE(source.ok());
  EXPECT_EQ((*source)->Seek(-1).code(), absl::StatusCode::kInvalidArgument);
}

// The same for a database source with shuffled order, random crops and mirrors, read ahead on
// its thread: Seek drops what was read ahead and starts again where it is told.
TEST(BatchSourceSeek, DatumSourceContinuesWithTheSameCropsAndMirrors) {
  DatumBatchOptions options;
  options.name = "data";
  options.source = ResumeDb();
  options.backend = DbBackend::kLmdb;
  options.batch_size = 7;  // does not divide the 320 records: epochs end mid-batch
  options.shuffle = true;
  options.seed = 3;
  options.transform.set_mirror(true);
  options.transform.set_crop_size(5);
  auto straight = DatumBatchSource::Open(options);
  ASSERT_TRUE(straight.ok()) << straight.status();
  std::vector<Batch> stream(100);
  for (Batch& batch : stream) ASSERT_TRUE((*straight)->Next(&batch).ok());
  for (int k : {0, 1, 45, 46, 47, 90}) {
    auto source = DatumBatchSource::Open(options);
    ASSERT_TRUE(source.ok());
    Batch ignored;
    ASSERT_TRUE((*source)->Next(&ignored).ok());  // read ahead, then moved away from
    ASSERT_TRUE((*source)->Seek(k).ok());
    EXPECT_EQ((*source)->BatchesServed(), k);
    for (int b = k; b < 100; ++b) {
      Batch batch;
      ASSERT_TRUE((*source)->Next(&batch).ok());
      EXPECT_EQ(batch.data, stream[b].data) << "seek " << k << ", batch " << b;
      EXPECT_EQ(batch.labels, stream[b].labels) << "seek " << k << ", batch " << b;
    }
  }
}

}  // namespace
}  // namespace kiln
