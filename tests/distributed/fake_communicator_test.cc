// FakeCommunicator: the collectives really compute (sums in several dtypes, averages, broadcast,
// barrier), every rank ends with the same bytes, mismatched calls are caught, and injected
// deaths end the other ranks' calls with an error (after the timeout when silent, at once when
// the connection drops or a rank aborts) instead of a hang.
#include "distributed/fake_communicator.h"

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace kiln {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::unique_ptr<Communicator>> Ranks(FakeCommunicatorGroup& group) {
  std::vector<std::unique_ptr<Communicator>> out;
  for (int r = 0; r < group.world_size(); ++r) {
    absl::StatusOr<std::unique_ptr<Communicator>> c = group.TakeRank(r);
    EXPECT_TRUE(c.ok()) << c.status();
    out.push_back(std::move(*c));
  }
  return out;
}

std::shared_ptr<FakeCommunicatorGroup> Group(int n, absl::Duration timeout = absl::Seconds(20)) {
  FakeCommunicatorOptions options;
  options.timeout = timeout;
  absl::StatusOr<std::shared_ptr<FakeCommunicatorGroup>> g =
      FakeCommunicatorGroup::Create(n, options);
  EXPECT_TRUE(g.ok()) << g.status();
  return *g;
}

// Runs fn(rank) on one thread per rank; returns each rank's status.
std::vector<absl::Status> OnRanks(int n, const std::function<absl::Status(int)>& fn) {
  std::vector<absl::Status> out(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back([&, r] { out[r] = fn(r); });
  for (std::thread& t : threads) t.join();
  return out;
}

TEST(FakeCommunicatorTest, AllReduceSumsFloatsAcrossThreeRanks) {
  auto group = Group(3);
  auto comms = Ranks(*group);
  std::vector<std::vector<float>> data(3);
  for (int r = 0; r < 3; ++r) data[r] = {1.0f * r, 10.0f + r, -2.5f * (r + 1), 0.125f};
  auto status = OnRanks(3, [&](int r) {
    return comms[r]->AllReduce(data[r].data(), 4, DataType::kF32, ReduceOp::kSum, nullptr);
  });
  const std::vector<float> expected = {3.0f, 33.0f, -15.0f, 0.375f};
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(status[r].ok()) << status[r];
    EXPECT_EQ(data[r], expected) << "rank " << r;
  }
  EXPECT_EQ(group->completed(), 1);
}

TEST(FakeCommunicatorTest, AverageIntegersHalvesAndBroadcast) {
  auto group = Group(2);
  auto comms = Ranks(*group);
  std::vector<std::vector<float>> avg = {{2.0f, 5.0f}, {4.0f, -1.0f}};
  std::vector<std::vector<int32_t>> ints = {{7, -3, 2147483647}, {5, 3, 1}};
  std::vector<std::vector<uint16_t>> halves = {{FloatToHalf(1.5f)}, {FloatToHalf(2.25f)}};
  std::vector<std::vector<float>> bcast = {{0, 0, 0}, {9, 8, 7}};
  auto status = OnRanks(2, [&](int r) -> absl::Status {
    Communicator& c = *comms[r];
    if (auto s = c.AllReduce(avg[r].data(), 2, DataType::kF32, ReduceOp::kAverage, nullptr);
        !s.ok()) {
      return s;
    }
    if (auto s = c.AllReduce(ints[r].data(), 3, DataType::kI32, ReduceOp::kSum, nullptr); !s.ok()) {
      return s;
    }
    if (auto s = c.AllReduce(halves[r].data(), 1, DataType::kF16, ReduceOp::kSum, nullptr);
        !s.ok()) {
      return s;
    }
    if (auto s = c.Broadcast(bcast[r].data(), 3, DataType::kF32, /*root=*/1, nullptr); !s.ok()) {
      return s;
    }
    if (auto s = c.Barrier(nullptr); !s.ok()) return s;
    return c.Wait(nullptr);
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(status[r].ok()) << status[r];
    EXPECT_EQ(avg[r], (std::vector<float>{3.0f, 2.0f}));
    // Integer sums wrap around as two's complement (as NCCL's do).
    EXPECT_EQ(ints[r], (std::vector<int32_t>{12, 0, static_cast<int32_t>(0x80000000u)}));
    EXPECT_EQ(HalfToFloat(halves[r][0]), 3.75f);
    EXPECT_EQ(bcast[r], (std::vector<float>{9, 8, 7}));
  }
  EXPECT_EQ(group->completed(), 5);
}

TEST(FakeCommunicatorTest, SumIsInRankOrderAndBitIdenticalOnEveryRank) {
  // 1e8 + 1 - 1e8 depends on the order in f32: every rank must get the same bytes anyway.
  auto group = Group(3);
  auto comms = Ranks(*group);
  std::vector<std::vector<float>> data = {{1e8f}, {1.0f}, {-1e8f}};
  auto status = OnRanks(3, [&](int r) {
    return comms[r]->AllReduce(data[r].data(), 1, DataType::kF32, ReduceOp::kSum, nullptr);
  });
  for (int r = 0; r < 3; ++r) ASSERT_TRUE(status[r].ok()) << status[r];
  EXPECT_EQ(data[0][0], (1e8f + 1.0f) + -1e8f);
  EXPECT_EQ(data[1][0], data[0][0]);
  EXPECT_EQ(data[2][0], data[0][0]);
}

TEST(FakeCommunicatorTest, MismatchedCallsFailOnEveryRank) {
  auto group = Group(2);
  auto comms = Ranks(*group);
  std::vector<float> a(4), b(5);
  auto status = OnRanks(2, [&](int r) {
    return r == 0 ? comms[0]->AllReduce(a.data(), 4, DataType::kF32, ReduceOp::kSum, nullptr)
                  : comms[1]->AllReduce(b.data(), 5, DataType::kF32, ReduceOp::kSum, nullptr);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(status[r].code(), absl::StatusCode::kInvalidArgument) << status[r];
    EXPECT_NE(status[r].message().find("of 5 f32"), std::string::npos) << status[r];
    EXPECT_NE(status[r].message().find("of 4 f32"), std::string::npos) << status[r];
  }
  // The group stays failed: later calls return the same error at once.
  EXPECT_EQ(comms[0]->Barrier(nullptr).code(), absl::StatusCode::kInvalidArgument);
}

TEST(FakeCommunicatorTest, SilentDeathEndsPeersWithDeadlineExceededAfterTheTimeout) {
  const absl::Duration timeout = absl::Milliseconds(300);
  auto group = Group(3, timeout);
  auto comms = Ranks(*group);
  group->KillAfter(2, /*collectives=*/2);  // rank 2 completes two collectives, then dies
  std::vector<std::vector<float>> data(3, std::vector<float>(8, 1.0f));
  std::vector<int> completed(3, 0);
  std::vector<double> seconds(3, 0);
  auto status = OnRanks(3, [&](int r) -> absl::Status {
    for (int step = 0; step < 5; ++step) {
      const auto start = Clock::now();
      absl::Status s =
          comms[r]->AllReduce(data[r].data(), 8, DataType::kF32, ReduceOp::kSum, nullptr);
      seconds[r] = std::chrono::duration<double>(Clock::now() - start).count();
      if (!s.ok()) return s;
      ++completed[r];
    }
    return absl::OkStatus();
  });
  EXPECT_EQ(status[2].code(), absl::StatusCode::kAborted) << status[2];
  EXPECT_EQ(completed[2], 2);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(completed[r], 2) << "rank " << r;
    EXPECT_EQ(status[r].code(), absl::StatusCode::kDeadlineExceeded) << status[r];
    EXPECT_NE(status[r].message().find("rank 2"), std::string::npos) << status[r];
    // Within the timeout (plus scheduling slack), not a hang.
    EXPECT_LT(seconds[r], absl::ToDoubleSeconds(timeout) + 5.0);
  }
  // The rank that timed out waited at least the timeout.
  EXPECT_GE(std::max(seconds[0], seconds[1]), absl::ToDoubleSeconds(timeout) * 0.9);
  EXPECT_EQ(group->completed(), 2);
  EXPECT_EQ(data[0][0], 9.0f);  // two completed sums of three ranks: 1 -> 3 -> 9
}

TEST(FakeCommunicatorTest, LostConnectionEndsPeersAtOnce) {
  auto group = Group(2, absl::Seconds(60));
  auto comms = Ranks(*group);
  std::vector<float> x(2, 1.0f);
  const auto start = Clock::now();
  std::thread killer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    group->Kill(1, FakeFault::kConnectionLost);
  });
  absl::Status s = comms[0]->AllReduce(x.data(), 2, DataType::kF32, ReduceOp::kSum, nullptr);
  killer.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("rank 1"), std::string::npos) << s;
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 30.0);
  EXPECT_EQ(comms[1]->Barrier(nullptr).code(), absl::StatusCode::kUnavailable);
}

TEST(FakeCommunicatorTest, AbortFromAnotherThreadWakesAWaitingRank) {
  auto group = Group(2, absl::Seconds(60));
  auto comms = Ranks(*group);
  std::thread watchdog([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    comms[1]->Abort("the driver gave up");
  });
  const auto start = Clock::now();
  absl::Status s = comms[0]->Barrier(nullptr);
  watchdog.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  EXPECT_NE(s.message().find("the driver gave up"), std::string::npos) << s;
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 30.0);
  EXPECT_EQ(comms[0]->Wait(nullptr).code(), absl::StatusCode::kAborted);
}

TEST(FakeCommunicatorTest, BadArgumentsAreStatuses) {
  EXPECT_EQ(FakeCommunicatorGroup::Create(0).status().code(), absl::StatusCode::kInvalidArgument);
  FakeCommunicatorOptions zero;
  zero.timeout = absl::ZeroDuration();
  EXPECT_EQ(FakeCommunicatorGroup::Create(2, zero).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto group = Group(2);
  EXPECT_EQ(group->TakeRank(2).status().code(), absl::StatusCode::kInvalidArgument);
  auto c = group->TakeRank(0);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(group->TakeRank(0).status().code(), absl::StatusCode::kFailedPrecondition);
  Communicator& comm = **c;
  EXPECT_EQ(comm.rank(), 0);
  EXPECT_EQ(comm.world_size(), 2);
  float x = 0;
  int32_t i = 0;
  EXPECT_EQ(comm.AllReduce(&x, -1, DataType::kF32, ReduceOp::kSum, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(comm.AllReduce(nullptr, 3, DataType::kF32, ReduceOp::kSum, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(comm.AllReduce(&i, 1, DataType::kI32, ReduceOp::kAverage, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(comm.Broadcast(&x, 1, DataType::kF32, 2, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  // Bad arguments are refused before they reach the group, which stays healthy.
  EXPECT_TRUE(group->failure().ok());
}

TEST(FakeCommunicatorTest, OneRankNeedsNobody) {
  auto group = Group(1);
  auto comms = Ranks(*group);
  std::vector<float> x = {1.5f, 2.5f};
  ASSERT_TRUE(comms[0]->AllReduce(x.data(), 2, DataType::kF32, ReduceOp::kAverage, nullptr).ok());
  EXPECT_EQ(x, (std::vector<float>{1.5f, 2.5f}));
  EXPECT_TRUE(comms[0]->Barrier(nullptr).ok());
}

}  // namespace
}  // namespace kiln
