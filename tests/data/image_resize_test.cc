// Bilinear resize against values worked out by hand from OpenCV's INTER_LINEAR geometry:
// output pixel d samples source position s = (d + 0.5) * in / out - 0.5, clamped to
// [0, in - 1], blending its two neighbours by the fraction of s; results round halves up.
#include "data/image_resize.h"

#include <vector>

#include "gtest/gtest.h"

namespace kiln {
namespace {

Image Gray(int h, int w, std::vector<uint8_t> pixels) { return Image{h, w, 1, std::move(pixels)}; }

std::vector<uint8_t> Resized(const Image& image, int h, int w) {
  auto out = ResizeBilinear(image, h, w);
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return {};
  EXPECT_EQ(out->height, h);
  EXPECT_EQ(out->width, w);
  EXPECT_EQ(out->channels, image.channels);
  return out->pixels;
}

TEST(ImageResizeTest, TwoByTwoToThreeByThree) {
  // in/out = 2/3. d = 0: s = 0.5 * 2/3 - 0.5 = -1/6 -> clamped to 0.
  //               d = 1: s = 1.5 * 2/3 - 0.5 = 0.5  -> halfway between 0 and 1.
  //               d = 2: s = 2.5 * 2/3 - 0.5 = 7/6  -> clamped to 1.
  // So each axis gives [a, (a+b)/2, b]. With rows [0 100] and [200 255]:
  //   row 0: 0, 50, 100
  //   row 1: (0+200)/2 = 100, (0+100+200+255)/4 = 138.75 -> 139, (100+255)/2 = 177.5 -> 178
  //   row 2: 200, (200+255)/2 = 227.5 -> 228, 255
  EXPECT_EQ(Resized(Gray(2, 2, {0, 100, 200, 255}), 3, 3),
            (std::vector<uint8_t>{0, 50, 100, 100, 139, 178, 200, 228, 255}));
}

TEST(ImageResizeTest, FourByFourToTwoByTwoAveragesEachBlock) {
  // in/out = 2: s = (d + 0.5) * 2 - 0.5 = 2d + 0.5, halfway between pixels 2d and 2d+1 on both
  // axes, so each output is the mean of a 2x2 block (no clamping happens).
  //   block (0,0): 0, 10, 40, 50      -> 25
  //   block (0,1): 20, 30, 60, 70     -> 45
  //   block (1,0): 80, 90, 120, 130   -> 105
  //   block (1,1): 100, 110, 140, 151 -> 125.25 -> 125
  const Image in = Gray(4, 4,
                        {0, 10, 20, 30,     //
                         40, 50, 60, 70,    //
                         80, 90, 100, 110,  //
                         120, 130, 140, 151});
  EXPECT_EQ(Resized(in, 2, 2), (std::vector<uint8_t>{25, 45, 105, 125}));
}

TEST(ImageResizeTest, UpscaleByTwoUsesQuarterWeights) {
  // in/out = 1/2: s = (d + 0.5) / 2 - 0.5 = -0.25 (clamped to 0), 0.25, 0.75, 1.25 (clamped
  // to 1). With [0 100]: 0, 25, 75, 100.
  EXPECT_EQ(Resized(Gray(1, 2, {0, 100}), 1, 4), (std::vector<uint8_t>{0, 25, 75, 100}));
}

TEST(ImageResizeTest, DownscaleDoesNotAntialias) {
  // in/out = 3/2: s = (d + 0.5) * 1.5 - 0.5 = 0.25, 1.75. With [0 100 200]:
  // 0.75*0 + 0.25*100 = 25 and 0.25*100 + 0.75*200 = 175. An averaging (area) resize would
  // give 33 and 167.
  EXPECT_EQ(Resized(Gray(1, 3, {0, 100, 200}), 1, 2), (std::vector<uint8_t>{25, 175}));
  // 5 -> 2: s = 0.75, 3.25. Pixel 2 (value 255) is never sampled.
  EXPECT_EQ(Resized(Gray(1, 5, {0, 40, 255, 80, 120}), 1, 2), (std::vector<uint8_t>{30, 90}));
}

TEST(ImageResizeTest, ChannelsAreResizedIndependently) {
  // Two BGR pixels in a row, upscaled to 4 like UpscaleByTwoUsesQuarterWeights per channel.
  const Image in{1, 2, 3, {0, 100, 200, 100, 0, 40}};
  EXPECT_EQ(Resized(in, 1, 4), (std::vector<uint8_t>{0, 100, 200,  //
                                                     25, 75, 160,  //
                                                     75, 25, 80,   //
                                                     100, 0, 40}));
}

TEST(ImageResizeTest, SameSizeIsTheIdentityAndBadSizesAreErrors) {
  const Image in = Gray(2, 3, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(Resized(in, 2, 3), in.pixels);
  EXPECT_EQ(ResizeBilinear(in, 0, 3).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ResizeBilinear(in, 2, -1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ResizeBilinear(Image{}, 2, 2).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(ResizeBilinear(in, 100000, 100000).ok());  // over kMaxImageBytes
}

}  // namespace
}  // namespace kiln
