// Gradient all-reduces that start during backward (DataParallelOptions::overlap_with_backward),
// on the CPU with FakeCommunicator. Each rank's Trainer gets a DataParallelSync wrapped in an
// observing sync (which notes the plan step the Trainer last reported, and when ReduceGradients
// runs) over a communicator wrapped in a recording one (which notes, for every all-reduce of the
// gradient block, the bucket and that moment). On the host device a step has run when the
// executor reports it, so "issued after step s" means its gradients were written, and a bucket
// reduced too early would leave a rank's own gradient in it: the numbers would not match one rank
// with the doubled batch.
#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "distributed/data_parallel_sync.h"
#include "distributed/fake_communicator.h"
#include "frontends/caffe/training/solver_trainer.h"
#include "gtest/gtest.h"
#include "runtime/device.h"
#include "tests/distributed/small_net.h"

namespace kiln {
namespace {

using testing_dp::CpuOptions;
using testing_dp::Group;
using testing_dp::MakeGroup;
using testing_dp::MaxAbsDifference;
using testing_dp::Parameters;
using testing_dp::Solver;

// What one rank saw, in order.
struct Timeline {
  static constexpr int kNotStarted = -1;
  static constexpr int kAfterBackward = std::numeric_limits<int>::max();
  int now = kNotStarted;                   // the last step reported in this pass, or kAfterBackward
  int last_step = -1;                      // the largest step ever reported
  int64_t reported = 0;                    // OnStepEnqueued calls
  std::map<std::string, int> produced_at;  // from the SolverTrainer's slots
  const char* block = nullptr;
  int64_t block_bytes = 0;
  struct AllReduce {
    int64_t offset = 0;  // in the gradient block
    int64_t count = 0;
    int at = 0;  // `now` when it was issued
  };
  std::vector<AllReduce> all_reduces;
  int64_t waits = 0;               // Communicator::Wait calls
  int64_t all_reduces_waited = 0;  // all_reduces.size() at the last Wait
  absl::Status wait_result;        // what Wait returns instead of the inner one's, when not OK
};

// Forwards to a real communicator, noting the all-reduces of the gradient block.
class RecordingCommunicator : public Communicator {
 public:
  RecordingCommunicator(Communicator* inner, Timeline* timeline)
      : inner_(inner), timeline_(timeline) {}
  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  std::string Describe() const override { return "recording " + inner_->Describe(); }
  absl::Status AllReduce(void* buffer, int64_t count, DataType dtype, ReduceOp op,
                         void* stream) override {
    const char* p = static_cast<const char*>(buffer);
    if (timeline_->block != nullptr && p >= timeline_->block &&
        p < timeline_->block + timeline_->block_bytes) {
      timeline_->all_reduces.push_back({p - timeline_->block, count, timeline_->now});
    }
    return inner_->AllReduce(buffer, count, dtype, op, stream);
  }
  absl::Status Broadcast(void* buffer, int64_t count, DataType dtype, int root,
                         void* stream) override {
    return inner_->Broadcast(buffer, count, dtype, root, stream);
  }
  absl::Status Barrier(void* stream) override { return inner_->Barrier(stream); }
  absl::Status Wait(void* stream) override {
    ++timeline_->waits;
    timeline_->all_reduces_waited = static_cast<int64_t>(timeline_->all_reduces.size());
    if (!timeline_->wait_result.ok()) return timeline_->wait_result;
    return inner_->Wait(stream);
  }
  void Abort(absl::string_view reason) override { inner_->Abort(reason); }
  absl::Duration timeout() const override { return inner_->timeout(); }

 private:
  Communicator* inner_;
  Timeline* timeline_;
};

// Forwards to a DataParallelSync, noting what the Trainer tells it. `force_acts` makes the
// Trainer report steps even when the sync would not start anything during backward.
class ObservingSync : public GradientSync {
 public:
  ObservingSync(Communicator* comm, const DataParallelOptions& options, Timeline* timeline,
                bool force_acts)
      : sync_(comm, options), timeline_(timeline), force_acts_(force_acts) {}
  absl::StatusOr<GradientLayout> PlanGradients(const std::vector<GradientSlot>& slots) override {
    for (const GradientSlot& slot : slots) timeline_->produced_at[slot.node] = slot.produced_at;
    absl::StatusOr<GradientLayout> layout = sync_.PlanGradients(slots);
    if (layout.ok()) timeline_->block_bytes = layout->total_bytes;
    return layout;
  }
  absl::Status BindGradients(Device& device, void* block) override {
    timeline_->block = static_cast<const char*>(block);
    return sync_.BindGradients(device, block);
  }
  absl::Status ShareParameters(Device& device, const std::vector<DeviceSpan>& parameters,
                               const std::vector<DeviceSpan>& statistics) override {
    return sync_.ShareParameters(device, parameters, statistics);
  }
  bool ActsDuringBackward() const override { return force_acts_ || sync_.ActsDuringBackward(); }
  absl::Status OnStepEnqueued(Device& device, int step) override {
    timeline_->now = step;
    timeline_->last_step = std::max(timeline_->last_step, step);
    ++timeline_->reported;
    return sync_.OnStepEnqueued(device, step);
  }
  // A forced observer hears of every step; otherwise of the steps the sync names.
  std::vector<int> ObservedSteps() const override {
    return force_acts_ ? std::vector<int>{} : sync_.ObservedSteps();
  }
  absl::Status ReduceGradients(Device& device) override {
    timeline_->now = Timeline::kAfterBackward;
    absl::Status status = sync_.ReduceGradients(device);
    timeline_->now = Timeline::kNotStarted;
    return status;
  }
  absl::Status ReduceStatistics(Device& device,
                                const std::vector<DeviceSpan>& statistics) override {
    return sync_.ReduceStatistics(device, statistics);
  }
  absl::Status FinishStep(Device& device) override { return sync_.FinishStep(device); }
  int gradient_divisor() const override { return sync_.gradient_divisor(); }
  const DataParallelSync& sync() const { return sync_; }

 private:
  DataParallelSync sync_;
  Timeline* timeline_;
  bool force_acts_;
};

struct Rank {
  Timeline timeline;
  std::unique_ptr<RecordingCommunicator> comm;
  std::unique_ptr<ObservingSync> sync;  // before the SolverTrainer, which uses it until it dies
  std::unique_ptr<SolverTrainer> trainer;
};

// Runs fn(rank) on every rank, one thread each; the first failure aborts the group (so nobody
// waits for a peer that stopped) and is returned.
absl::Status OnEveryRank(Group& g, const std::function<absl::Status(int)>& fn) {
  std::mutex mu;
  absl::Status first;
  std::vector<std::thread> threads;
  for (int r = 0; r < static_cast<int>(g.pointers.size()); ++r) {
    threads.emplace_back([&, r] {
      absl::Status status = fn(r);
      if (status.ok()) return;
      std::lock_guard<std::mutex> lock(mu);
      if (!first.ok()) return;
      first = absl::Status(status.code(), absl::StrCat("rank ", r, ": ", status.message()));
      for (Communicator* c : g.pointers) c->Abort(first.message());
    });
  }
  for (std::thread& t : threads) t.join();
  return first;
}

// Two ranks of `solver`, each a Trainer over an observing sync and a recording communicator,
// trained `steps` steps.
struct TwoRanks {
  Group group = MakeGroup(2);
  std::vector<std::unique_ptr<Rank>> ranks;
};

std::unique_ptr<TwoRanks> TrainTwoRanks(const SolverConfig& solver,
                                        const DataParallelOptions& options, int steps,
                                        bool force_acts = false) {
  auto two = std::make_unique<TwoRanks>();
  for (int r = 0; r < 2; ++r) {
    auto rank = std::make_unique<Rank>();
    rank->comm = std::make_unique<RecordingCommunicator>(two->group.pointers[r], &rank->timeline);
    rank->sync =
        std::make_unique<ObservingSync>(rank->comm.get(), options, &rank->timeline, force_acts);
    two->ranks.push_back(std::move(rank));
  }
  absl::Status created = OnEveryRank(two->group, [&](int r) -> absl::Status {
    TrainerOptions mine = CpuOptions();
    mine.data_shard = r;
    mine.data_shards = 2;
    mine.gradient_sync = two->ranks[r]->sync.get();
    absl::StatusOr<std::unique_ptr<SolverTrainer>> trainer = SolverTrainer::Create(solver, mine);
    if (!trainer.ok()) return trainer.status();
    two->ranks[r]->trainer = std::move(*trainer);
    return absl::OkStatus();
  });
  EXPECT_TRUE(created.ok()) << created;
  if (!created.ok()) return nullptr;
  absl::Status trained = OnEveryRank(two->group, [&](int r) -> absl::Status {
    for (int i = 0; i < steps; ++i) {
      absl::Status status = two->ranks[r]->trainer->Step();
      if (!status.ok()) return status;
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(trained.ok()) << trained;
  if (!trained.ok()) return nullptr;
  return two;
}

// One rank of batch `batch` trained `steps` steps: the parameters two ranks must reach.
std::vector<float> TrainOneRank(const SolverConfig& solver, int steps) {
  absl::StatusOr<std::unique_ptr<SolverTrainer>> single =
      SolverTrainer::Create(solver, CpuOptions());
  EXPECT_TRUE(single.ok()) << single.status();
  if (!single.ok()) return {};
  for (int i = 0; i < steps; ++i) EXPECT_TRUE((*single)->Step().ok());
  return Parameters(**single);
}

DataParallelOptions SmallBuckets(bool overlap) {
  DataParallelOptions options;
  options.buckets.bucket_bytes = 512;
  options.buckets.first_bucket_bytes = 256;
  options.overlap_with_backward = overlap;
  return options;
}

// Per bucket of `sync`: the latest step the Trainer said writes one of its gradients.
std::vector<int> LastWriteOfEachBucket(const DataParallelSync& sync, const Timeline& timeline) {
  std::vector<int> out;
  for (const GradientBucket& bucket : sync.buckets().buckets) {
    int last = -1;
    for (int i = bucket.first; i <= bucket.last; ++i) {
      last = std::max(last, timeline.produced_at.at(sync.production_order()[i].name));
    }
    out.push_back(last);
  }
  return out;
}

// The bucket whose range starts at `offset`, or -1.
int BucketAt(const DataParallelSync& sync, int64_t offset) {
  const std::vector<GradientBucket>& buckets = sync.buckets().buckets;
  for (size_t b = 0; b < buckets.size(); ++b) {
    if (buckets[b].offset == offset) return static_cast<int>(b);
  }
  return -1;
}

constexpr int kSteps = 4;

TEST(GradientOverlapTest, BucketsStartDuringBackwardRightAfterTheirLastGradient) {
  const std::vector<float> expected = TrainOneRank(Solver("ov_on_single", 16), kSteps);
  std::unique_ptr<TwoRanks> two =
      TrainTwoRanks(Solver("ov_on", 8), SmallBuckets(/*overlap=*/true), kSteps);
  ASSERT_NE(two, nullptr);
  // The numbers: both ranks equal, and equal to one rank with the doubled batch.
  const std::vector<float> rank0 = Parameters(*two->ranks[0]->trainer);
  EXPECT_EQ(rank0, Parameters(*two->ranks[1]->trainer));
  EXPECT_LE(MaxAbsDifference(rank0, expected), 1e-5);

  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE(absl::StrCat("rank ", r));
    const Timeline& t = two->ranks[r]->timeline;
    const DataParallelSync& sync = two->ranks[r]->sync->sync();
    const std::string plan = sync.buckets().ToString(sync.production_order());
    const int buckets = static_cast<int>(sync.buckets().buckets.size());
    ASSERT_GE(buckets, 4) << plan;
    // The Trainer reports only the steps the sync names (the plan may run the stretches between
    // them from CUDA graphs): the distinct steps after which a bucket starts.
    const std::vector<int> stops = sync.ObservedSteps();
    ASSERT_GE(stops.size(), 2u) << plan;
    EXPECT_EQ(t.reported, kSteps * static_cast<int64_t>(stops.size()));
    EXPECT_EQ(t.last_step, stops.back());
    const std::vector<int> last_write = LastWriteOfEachBucket(sync, t);
    for (int b = 0; b < buckets; ++b) {
      ASSERT_GE(last_write[b], 0) << "bucket " << b << " has a gradient no step writes\n" << plan;
    }
    ASSERT_EQ(static_cast<int>(t.all_reduces.size()), kSteps * buckets) << plan;
    for (int step = 0; step < kSteps; ++step) {
      for (int b = 0; b < buckets; ++b) {
        SCOPED_TRACE(absl::StrCat("step ", step, ", bucket ", b));
        const Timeline::AllReduce& call = t.all_reduces[step * buckets + b];
        // In bucket order, whole buckets.
        EXPECT_EQ(BucketAt(sync, call.offset), b) << plan;
        EXPECT_EQ(call.count, sync.buckets().buckets[b].elements);
        // Issued during backward, right after the step that writes the bucket's last gradient
        // (never before it: its gradients are all written).
        EXPECT_NE(call.at, Timeline::kAfterBackward);
        EXPECT_EQ(call.at, last_write[b]) << plan;
      }
      // The first bucket went out while later backward steps were still to be enqueued.
      EXPECT_LT(t.all_reduces[step * buckets].at, stops.back());
    }
    EXPECT_EQ(sync.reductions(), kSteps * static_cast<int64_t>(buckets));
    EXPECT_EQ(sync.reductions_during_backward(), sync.reductions());
    EXPECT_EQ(sync.bucket_start_steps(), last_write);
    std::vector<int> distinct = last_write;
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    EXPECT_EQ(stops, distinct);
  }
}

TEST(GradientOverlapTest, OverlapOffGivesTheSameNumbersWithEveryBucketAfterBackward) {
  std::unique_ptr<TwoRanks> on = TrainTwoRanks(Solver("ov_cmp_on", 8), SmallBuckets(true), kSteps);
  std::unique_ptr<TwoRanks> off =
      TrainTwoRanks(Solver("ov_cmp_off", 8), SmallBuckets(false), kSteps);
  ASSERT_NE(on, nullptr);
  ASSERT_NE(off, nullptr);
  // The same sums in the same order: the same bits.
  const std::vector<float> with_overlap = Parameters(*on->ranks[0]->trainer);
  EXPECT_EQ(Parameters(*off->ranks[0]->trainer), with_overlap);
  EXPECT_EQ(Parameters(*off->ranks[1]->trainer), with_overlap);
  EXPECT_LE(MaxAbsDifference(with_overlap, TrainOneRank(Solver("ov_cmp_single", 16), kSteps)),
            1e-5);
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE(absl::StrCat("rank ", r));
    const Timeline& t = off->ranks[r]->timeline;
    const DataParallelSync& sync = off->ranks[r]->sync->sync();
    const int buckets = static_cast<int>(sync.buckets().buckets.size());
    EXPECT_FALSE(sync.ActsDuringBackward());
    EXPECT_EQ(t.reported, 0) << "the SolverTrainer reported steps to a sync that does not act";
    ASSERT_EQ(static_cast<int>(t.all_reduces.size()), kSteps * buckets);
    for (size_t i = 0; i < t.all_reduces.size(); ++i) {
      EXPECT_EQ(t.all_reduces[i].at, Timeline::kAfterBackward) << "all-reduce " << i;
      EXPECT_EQ(BucketAt(sync, t.all_reduces[i].offset), static_cast<int>(i) % buckets);
    }
    EXPECT_EQ(sync.reductions_during_backward(), 0);
    EXPECT_EQ(sync.bucket_start_steps(), std::vector<int>(buckets, -1));
  }
}

TEST(GradientOverlapTest, WithIterSizeTheBucketsWaitForTheAccumulatedGradients) {
  // iter_size 2: the update reads accumulators, complete only after the last pass, so no bucket
  // may start during backward (overlap is off by itself), and two ranks of batch 4 still match
  // one rank of batch 8, both with iter_size 2 (16 images a step), with clipping active. Forcing
  // the Trainer to report steps shows it does so for the last pass only.
  const std::string extra = "iter_size: 2\nclip_gradients: 0.05\n";
  const std::vector<float> expected = TrainOneRank(Solver("ov_iter_single", 8, extra), kSteps);
  for (bool force : {false, true}) {
    SCOPED_TRACE(force ? "steps reported" : "plain");
    std::unique_ptr<TwoRanks> two = TrainTwoRanks(Solver(force ? "ov_iter_f" : "ov_iter", 4, extra),
                                                  SmallBuckets(true), kSteps, force);
    ASSERT_NE(two, nullptr);
    const std::vector<float> rank0 = Parameters(*two->ranks[0]->trainer);
    EXPECT_EQ(rank0, Parameters(*two->ranks[1]->trainer));
    EXPECT_LE(MaxAbsDifference(rank0, expected), 1e-5);
    const Timeline& t = two->ranks[0]->timeline;
    const DataParallelSync& sync = two->ranks[0]->sync->sync();
    const int buckets = static_cast<int>(sync.buckets().buckets.size());
    EXPECT_GE(buckets, 4);
    EXPECT_FALSE(sync.ActsDuringBackward());
    for (const auto& [node, step] : t.produced_at) EXPECT_EQ(step, -1) << node;
    ASSERT_EQ(static_cast<int>(t.all_reduces.size()), kSteps * buckets);
    for (const Timeline::AllReduce& call : t.all_reduces) {
      EXPECT_EQ(call.at, Timeline::kAfterBackward);
    }
    EXPECT_EQ(sync.reductions_during_backward(), 0);
    if (force) {
      ASSERT_GT(t.last_step, 0);
      EXPECT_EQ(t.reported, kSteps * static_cast<int64_t>(t.last_step + 1));
    } else {
      EXPECT_EQ(t.reported, 0);
    }
  }
}

// The sync alone, one rank, on the host device: buckets start in order once the step writing
// their last gradient is reported; one holding a gradient no step writes (sorted last) waits for
// ReduceGradients; a new pass starts from the first bucket again.
TEST(GradientOverlapTest, TheSyncStartsBucketsInOrderAsTheirStepsAreReported) {
  Group g = MakeGroup(1);
  Timeline t;
  RecordingCommunicator comm(g.pointers[0], &t);
  DataParallelOptions options;
  options.buckets.bucket_bytes = 256;  // one 64-float gradient per bucket
  options.buckets.first_bucket_bytes = 256;
  DataParallelSync sync(&comm, options);
  // Parameters in layer order; backward writes them in reverse, one never.
  std::vector<GradientSlot> slots = {{"w0", 64, 9}, {"w1", 64, -1}, {"w2", 64, 6}, {"w3", 64, 3}};
  absl::StatusOr<GradientLayout> layout = sync.PlanGradients(slots);
  ASSERT_TRUE(layout.ok()) << layout.status();
  ASSERT_EQ(sync.buckets().buckets.size(), 4u);
  std::vector<std::string> order;
  for (const GradientInfo& info : sync.production_order()) order.push_back(info.name);
  EXPECT_EQ(order, (std::vector<std::string>{"w3", "w2", "w0", "w1"}));
  EXPECT_EQ(sync.bucket_start_steps(), (std::vector<int>{3, 6, 9, -1}));
  EXPECT_TRUE(sync.ActsDuringBackward());
  std::unique_ptr<Device> host = CreateHostDevice();
  std::vector<float> block(layout->total_bytes / sizeof(float), 1.0f);
  t.block = reinterpret_cast<const char*>(block.data());
  t.block_bytes = layout->total_bytes;
  ASSERT_TRUE(sync.BindGradients(*host, block.data()).ok());
  for (int pass = 0; pass < 2; ++pass) {
    SCOPED_TRACE(absl::StrCat("pass ", pass));
    t.all_reduces.clear();
    std::vector<int64_t> started_after;  // all-reduces issued once step s is reported
    for (int step = 0; step <= 10; ++step) {
      t.now = step;
      ASSERT_TRUE(sync.OnStepEnqueued(*host, step).ok());
      started_after.push_back(static_cast<int64_t>(t.all_reduces.size()));
    }
    EXPECT_EQ(started_after, (std::vector<int64_t>{0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3}));
    t.now = Timeline::kAfterBackward;
    ASSERT_TRUE(sync.ReduceGradients(*host).ok());
    ASSERT_EQ(t.all_reduces.size(), 4u);
    const std::vector<int> issued_at = {3, 6, 9, Timeline::kAfterBackward};
    for (int b = 0; b < 4; ++b) {
      EXPECT_EQ(t.all_reduces[b].offset, sync.buckets().buckets[b].offset);
      EXPECT_EQ(t.all_reduces[b].at, issued_at[b]) << "bucket " << b;
    }
  }
  EXPECT_EQ(sync.reductions(), 8);
  EXPECT_EQ(sync.reductions_during_backward(), 6);
}

// The host waits for a step's collectives once, in FinishStep, not in ReduceGradients (so the
// update is enqueued while the last buckets run); a second FinishStep, or one with nothing
// enqueued since, does not wait again.
TEST(GradientOverlapTest, TheSyncWaitsOnceAStepInFinishStep) {
  Group g = MakeGroup(1);
  Timeline t;
  RecordingCommunicator comm(g.pointers[0], &t);
  DataParallelOptions options = SmallBuckets(/*overlap=*/true);
  options.sync_batch_norm_statistics = true;
  DataParallelSync sync(&comm, options);
  std::vector<GradientSlot> slots = {{"w0", 64, 5}, {"w1", 64, 2}};
  absl::StatusOr<GradientLayout> layout = sync.PlanGradients(slots);
  ASSERT_TRUE(layout.ok()) << layout.status();
  std::unique_ptr<Device> host = CreateHostDevice();
  std::vector<float> block(layout->total_bytes / sizeof(float), 1.0f);
  t.block = reinterpret_cast<const char*>(block.data());
  t.block_bytes = layout->total_bytes;
  ASSERT_TRUE(sync.BindGradients(*host, block.data()).ok());
  EXPECT_TRUE(sync.FinishStep(*host).ok());
  EXPECT_EQ(t.waits, 0) << "nothing was enqueued yet";
  std::vector<float> statistics(3, 2.0f);
  for (int step = 1; step <= 2; ++step) {
    SCOPED_TRACE(absl::StrCat("step ", step));
    for (int s = 0; s <= 6; ++s) ASSERT_TRUE(sync.OnStepEnqueued(*host, s).ok());
    ASSERT_TRUE(sync.ReduceStatistics(*host, {{statistics.data(), 3}}).ok());
    ASSERT_TRUE(sync.ReduceGradients(*host).ok());
    EXPECT_EQ(t.waits, step - 1) << "ReduceStatistics or ReduceGradients waited";
    ASSERT_TRUE(sync.FinishStep(*host).ok());
    EXPECT_EQ(t.waits, step);
    EXPECT_EQ(t.all_reduces_waited, static_cast<int64_t>(t.all_reduces.size()));
    ASSERT_TRUE(sync.FinishStep(*host).ok());
    EXPECT_EQ(t.waits, step) << "a second FinishStep waited again";
  }
  EXPECT_EQ(sync.reductions(), 2 * static_cast<int64_t>(sync.buckets().buckets.size()));
}

// Through the Trainer: every step waits once, after its last all-reduce; a failed wait (a dead
// peer seen by the communicator's timeout) is that step's error.
TEST(GradientOverlapTest, EveryStepWaitsForItsCollectivesAndAFailedWaitFailsTheStep) {
  const int steps = 3;
  std::unique_ptr<TwoRanks> two = TrainTwoRanks(Solver("ov_wait", 8), SmallBuckets(true), steps);
  ASSERT_NE(two, nullptr);
  for (int r = 0; r < 2; ++r) {
    const Timeline& t = two->ranks[r]->timeline;
    EXPECT_EQ(t.waits, steps + 1) << "rank " << r << ": the start's broadcast, then each step";
    EXPECT_EQ(t.all_reduces_waited, static_cast<int64_t>(t.all_reduces.size())) << "rank " << r;
  }
  for (int r = 0; r < 2; ++r) {
    two->ranks[r]->timeline.wait_result = absl::DeadlineExceededError("peer gone (injected)");
  }
  absl::Status failed =
      OnEveryRank(two->group, [&](int r) { return two->ranks[r]->trainer->Step(); });
  EXPECT_EQ(failed.code(), absl::StatusCode::kDeadlineExceeded) << failed;
  EXPECT_NE(failed.message().find("peer gone (injected)"), std::string::npos) << failed;
}

}  // namespace
}  // namespace kiln
