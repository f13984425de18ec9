// Caffe's Datum transformer: mean, scale, crops, mirror, float_data, encoded records, and its
// errors.
#include "frontends/caffe/data/transform.h"

#include <set>
#include <string>
#include <vector>

#include "frontends/caffe/caffe_io.h"
#include "frontends/caffe/data/image_datum.h"
#include "gtest/gtest.h"
#include "tests/util/scratch_file.h"
#include "tests/util/image_files.h"

namespace kiln {
namespace {

// A c x h x w datum whose byte at (c, y, x) is 100*c + 10*y + x.
caffe::Datum Grid(int c, int h, int w) {
  caffe::Datum d;
  d.set_channels(c);
  d.set_height(h);
  d.set_width(w);
  std::string bytes;
  for (int k = 0; k < c; ++k) {
    for (int y = 0; y < h; ++y) {
      for (int x = 0; x < w; ++x) bytes.push_back(static_cast<char>(100 * k + 10 * y + x));
    }
  }
  d.set_data(bytes);
  return d;
}

std::vector<float> Apply(DatumTransformer& t, const caffe::Datum& d) {
  auto dims = t.OutputDims(d);
  EXPECT_TRUE(dims.ok()) << dims.status();
  std::vector<float> out((*dims)[0] * (*dims)[1] * (*dims)[2], -1.0f);
  absl::Status s = t.Transform(d, out.data());
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

DatumTransformer Make(const std::string& text, caffe::Phase phase, uint64_t seed = 1) {
  caffe::TransformationParameter p;
  EXPECT_TRUE(ParseTextMessage(text, "param", p).ok());
  auto t = DatumTransformer::Create(p, phase, "", seed);
  EXPECT_TRUE(t.ok()) << t.status();
  return std::move(t).value();
}

TEST(TransformTest, MeanValueThenScale) {
  DatumTransformer one = Make("scale: 0.5 mean_value: 10", caffe::TEST);
  std::vector<float> out = Apply(one, Grid(2, 2, 2));
  ASSERT_EQ(out.size(), 8u);
  EXPECT_FLOAT_EQ(out[0], (0 - 10) * 0.5f);
  EXPECT_FLOAT_EQ(out[3], (11 - 10) * 0.5f);
  EXPECT_FLOAT_EQ(out[7], (111 - 10) * 0.5f);

  DatumTransformer per_channel = Make("scale: 2 mean_value: 1 mean_value: 100", caffe::TEST);
  out = Apply(per_channel, Grid(2, 2, 2));
  EXPECT_FLOAT_EQ(out[1], (1 - 1) * 2.0f);
  EXPECT_FLOAT_EQ(out[5], (101 - 100) * 2.0f);

  DatumTransformer three = Make("mean_value: 1 mean_value: 2 mean_value: 3", caffe::TEST);
  auto dims = three.OutputDims(Grid(2, 2, 2));
  EXPECT_EQ(dims.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(dims.status().message().find("3 mean_values"), std::string::npos);
}

TEST(TransformTest, FloatData) {
  caffe::Datum d;
  d.set_channels(1);
  d.set_height(1);
  d.set_width(3);
  for (float v : {0.5f, -1.0f, 2.0f}) d.add_float_data(v);
  DatumTransformer t = Make("scale: 4 mean_value: 0.5", caffe::TEST);
  EXPECT_EQ(Apply(t, d), (std::vector<float>{0.0f, -6.0f, 6.0f}));
  d.add_float_data(1.0f);
  std::vector<float> out(4);
  EXPECT_NE(t.Transform(d, out.data()).message().find("float_data has 4"), std::string::npos);
}

TEST(TransformTest, CenterCropInTest) {
  DatumTransformer t = Make("crop_size: 2 mirror: true", caffe::TEST);
  auto dims = t.OutputDims(Grid(1, 5, 4));
  ASSERT_TRUE(dims.ok());
  EXPECT_EQ(*dims, (std::vector<int64_t>{1, 2, 2}));
  // Offsets (5-2)/2 = 1 and (4-2)/2 = 1, never mirrored in TEST.
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(Apply(t, Grid(1, 5, 4)), (std::vector<float>{11, 12, 21, 22}));
  }
  DatumTransformer big = Make("crop_size: 6", caffe::TEST);
  EXPECT_NE(big.OutputDims(Grid(1, 5, 4)).status().message().find("crop_size 6"),
            std::string::npos);
}

TEST(TransformTest, SeededRandomCropAndMirrorInTrain) {
  const std::string param = "crop_size: 3 mirror: true";
  DatumTransformer a = Make(param, caffe::TRAIN, 7), b = Make(param, caffe::TRAIN, 7);
  DatumTransformer c = Make(param, caffe::TRAIN, 8);
  std::set<std::vector<float>> seen;
  bool differs_from_other_seed = false;
  for (int i = 0; i < 64; ++i) {
    const std::vector<float> x = Apply(a, Grid(2, 6, 6));
    EXPECT_EQ(x, Apply(b, Grid(2, 6, 6)));  // same seed, same sequence
    differs_from_other_seed |= x != Apply(c, Grid(2, 6, 6));
    seen.insert(x);
    // Each output is a 3x3 window of the grid, mirrored or not, the same in both channels.
    const float top_left = x[0], top_right = x[2];
    const bool mirrored = top_right < top_left;
    const float origin = mirrored ? top_right : top_left;
    for (int y = 0; y < 3; ++y) {
      for (int col = 0; col < 3; ++col) {
        const int src_x = mirrored ? 2 - col : col;
        ASSERT_EQ(x[y * 3 + col], origin + 10 * y + src_x);
        ASSERT_EQ(x[9 + y * 3 + col], origin + 100 + 10 * y + src_x);
      }
    }
  }
  EXPECT_TRUE(differs_from_other_seed);
  EXPECT_GT(seen.size(), 10u);  // 16 offsets x 2 flips are possible
}

TEST(TransformTest, MeanFileAtTheSourcePixel) {
  caffe::BlobProto mean;
  mean.set_num(1);
  mean.set_channels(1);
  mean.set_height(3);
  mean.set_width(3);
  for (int i = 0; i < 9; ++i) mean.add_data(static_cast<float>(i));
  const std::string path = ScratchFile("mean.binaryproto");
  ASSERT_TRUE(WriteFileBytes(path, mean.SerializeAsString()).ok());
  caffe::TransformationParameter p;
  p.set_mean_file("mean.binaryproto");  // relative: resolved against base_dir
  p.set_crop_size(1);
  p.set_scale(0.5f);
  const std::string dir = path.substr(0, path.rfind('/'));
  auto t = DatumTransformer::Create(p, caffe::TEST, dir, 1);
  ASSERT_TRUE(t.ok()) << t.status();
  // Centre pixel (1,1) of the grid is 11, its mean is mean[4] = 4.
  EXPECT_EQ(Apply(*t, Grid(1, 3, 3)), (std::vector<float>{(11 - 4) * 0.5f}));
  // A datum of another size than the mean is refused before anything is written.
  EXPECT_NE(t->OutputDims(Grid(1, 4, 4)).status().message().find("mean_file is 1x3x3"),
            std::string::npos);

  p.add_mean_value(3);
  EXPECT_FALSE(DatumTransformer::Create(p, caffe::TEST, dir, 1).ok());
  p.clear_mean_value();
  p.set_mean_file("absent.binaryproto");
  auto absent = DatumTransformer::Create(p, caffe::TEST, dir, 1);
  EXPECT_NE(absent.status().message().find("absent.binaryproto"), std::string::npos);
  mean.set_num(2);
  ASSERT_TRUE(WriteFileBytes(path, mean.SerializeAsString()).ok());
  p.set_mean_file(path);
  EXPECT_NE(DatumTransformer::Create(p, caffe::TEST, dir, 1).status().message().find("1xCxHxW"),
            std::string::npos);
}

// An encoded record holding a PNG: the transform decodes it and gives what the raw record of the
// same pixels gives; force_color/force_gray choose the channels.
TEST(TransformTest, EncodedRecordsAreDecoded) {
  const Image color = SmoothImage(3, 4, 3, 5);
  caffe::Datum encoded;
  encoded.set_data(EncodePng(color));
  encoded.set_encoded(true);
  encoded.set_label(3);
  const caffe::Datum raw = ImageToDatum(color, 3);
  ASSERT_EQ(raw.channels(), 3);
  // ImageToDatum's CHW planes: channel 1 (green) of pixel (y=2, x=1).
  EXPECT_EQ(static_cast<uint8_t>(raw.data()[1 * 12 + 2 * 4 + 1]),
            color.pixels[(2 * 4 + 1) * 3 + 1]);

  DatumTransformer native = Make("scale: 0.5 mean_value: 1", caffe::TEST);
  auto dims = native.OutputDims(encoded);
  ASSERT_TRUE(dims.ok()) << dims.status();
  EXPECT_EQ(*dims, (std::vector<int64_t>{3, 3, 4}));
  EXPECT_EQ(Apply(native, encoded), Apply(native, raw));
  caffe::Datum scratch;
  auto decoded = native.DecodeIfEncoded(encoded, &scratch);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(*decoded, &scratch);
  EXPECT_EQ(scratch.data(), raw.data());
  EXPECT_EQ(scratch.label(), 3);
  EXPECT_EQ(*native.DecodeIfEncoded(raw, &scratch), &raw);  // raw records pass through

  DatumTransformer gray = Make("force_gray: true", caffe::TEST);
  EXPECT_EQ(*gray.OutputDims(encoded), (std::vector<int64_t>{1, 3, 4}));
  const std::vector<float> luma = Apply(gray, encoded);
  const uint8_t* p = &color.pixels[0];
  EXPECT_FLOAT_EQ(luma[0], GrayFromBgr(p[0], p[1], p[2]));

  caffe::Datum gray_png;
  gray_png.set_data(EncodePng(SmoothImage(2, 2, 1)));
  gray_png.set_encoded(true);
  EXPECT_EQ(*native.OutputDims(gray_png), (std::vector<int64_t>{1, 2, 2}));  // the file's own
  DatumTransformer forced = Make("force_color: true", caffe::TEST);
  EXPECT_EQ(*forced.OutputDims(gray_png), (std::vector<int64_t>{3, 2, 2}));

  caffe::TransformationParameter both;
  both.set_force_color(true);
  both.set_force_gray(true);
  EXPECT_NE(DatumTransformer::Create(both, caffe::TEST, "", 1)
                .status()
                .message()
                .find("force_color and force_gray"),
            std::string::npos);
}

TEST(TransformTest, RefusesBadDatums) {
  DatumTransformer t = Make("", caffe::TEST);
  caffe::Datum d = Grid(1, 2, 2);
  d.set_encoded(true);  // bytes that are no image
  EXPECT_EQ(t.OutputDims(d).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(t.OutputDims(d).status().message().find("not a JPEG or PNG"), std::string::npos);
  std::vector<float> none(4);
  EXPECT_EQ(t.Transform(d, none.data()).code(), absl::StatusCode::kInvalidArgument);
  d = Grid(1, 2, 2);
  d.set_height(3);
  std::vector<float> out(6);
  EXPECT_NE(t.Transform(d, out.data()).message().find("data has 4"), std::string::npos);
  d.set_width(0);
  EXPECT_FALSE(t.OutputDims(d).ok());
}

}  // namespace
}  // namespace kiln
