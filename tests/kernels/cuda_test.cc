// CUDA: device detection and every CUDA kernel against the reference backend. Tagged `gpu`;
// skips cleanly where no CUDA device is usable (CI), and must pass on the GPU machine. The cases
// are the op families' (tests/ops/<family>/<family>_cuda_test.cc, linked into this binary).
#include <cstdio>
#include <string>

#include "gtest/gtest.h"
#include "runtime/device.h"
#include "tests/util/kernel_cases.h"
#include "tests/util/op_test_util.h"

namespace kiln {
namespace {

using testing::CudaVsReferenceTest;
using testing::KernelCase;

TEST(CudaDeviceTest, DetectionReportsDevicesOrAReason) {
  const CudaProbe probe = ProbeCuda();
  std::printf("CUDA runtime %d, driver %d, usable: %s %s\n", probe.runtime_version,
              probe.driver_version, probe.usable ? "yes" : "no", probe.reason.c_str());
  if (!probe.usable) {
    EXPECT_FALSE(probe.reason.empty());
    EXPECT_EQ(CreateCudaDevice(0).status().code(), absl::StatusCode::kUnavailable);
    GTEST_SKIP() << "no usable CUDA device: " << probe.reason;
  }
  ASSERT_FALSE(probe.devices.empty());
  for (const auto& d : probe.devices) {
    std::printf("device %d: %s sm_%d%d %d SMs %.1f GiB\n", d.ordinal, d.name.c_str(), d.major,
                d.minor, d.multiprocessors, d.total_memory / 1073741824.0);
  }
  auto device = CreateCudaDevice(0);
  ASSERT_TRUE(device.ok()) << device.status();
  // A round trip through device memory.
  auto buffer = (*device)->Allocate(1024);
  ASSERT_TRUE(buffer.ok());
  std::vector<uint8_t> in(1024), out(1024, 0);
  for (int i = 0; i < 1024; ++i) in[i] = static_cast<uint8_t>(i * 7);
  ASSERT_TRUE((*device)->CopyToDevice(*buffer, in.data(), 1024).ok());
  ASSERT_TRUE((*device)->CopyToHost(out.data(), *buffer, 1024).ok());
  EXPECT_EQ(in, out);
  (*device)->Free(*buffer);
  EXPECT_EQ(CreateCudaDevice(99).status().code(), absl::StatusCode::kInvalidArgument);
  // Asking for more memory than exists is ResourceExhausted, not a crash.
  EXPECT_EQ((*device)->Allocate(size_t{1} << 50).status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST_P(CudaVsReferenceTest, Agrees) {
  if (!ProbeCuda().usable) GTEST_SKIP() << "no usable CUDA device";
  const KernelCase& c = GetParam();
  std::string kernel;
  auto ratio = testing::CompareWithReference(c.op, c.inputs, c.attrs, BackendChoice::kCuda, 300,
                                             1e-4, 1e-4, &kernel);
  ASSERT_TRUE(ratio.ok()) << ratio.status();
  EXPECT_EQ(kernel, c.expected_kernel);
  EXPECT_GE(*ratio, 0) << "element count differs";
  EXPECT_LE(*ratio, 1.0) << "worst error / tolerance";
}

}  // namespace
}  // namespace kiln
