// Data-parallel training on the CPU with FakeCommunicator: two ranks of batch B train a small
// LeNet-like net exactly as one rank of batch 2B does (20 steps, parameters within 1e-5, and
// bit-identical on both ranks), with iter_size and gradient clipping too; BatchNorm statistics
// stay per rank unless synchronized; only rank 0 tests and snapshots; and a rank that is killed,
// or dies silently, ends the others with an error instead of a hang.
#include "frontends/caffe/training/data_parallel_trainer.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "distributed/fake_communicator.h"
#include "frontends/caffe/solver.h"
#include "gtest/gtest.h"
#include "tests/distributed/small_net.h"
#include "tests/util/scratch_file.h"

namespace kiln {
namespace {

using testing_dp::CpuOptions;
using testing_dp::Group;
using testing_dp::LayerBlobs;
using testing_dp::MakeGroup;
using testing_dp::MaxAbsDifference;
using testing_dp::Parameters;
using testing_dp::Solver;

// Trains `steps` with one rank of batch 2B and with two ranks of batch B; compares.
void ExpectTwoRanksMatchOne(const std::string& name, int batch, const std::string& extra,
                            int steps) {
  absl::StatusOr<std::unique_ptr<SolverTrainer>> single =
      SolverTrainer::Create(Solver(name + "_single", 2 * batch, extra), CpuOptions());
  ASSERT_TRUE(single.ok()) << single.status();
  const std::vector<float> initial = Parameters(**single);
  for (int i = 0; i < steps; ++i) ASSERT_TRUE((*single)->Step().ok());
  const std::vector<float> expected = Parameters(**single);

  Group g = MakeGroup(2);
  absl::StatusOr<std::unique_ptr<DataParallelTrainer>> dp =
      DataParallelTrainer::Create(Solver(name + "_dp", batch, extra), CpuOptions(), g.pointers);
  ASSERT_TRUE(dp.ok()) << dp.status();
  // Both ranks start from the same parameters as the single run (the same fillers, shared).
  EXPECT_EQ(Parameters((*dp)->worker(1).trainer()), initial);
  absl::Status status = (*dp)->Step(steps);
  ASSERT_TRUE(status.ok()) << status;
  const std::vector<float> rank0 = Parameters((*dp)->worker(0).trainer());
  const std::vector<float> rank1 = Parameters((*dp)->worker(1).trainer());
  EXPECT_EQ(rank0, rank1) << "the ranks' parameters differ";
  EXPECT_LE(MaxAbsDifference(rank0, expected), 1e-5);
  EXPECT_GT(MaxAbsDifference(initial, expected), 1e-2) << "training did not move the weights";
  EXPECT_EQ((*dp)->worker(0).trainer().iter(), steps);
  const DataParallelSync& sync = (*dp)->worker(0).sync();
  EXPECT_GE(sync.buckets().buckets.size(), 1u);
  EXPECT_EQ(sync.reductions(), steps * static_cast<int64_t>(sync.buckets().buckets.size()));
}

TEST(DataParallelTrainerTest, TwoRanksOfBatchBTrainAsOneRankOfBatch2B) {
  ExpectTwoRanksMatchOne("dp_plain", 8, "", 20);
}

TEST(DataParallelTrainerTest, SmallBucketsGiveTheSameResult) {
  // Many tiny buckets (one per gradient, about) reduce the same numbers.
  absl::StatusOr<std::unique_ptr<SolverTrainer>> single =
      SolverTrainer::Create(Solver("dp_buckets_single", 16), CpuOptions());
  ASSERT_TRUE(single.ok()) << single.status();
  for (int i = 0; i < 5; ++i) ASSERT_TRUE((*single)->Step().ok());
  Group g = MakeGroup(2);
  DataParallelOptions small;
  small.buckets.bucket_bytes = 512;
  small.buckets.first_bucket_bytes = 256;
  absl::StatusOr<std::unique_ptr<DataParallelTrainer>> dp =
      DataParallelTrainer::Create(Solver("dp_buckets", 8), CpuOptions(), g.pointers, small);
  ASSERT_TRUE(dp.ok()) << dp.status();
  ASSERT_TRUE((*dp)->Step(5).ok());
  const DataParallelSync& sync = (*dp)->worker(0).sync();
  // Six gradients (weights and biases of conv, ip1, ip2), 256-byte aligned, in 512-byte
  // buckets after a 256-byte first one: at least four buckets.
  EXPECT_GE(sync.buckets().buckets.size(), 4u) << sync.buckets().ToString(sync.production_order());
  // The last layer's gradients are produced first.
  EXPECT_NE(sync.production_order().front().name.find("ip2"), std::string::npos)
      << sync.buckets().ToString(sync.production_order());
  EXPECT_LE(MaxAbsDifference(Parameters((*dp)->worker(0).trainer()), Parameters(**single)), 1e-5);
}

TEST(DataParallelTrainerTest, IterSizeAndClippingMatchToo) {
  // Two ranks x iter_size 2 x batch 4 = one rank x batch 16; the clipping threshold is low
  // enough to act, so the norm must be the one of the averaged gradient.
  ExpectTwoRanksMatchOne("dp_iter", 4, "iter_size: 2\nclip_gradients: 0.05\n", 20);
}

TEST(DataParallelTrainerTest, BatchNormStatisticsArePerRankUnlessSynchronized) {
  for (bool synchronize : {false, true}) {
    SCOPED_TRACE(synchronize ? "synchronized" : "per rank");
    Group g = MakeGroup(2);
    DataParallelOptions options;
    options.sync_batch_norm_statistics = synchronize;
    absl::StatusOr<std::unique_ptr<DataParallelTrainer>> dp =
        DataParallelTrainer::Create(Solver(synchronize ? "dp_bn_sync" : "dp_bn", 8, "", true),
                                    CpuOptions(), g.pointers, options);
    ASSERT_TRUE(dp.ok()) << dp.status();
    const std::vector<float> before = LayerBlobs((*dp)->worker(0).trainer(), "bn");
    ASSERT_TRUE((*dp)->Step(3).ok());
    SolverTrainer& t0 = (*dp)->worker(0).trainer();
    SolverTrainer& t1 = (*dp)->worker(1).trainer();
    EXPECT_EQ(Parameters(t0).size(), Parameters(t1).size());
    EXPECT_EQ(LayerBlobs(t0, "conv"), LayerBlobs(t1, "conv"));
    EXPECT_EQ(LayerBlobs(t0, "ip2"), LayerBlobs(t1, "ip2"));
    const std::vector<float> bn0 = LayerBlobs(t0, "bn"), bn1 = LayerBlobs(t1, "bn");
    ASSERT_FALSE(bn0.empty());
    EXPECT_NE(bn0, before) << "the statistics did not move";
    if (synchronize) {
      EXPECT_EQ(bn0, bn1);
    } else {
      EXPECT_NE(bn0, bn1) << "different shards should give different statistics";
    }
  }
}

TEST(DataParallelTrainerTest, OnlyRankZeroTestsAndSnapshots) {
  Group g = MakeGroup(2);
  SolverConfig solver = Solver("dp_snap", 8, "test_iter: 2\ntest_interval: 100\n");
  ASSERT_EQ(solver.tests.size(), 1u);
  absl::StatusOr<std::unique_ptr<DataParallelTrainer>> dp =
      DataParallelTrainer::Create(solver, CpuOptions(), g.pointers);
  ASSERT_TRUE(dp.ok()) << dp.status();
  ASSERT_TRUE((*dp)->Step(2).ok());
  EXPECT_EQ((*dp)->worker(0).trainer().num_test_nets(), 1);
  EXPECT_EQ((*dp)->worker(1).trainer().num_test_nets(), 0);
  absl::StatusOr<std::vector<NetOutput>> tested = (*dp)->worker(0).trainer().Test();
  ASSERT_TRUE(tested.ok()) << tested.status();
  EXPECT_EQ((*dp)->worker(1).Snapshot(ScratchFile("dp_snap")).status().code(),
            absl::StatusCode::kFailedPrecondition);
  auto paths = (*dp)->worker(0).Snapshot(ScratchFile("dp_snap"));
  ASSERT_TRUE(paths.ok()) << paths.status();
  EXPECT_TRUE(std::filesystem::exists(paths->first));
  EXPECT_TRUE(std::filesystem::exists(paths->second));
}

TEST(DataParallelTrainerTest, AKilledRankEndsTheOthersWithItsError) {
  Group g = MakeGroup(2);
  absl::StatusOr<std::unique_ptr<DataParallelTrainer>> dp =
      DataParallelTrainer::Create(Solver("dp_kill", 8), CpuOptions(), g.pointers);
  ASSERT_TRUE(dp.ok()) << dp.status();
  const int64_t per_step = static_cast<int64_t>((*dp)->worker(0).sync().buckets().buckets.size());
  // Rank 1 dies when it starts the reduction of step 4 (after 3 good steps).
  g.group->KillAfter(1, g.group->completed() + 3 * per_step);
  const auto start = std::chrono::steady_clock::now();
  absl::Status status = (*dp)->Step(10);
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted) << status;
  EXPECT_NE(status.message().find("rank 1"), std::string::npos) << status;
  EXPECT_NE(status.message().find("killed"), std::string::npos) << status;
  // Rank 0 stopped in step 4 at once (the driver aborted the group), not after the timeout.
  EXPECT_EQ((*dp)->worker(0).trainer().iter(), 3) << status;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 50);
  // The group stays failed: a further step fails at once.
  EXPECT_FALSE((*dp)->Step(1).ok());
}

TEST(DataParallelTrainerTest, ASilentlyDeadRankEndsTheOtherAfterTheTimeout) {
  // Workers driven by hand: rank 1 stops after two steps without a word (a hung machine).
  Group g = MakeGroup(2, absl::Milliseconds(500));
  SolverConfig solver = Solver("dp_silent", 8);
  std::vector<std::unique_ptr<DataParallelWorker>> workers(2);
  std::vector<absl::Status> created(2);
  {
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        auto w = DataParallelWorker::Create(solver, CpuOptions(), g.pointers[r]);
        created[r] = w.status();
        if (w.ok()) workers[r] = std::move(*w);
      });
    }
    for (std::thread& t : threads) t.join();
  }
  ASSERT_TRUE(created[0].ok()) << created[0];
  ASSERT_TRUE(created[1].ok()) << created[1];
  absl::Status rank0;
  double seconds_in_failing_step = 0;
  std::thread t0([&] {
    for (int i = 0; i < 10 && rank0.ok(); ++i) {
      const auto start = std::chrono::steady_clock::now();
      rank0 = workers[0]->Step();
      seconds_in_failing_step =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
  });
  std::thread t1([&] {
    for (int i = 0; i < 2; ++i) ASSERT_TRUE(workers[1]->Step().ok());
  });
  t1.join();
  t0.join();
  EXPECT_EQ(rank0.code(), absl::StatusCode::kDeadlineExceeded) << rank0;
  EXPECT_NE(rank0.message().find("rank 1"), std::string::npos) << rank0;
  EXPECT_EQ(workers[0]->trainer().iter(), 2);
  EXPECT_GE(seconds_in_failing_step, 0.45);
  EXPECT_LT(seconds_in_failing_step, 20);
}

TEST(DataParallelTrainerTest, BadSetupsAreStatuses) {
  Group g = MakeGroup(2);
  SolverConfig solver = Solver("dp_bad", 8);
  EXPECT_EQ(DataParallelTrainer::Create(solver, CpuOptions(), {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DataParallelTrainer::Create(solver, CpuOptions(), {g.pointers[1], g.pointers[0]})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DataParallelWorker::Create(solver, CpuOptions(), nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  TrainerOptions bad_shard = CpuOptions();
  bad_shard.data_shard = 2;
  bad_shard.data_shards = 2;
  EXPECT_EQ(SolverTrainer::Create(solver, bad_shard).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A Trainer that cannot be built is an error on every rank, not a hang.
  SolverConfig broken = solver;
  broken.param.set_type("NoSuchSolver");
  Group g2 = MakeGroup(2);
  EXPECT_EQ(DataParallelTrainer::Create(broken, CpuOptions(), g2.pointers).status().code(),
            absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace kiln
