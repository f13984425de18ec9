// The workspace that the CUDA convolution algorithms plan, checked on the host: these sizes are
// arithmetic on the problem (no GPU is touched), and they decide how much device memory a
// compiled plan needs, so CI checks them where the GPU tests cannot run.
// Cases of //tests/kernels:conv_workspace_plan_test.
#include <cstdint>
#include <vector>

#include "dnn/conv_problem.h"
#include "dnn/cuda/conv/conv_fft.h"
#include "dnn/cuda/conv/conv_winograd_passes.h"
#include "dnn/cuda/conv/convolution.h"
#include "dnn/cuda/dnn_handle.h"
#include "dnn/descriptors.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

using dnn::ConvAlgo;
using dnn::ConvDirection;

constexpr int64_t kMiB = int64_t{1} << 20;

// A strict-f32 NCHW r x r convolution with padding `pad`, unit stride.
dnn::ConvProblem Square(int64_t n, int64_t c, int64_t k, int64_t h, int64_t w, int64_t r,
                        int64_t pad) {
  auto conv = dnn::ConvolutionDescriptor::Create(
      {pad, pad}, {1, 1}, {1, 1}, 1, dnn::ConvolutionMode::kCrossCorrelation, dnn::MathMode::kFp32);
  auto filter =
      dnn::FilterDescriptor::Create(DataType::kF32, dnn::TensorFormat::kNCHW, {k, c, r, r});
  auto x =
      dnn::TensorDescriptor::CreatePacked(DataType::kF32, dnn::TensorFormat::kNCHW, {n, c, h, w});
  auto y = dnn::TensorDescriptor::CreatePacked(DataType::kF32, dnn::TensorFormat::kNCHW,
                                               {n, k, h + 2 * pad - r + 1, w + 2 * pad - r + 1});
  EXPECT_TRUE(conv.ok() && filter.ok() && x.ok() && y.ok());
  auto p = dnn::MakeConvProblem(*x, *filter, *conv, *y, "test");
  EXPECT_TRUE(p.ok()) << p.status();
  return *p;
}

// The same with a 3x3 filter and padding 1 (output planes the size of the input's).
dnn::ConvProblem Same3x3(int64_t n, int64_t c, int64_t k, int64_t h, int64_t w) {
  return Square(n, c, k, h, w, 3, 1);
}

// Bytes of F(4x4, 3x3) over `tiles` tiles: transformed input and products (36 points each) plus
// the transformed filter, each rounded up to 256 bytes.
int64_t WinogradBytesOver(const dnn::ConvProblem& p, int64_t tiles) {
  auto align = [](int64_t b) { return (b + 255) / 256 * 256; };
  return align(36 * p.c * tiles * 4) + align(36 * p.k * p.c * 4) + align(36 * p.k * tiles * 4);
}

class ConvWorkspacePlanTest : public ::testing::Test {
 protected:
  // A handle with no stream and no device: enough for workspace queries (132 SMs, an H100).
  dnn::Handle handle_{nullptr, nullptr, 132};

  int64_t WinogradWorkspace(ConvDirection direction, const dnn::ConvProblem& p) {
    auto bytes =
        dnn::GetConvolutionWorkspaceSize(handle_, direction, p, ConvAlgo::kWinogradNonfused);
    EXPECT_TRUE(bytes.ok()) << bytes.status();
    return bytes.ok() ? static_cast<int64_t>(*bytes) : -1;
  }
};

// FCN-8s's conv1_2 at batch 4: 64 -> 64 channels over 698x698 planes. In one pass its
// transformed input and products took 2.2 GB; now bands of tile rows of one image each.
TEST_F(ConvWorkspacePlanTest, LargePlanesRunInBandsOfTileRows) {
  const dnn::ConvProblem p = Same3x3(4, 64, 64, 698, 698);
  const int64_t whole = WinogradBytesOver(p, 4 * 175 * 175);
  ASSERT_GT(whole, 2000 * kMiB);
  for (ConvDirection direction : {ConvDirection::kForward, ConvDirection::kBackwardData}) {
    SCOPED_TRACE(dnn::ConvDirectionName(direction));
    const int64_t bytes = WinogradWorkspace(direction, p);
    const int64_t filter_copy = direction == ConvDirection::kBackwardData ? 64 * 64 * 9 * 4 : 0;
    EXPECT_LE(bytes, 128 * kMiB + WinogradBytesOver(p, 0) + filter_copy + 1024);
    EXPECT_GT(bytes, 64 * kMiB) << "passes this small waste the GPU";
    EXPECT_GT(dnn::WinogradForwardPassesForTesting(direction, p), p.n);
  }
}

// DenseNet-121's first 3x3 layers at batch 64 (128 -> 32 channels, 56x56): 276 MiB in one pass,
// which set the plan's peak; now three passes of whole images, balanced (22, 22 and 20).
TEST_F(ConvWorkspacePlanTest, ManyImagesRunInBalancedPassesOfWholeImages) {
  const dnn::ConvProblem p = Same3x3(64, 128, 32, 56, 56);
  EXPECT_GT(WinogradBytesOver(p, 64 * 14 * 14), 270 * kMiB);
  EXPECT_EQ(dnn::WinogradForwardPassesForTesting(ConvDirection::kForward, p), 3);
  EXPECT_EQ(WinogradWorkspace(ConvDirection::kForward, p), WinogradBytesOver(p, 22 * 14 * 14));
}

// A problem whose transformed data fits in one pass keeps the whole-problem workspace.
TEST_F(ConvWorkspacePlanTest, SmallProblemsTakeOnePass) {
  const dnn::ConvProblem p = Same3x3(2, 8, 12, 9, 11);
  EXPECT_EQ(dnn::WinogradForwardPassesForTesting(ConvDirection::kForward, p), 1);
  EXPECT_EQ(WinogradWorkspace(ConvDirection::kForward, p), WinogradBytesOver(p, 2 * 3 * 3));
  EXPECT_EQ(dnn::WinogradForwardPassesForTesting(ConvDirection::kBackwardFilter, p), 0);
}

// FCN-8s's fc6 at batch 4 (512 -> 4096 channels, 7x7 over 22x22 planes): its filters' spectra
// took 4032 MiB of workspace on the H100, so forward FFT runs it over slices of the output
// channels; a layer with few filters keeps one.
TEST_F(ConvWorkspacePlanTest, FftForwardSlicesTheOutputChannelsOfLargeFilterBanks) {
  EXPECT_GE(dnn::FftForwardSlicesForTesting(Square(4, 512, 4096, 22, 22, 7, 0)), 4);
  EXPECT_EQ(dnn::FftForwardSlicesForTesting(Same3x3(8, 64, 64, 56, 56)), 1);
}

}  // namespace
}  // namespace kiln
