// The JPEG/PNG decoder: round trips, OpenCV's color conversions, and errors that name the file
// for corrupt, truncated and unsupported input.
#include "data/image_decoder.h"

#include <zlib.h>

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/util/scratch_file.h"
#include "tests/util/image_files.h"

namespace kiln {
namespace {

// --- A PNG written byte by byte (zlib for the data and the CRCs), independent of libpng's
// encoder, so that a channel-order mistake shared by our encoder and decoder cannot hide.

void PutU32(std::string& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>(v >> shift));
}

void PutChunk(std::string& out, const std::string& type, const std::string& data) {
  PutU32(out, static_cast<uint32_t>(data.size()));
  const std::string body = type + data;
  out += body;
  PutU32(out,
         static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(body.data()), body.size())));
}

// An 8-bit RGB PNG (color type 2) of `rgb` rows, filter byte 0 on each row.
std::string HandMadeRgbPng(uint32_t width, uint32_t height, const std::string& rgb,
                           bool with_data = true) {
  std::string png("\x89PNG\r\n\x1a\n", 8);
  std::string ihdr;
  PutU32(ihdr, width);
  PutU32(ihdr, height);
  ihdr += std::string("\x08\x02\x00\x00\x00", 5);  // depth 8, RGB, deflate, filter 0, no interlace
  PutChunk(png, "IHDR", ihdr);
  if (with_data) {
    std::string raw;
    // Filter byte 0, then the row (no pixel bytes at all when `rgb` is empty: a header test).
    for (uint32_t y = 0; y < height; ++y) {
      raw += '\0';
      if (!rgb.empty()) raw += rgb.substr(y * width * 3, width * 3);
    }
    uLongf size = compressBound(raw.size());
    std::string deflated(size, '\0');
    compress(reinterpret_cast<Bytef*>(&deflated[0]), &size,
             reinterpret_cast<const Bytef*>(raw.data()), raw.size());
    deflated.resize(size);
    PutChunk(png, "IDAT", deflated);
  }
  PutChunk(png, "IEND", "");
  return png;
}

TEST(ImageDecoderTest, HandMadePngComesOutInBgrOrder) {
  // One row: a red pixel, then a blue one (RGB in the file).
  const std::string png = HandMadeRgbPng(2, 1, std::string("\xff\x00\x00\x00\x00\xff", 6));
  auto image = DecodeImage(png, ColorMode::kColor, "hand.png");
  ASSERT_TRUE(image.ok()) << image.status();
  EXPECT_EQ(image->height, 1);
  EXPECT_EQ(image->width, 2);
  EXPECT_EQ(image->channels, 3);
  EXPECT_EQ(image->pixels, (std::vector<uint8_t>{0, 0, 255, 255, 0, 0}));
  // Gray: BT.601 luma of red (0.299 * 255 = 76.2) and blue (0.114 * 255 = 29.1).
  auto gray = DecodeImage(png, ColorMode::kGray, "hand.png");
  ASSERT_TRUE(gray.ok()) << gray.status();
  EXPECT_EQ(gray->channels, 1);
  EXPECT_EQ(gray->pixels, (std::vector<uint8_t>{76, 29}));
}

TEST(ImageDecoderTest, GrayFromBgrRoundsTheBt601Weights) {
  EXPECT_EQ(GrayFromBgr(0, 0, 0), 0);
  EXPECT_EQ(GrayFromBgr(255, 255, 255), 255);
  EXPECT_EQ(GrayFromBgr(0, 255, 0), 150);  // 0.587 * 255 = 149.7
  EXPECT_EQ(GrayFromBgr(10, 20, 30), 22);  // 0.114*10 + 0.587*20 + 0.299*30 = 22.0
}

TEST(ImageDecoderTest, PngRoundTripIsExactInEveryMode) {
  const Image color = SmoothImage(7, 5, 3, 1);
  const std::string png = EncodePng(color);
  for (ColorMode mode : {ColorMode::kColor, ColorMode::kNative}) {
    auto decoded = DecodePng(png, mode, "color.png");
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(decoded->pixels, color.pixels);
    EXPECT_EQ(decoded->channels, 3);
  }
  auto as_gray = DecodeImage(png, ColorMode::kGray, "color.png");
  ASSERT_TRUE(as_gray.ok()) << as_gray.status();
  ASSERT_EQ(as_gray->channels, 1);
  for (int i = 0; i < 35; ++i) {
    const uint8_t* p = &color.pixels[3 * i];
    ASSERT_EQ(as_gray->pixels[i], GrayFromBgr(p[0], p[1], p[2])) << i;
  }

  const Image gray = SmoothImage(4, 6, 1, 2);
  const std::string gray_png = EncodePng(gray);
  auto native = DecodeImage(gray_png, ColorMode::kNative, "gray.png");
  ASSERT_TRUE(native.ok());
  EXPECT_EQ(native->channels, 1);
  EXPECT_EQ(native->pixels, gray.pixels);
  auto replicated = DecodeImage(gray_png, ColorMode::kColor, "gray.png");
  ASSERT_TRUE(replicated.ok());
  ASSERT_EQ(replicated->channels, 3);
  for (int i = 0; i < 24; ++i) {
    for (int c = 0; c < 3; ++c) ASSERT_EQ(replicated->pixels[3 * i + c], gray.pixels[i]);
  }
}

TEST(ImageDecoderTest, PngSixteenBitPaletteAndAlphaBecomeEightBitWithoutAlpha) {
  // 16-bit samples keep their high byte.
  auto wide = DecodePng(EncodePng16Gray(1, 4, {0x1234, 0xABCD, 0xFF00, 0x00FF}), ColorMode::kGray,
                        "wide.png");
  ASSERT_TRUE(wide.ok()) << wide.status();
  EXPECT_EQ(wide->pixels, (std::vector<uint8_t>{0x12, 0xAB, 0xFF, 0x00}));

  // A palette with transparency: colors expanded, alpha dropped (not composited).
  auto palette = DecodePng(EncodePalettePng(1, 3, {10, 20, 30, 200, 100, 0}, {0, 128}, {1, 0, 1}),
                           ColorMode::kColor, "palette.png");
  ASSERT_TRUE(palette.ok()) << palette.status();
  EXPECT_EQ(palette->channels, 3);
  EXPECT_EQ(palette->pixels, (std::vector<uint8_t>{0, 100, 200, 30, 20, 10, 0, 100, 200}));

  const Image bgr = SmoothImage(2, 2, 3);
  auto rgba = DecodePng(EncodeRgbaPng(bgr, {0, 64, 128, 255}), ColorMode::kNative, "rgba.png");
  ASSERT_TRUE(rgba.ok()) << rgba.status();
  EXPECT_EQ(rgba->channels, 3);
  EXPECT_EQ(rgba->pixels, bgr.pixels);
}

TEST(ImageDecoderTest, JpegRoundTripIsClose) {
  const Image color = SmoothImage(16, 24, 3, 3);
  const std::string jpeg = EncodeJpeg(color, 95);
  auto decoded = DecodeJpeg(jpeg, ColorMode::kColor, "color.jpg");
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->height, 16);
  EXPECT_EQ(decoded->width, 24);
  EXPECT_EQ(decoded->channels, 3);
  const int diff = MaxPixelDiff(*decoded, color);
  EXPECT_GE(diff, 0);
  EXPECT_LE(diff, 8);
  auto native = DecodeImage(jpeg, ColorMode::kNative, "color.jpg");
  ASSERT_TRUE(native.ok());
  EXPECT_EQ(native->channels, 3);

  // Channel order: a solid red picture decodes with red last.
  auto red = DecodeImage(EncodeJpeg(SolidImage(8, 8, 0, 0, 255)), ColorMode::kColor, "red.jpg");
  ASSERT_TRUE(red.ok());
  EXPECT_LT(red->pixels[0], 16);
  EXPECT_LT(red->pixels[1], 16);
  EXPECT_GT(red->pixels[2], 239);

  // Gray from a color JPEG is its luma.
  auto luma = DecodeImage(jpeg, ColorMode::kGray, "color.jpg");
  ASSERT_TRUE(luma.ok());
  ASSERT_EQ(luma->channels, 1);
  Image expected{16, 24, 1, {}};
  for (int i = 0; i < 16 * 24; ++i) {
    const uint8_t* p = &color.pixels[3 * i];
    expected.pixels.push_back(GrayFromBgr(p[0], p[1], p[2]));
  }
  EXPECT_LE(MaxPixelDiff(*luma, expected), 6);
  EXPECT_GE(MaxPixelDiff(*luma, expected), 0);

  const Image gray = SmoothImage(9, 11, 1, 4);
  const std::string gray_jpeg = EncodeJpeg(gray, 95);
  auto gray_native = DecodeImage(gray_jpeg, ColorMode::kNative, "gray.jpg");
  ASSERT_TRUE(gray_native.ok());
  EXPECT_EQ(gray_native->channels, 1);
  EXPECT_LE(MaxPixelDiff(*gray_native, gray), 4);
  EXPECT_GE(MaxPixelDiff(*gray_native, gray), 0);
  auto gray_as_color = DecodeImage(gray_jpeg, ColorMode::kColor, "gray.jpg");
  ASSERT_TRUE(gray_as_color.ok());
  ASSERT_EQ(gray_as_color->channels, 3);
  for (int i = 0; i < 9 * 11; ++i) {
    ASSERT_EQ(gray_as_color->pixels[3 * i], gray_native->pixels[i]);
    ASSERT_EQ(gray_as_color->pixels[3 * i + 2], gray_native->pixels[i]);
  }
}

// Every error is InvalidArgument and starts with the name the caller gave.
void ExpectError(const absl::StatusOr<Image>& result, const std::string& name,
                 const std::string& detail) {
  ASSERT_FALSE(result.ok()) << name;
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument) << result.status();
  EXPECT_EQ(result.status().message().rfind(name + ": ", 0), 0u) << result.status();
  EXPECT_NE(result.status().message().find(detail), std::string::npos) << result.status();
}

TEST(ImageDecoderTest, TruncatedAndCorruptFilesAreErrorsNamingTheFile) {
  const std::string jpeg = EncodeJpeg(SmoothImage(32, 32, 3), 90);
  ExpectError(DecodeImage(jpeg.substr(0, jpeg.size() * 6 / 10), ColorMode::kColor, "cut.jpg"),
              "cut.jpg", "Premature end of JPEG file");
  ExpectError(DecodeImage(jpeg.substr(0, 40), ColorMode::kColor, "header.jpg"), "header.jpg",
              "corrupt or unsupported JPEG");
  std::string garbage = "\xFF\xD8\xFF" + std::string(200, '\x5A');
  ExpectError(DecodeImage(garbage, ColorMode::kColor, "garbage.jpg"), "garbage.jpg",
              "corrupt or unsupported JPEG");

  const std::string png = EncodePng(SmoothImage(32, 32, 3));
  ExpectError(DecodeImage(png.substr(0, png.size() / 2), ColorMode::kColor, "cut.png"), "cut.png",
              "truncated");
  std::string flipped = png;
  flipped[20] ^= 0x40;  // inside IHDR: its CRC no longer matches
  ExpectError(DecodeImage(flipped, ColorMode::kColor, "crc.png"), "crc.png", "CRC");
  // IDAT with no image data behind it.
  ExpectError(
      DecodeImage(HandMadeRgbPng(4, 4, "", /*with_data=*/false), ColorMode::kColor, "nodata.png"),
      "nodata.png", "corrupt or unsupported PNG");

  ExpectError(DecodeImage("GIF89a......", ColorMode::kColor, "anim.gif"), "anim.gif",
              "not a JPEG or PNG");
  ExpectError(DecodeImage("", ColorMode::kColor, "empty.png"), "empty.png", "empty file");
  ExpectError(DecodePng(jpeg, ColorMode::kColor, "photo.png"), "photo.png", "not a PNG");
  ExpectError(DecodeJpeg(png, ColorMode::kColor, "drawing.jpg"), "drawing.jpg", "not a JPEG");
}

TEST(ImageDecoderTest, HugeDimensionsAreRefusedBeforeAllocating) {
  // A valid header claiming 60000 x 60000 RGB (10.8 GB of pixels), and 60000 filter bytes.
  ExpectError(DecodeImage(HandMadeRgbPng(60000, 60000, "", true), ColorMode::kColor, "big.png"),
              "big.png", "larger than the limit");
}

TEST(ImageDecoderTest, ReadImageFileNamesThePath) {
  const std::string good = ScratchFile("decoder_good.png");
  ASSERT_TRUE(WriteBytes(good, EncodePng(SolidImage(3, 2, 1, 2, 3))));
  auto image = ReadImageFile(good, ColorMode::kColor);
  ASSERT_TRUE(image.ok()) << image.status();
  EXPECT_EQ(image->pixels, SolidImage(3, 2, 1, 2, 3).pixels);

  const std::string missing = ScratchFile("decoder_missing.jpg");
  auto absent = ReadImageFile(missing, ColorMode::kColor);
  EXPECT_EQ(absent.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(absent.status().message().find(missing), std::string::npos) << absent.status();

  const std::string cut = ScratchFile("decoder_cut.jpg");
  const std::string jpeg = EncodeJpeg(SmoothImage(32, 32, 3));
  ASSERT_TRUE(WriteBytes(cut, jpeg.substr(0, jpeg.size() - 100)));
  ExpectError(ReadImageFile(cut, ColorMode::kGray), cut, "JPEG");
}

}  // namespace
}  // namespace kiln
