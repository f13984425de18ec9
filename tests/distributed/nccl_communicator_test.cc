// NcclCommunicator. On the CPU: bad arguments are refused before NCCL or CUDA is touched. On
// GPUs (tag "gpu", skipped without a device): one rank reduces, broadcasts and waits on a real
// stream; with two devices, two ranks (threads) sum each other's buffers, and a rank that stops
// calling makes the other's Wait end in DeadlineExceeded within the timeout instead of hanging.
#include "distributed/nccl_communicator.h"

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/device.h"

namespace kiln {
namespace {

TEST(NcclCommunicatorTest, BadArgumentsAreInvalidArgumentWithoutAGpu) {
  if (!NcclAvailable()) {
    EXPECT_EQ(NewNcclUniqueId().status().code(), absl::StatusCode::kUnimplemented);
    GTEST_SKIP() << "this build has no NCCL";
  }
  const std::string id(kNcclUniqueIdBytes, '\0');
  NcclOptions options;
  EXPECT_EQ(CreateNcclCommunicator(id, 2, 2, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateNcclCommunicator(id, -1, 2, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateNcclCommunicator(id, 0, 0, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::Status short_id = CreateNcclCommunicator("short", 0, 1, options).status();
  EXPECT_EQ(short_id.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(short_id.message().find("5 bytes, not 128"), std::string::npos) << short_id;
  options.timeout = absl::ZeroDuration();
  EXPECT_EQ(CreateNcclCommunicator(id, 0, 1, options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Device buffer helpers over Kiln's CUDA device.
std::vector<float> Read(Device& d, void* p, int n) {
  std::vector<float> out(n);
  EXPECT_TRUE(d.CopyToHost(out.data(), p, n * sizeof(float)).ok());
  return out;
}

TEST(NcclCommunicatorGpuTest, OneRankReducesBroadcastsAndWaits) {
  if (!NcclAvailable()) GTEST_SKIP() << "this build has no NCCL";
  if (!ProbeCuda().usable) GTEST_SKIP() << "no usable CUDA device";
  absl::StatusOr<std::unique_ptr<Device>> device = CreateCudaDevice(0);
  ASSERT_TRUE(device.ok()) << device.status();
  Device& d = **device;
  absl::StatusOr<std::string> id = NewNcclUniqueId();
  ASSERT_TRUE(id.ok()) << id.status();
  NcclOptions options;
  options.timeout = absl::Seconds(60);
  absl::StatusOr<std::unique_ptr<Communicator>> comm = CreateNcclCommunicator(*id, 0, 1, options);
  ASSERT_TRUE(comm.ok()) << comm.status();
  const std::vector<float> values = {1.5f, -2.0f, 3.25f};
  void* buffer = *d.Allocate(values.size() * sizeof(float));
  ASSERT_TRUE(d.CopyToDevice(buffer, values.data(), values.size() * sizeof(float)).ok());
  ASSERT_TRUE((*comm)->AllReduce(buffer, 3, DataType::kF32, ReduceOp::kSum, d.stream()).ok());
  ASSERT_TRUE((*comm)->Broadcast(buffer, 3, DataType::kF32, 0, d.stream()).ok());
  ASSERT_TRUE((*comm)->Wait(d.stream()).ok());
  ASSERT_TRUE((*comm)->Barrier(d.stream()).ok());
  EXPECT_EQ(Read(d, buffer, 3), values);  // one rank: the sum is itself
  EXPECT_NE((*comm)->Describe().find("nccl"), std::string::npos);
  d.Free(buffer);
}

TEST(NcclCommunicatorGpuTest, TwoRanksSumAndADeadPeerTimesOut) {
  if (!NcclAvailable()) GTEST_SKIP() << "this build has no NCCL";
  const CudaProbe probe = ProbeCuda();
  if (!probe.usable || probe.devices.size() < 2) GTEST_SKIP() << "needs two CUDA devices";
  absl::StatusOr<std::string> id = NewNcclUniqueId();
  ASSERT_TRUE(id.ok()) << id.status();
  std::vector<absl::Status> sums(2), dead(2);
  std::vector<std::vector<float>> out(2);
  std::vector<double> waited(2, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      absl::StatusOr<std::unique_ptr<Device>> device = CreateCudaDevice(r);
      if (!device.ok()) {
        sums[r] = device.status();
        return;
      }
      Device& d = **device;
      NcclOptions options;
      options.cuda_device = r;
      options.timeout = absl::Seconds(3);
      absl::StatusOr<std::unique_ptr<Communicator>> comm =
          CreateNcclCommunicator(*id, r, 2, options);
      if (!comm.ok()) {
        sums[r] = comm.status();
        return;
      }
      const std::vector<float> values = {1.0f + r, 10.0f * (r + 1)};
      void* buffer = *d.Allocate(2 * sizeof(float));
      (void)d.CopyToDevice(buffer, values.data(), 2 * sizeof(float));
      sums[r] = (*comm)->AllReduce(buffer, 2, DataType::kF32, ReduceOp::kSum, d.stream());
      if (sums[r].ok()) sums[r] = (*comm)->Wait(d.stream());
      out[r] = Read(d, buffer, 2);
      // Rank 1 now "dies": it never joins the next all-reduce.
      if (r == 0) {
        const auto start = std::chrono::steady_clock::now();
        dead[0] = (*comm)->AllReduce(buffer, 2, DataType::kF32, ReduceOp::kSum, d.stream());
        if (dead[0].ok()) dead[0] = (*comm)->Wait(d.stream());
        waited[0] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      }
      d.Free(buffer);
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(sums[r].ok()) << "rank " << r << ": " << sums[r];
    EXPECT_EQ(out[r], (std::vector<float>{3.0f, 30.0f}));
  }
  EXPECT_EQ(dead[0].code(), absl::StatusCode::kDeadlineExceeded) << dead[0];
  EXPECT_LT(waited[0], 30.0);
}

}  // namespace
}  // namespace kiln
