// `kiln convert --list` end to end: an image list and its files in, a Datum database out that
// reads back through DatumReader and, encoded or not, through a Data layer.
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "data/image_resize.h"
#include "frontends/caffe/caffe_io.h"
#include "frontends/caffe/data/datum_batch_source.h"
#include "frontends/caffe/data/datum_db.h"
#include "frontends/caffe/data/image_datum.h"
#include "gtest/gtest.h"
#include "tests/util/scratch_file.h"
#include "tests/util/image_files.h"
#include "tools/convert_command.h"
#include "tools/convert_images.h"

namespace kiln {
namespace {

constexpr int kImages = 5;

int Convert(std::vector<std::string> args) {
  args.insert(args.begin(), {"kiln", "convert"});
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(&a[0]);
  return ConvertCommand(static_cast<int>(argv.size()), argv.data());
}

// A folder of kImages 6x8 images (PNG, one JPEG: img3) labelled 2i, and its list; returns the
// folder's path.
std::string MakeImages(const std::string& name) {
  const std::string folder = ScratchFile(name);
  std::filesystem::create_directories(folder);
  std::string list;
  for (int i = 0; i < kImages; ++i) {
    const Image image = SmoothImage(6, 8, 3, i);
    const std::string file = absl::StrCat("img", i, i == 3 ? ".jpg" : ".png");
    EXPECT_TRUE(WriteBytes(folder + "/" + file, i == 3 ? EncodeJpeg(image, 90) : EncodePng(image)));
    absl::StrAppend(&list, file, " ", 2 * i, "\n");
  }
  EXPECT_TRUE(WriteBytes(folder + ".txt", list));
  return folder;
}

std::vector<std::pair<std::string, caffe::Datum>> ReadAll(const std::string& path,
                                                          DbBackend backend) {
  std::vector<std::pair<std::string, caffe::Datum>> out;
  auto reader = DatumReader::Open(path, backend);
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return out;
  for (int64_t i = 0; i < (*reader)->Count(); ++i) {
    std::string key;
    caffe::Datum datum;
    EXPECT_TRUE((*reader)->Read(&key, &datum).ok());
    out.emplace_back(key, datum);
  }
  return out;
}

Image Decoded(const std::string& path, ColorMode mode) {
  auto bytes = ReadFileBytes(path);
  EXPECT_TRUE(bytes.ok());
  auto image = DecodeImage(*bytes, mode, path);
  EXPECT_TRUE(image.ok()) << image.status();
  return *image;
}

TEST(KilnConvertImagesTest, ListToLmdbAndLevelDbReadsBackInListOrder) {
  const std::string folder = MakeImages("cv_plain");
  for (const std::string backend : {"lmdb", "leveldb"}) {
    const std::string out = ScratchFile("cv_plain_" + backend);
    ASSERT_EQ(0, Convert({"--list", folder + ".txt", "--root_folder", folder, "--out", out,
                          "--backend", backend}));
    const auto records = ReadAll(out, *ParseDbBackend(backend));
    ASSERT_EQ(records.size(), static_cast<size_t>(kImages));
    for (int i = 0; i < kImages; ++i) {
      const std::string file = absl::StrCat("img", i, i == 3 ? ".jpg" : ".png");
      const caffe::Datum& d = records[i].second;
      EXPECT_EQ(records[i].first, DatumKey(i) + "_" + file);  // convert_imageset's key
      EXPECT_EQ(d.channels(), 3);
      EXPECT_EQ(d.height(), 6);
      EXPECT_EQ(d.width(), 8);
      EXPECT_EQ(d.label(), 2 * i);
      EXPECT_FALSE(d.encoded());
      // CHW planes of the decoded BGR pixels; the PNGs are the images exactly.
      const Image image =
          i == 3 ? Decoded(folder + "/" + file, ColorMode::kColor) : SmoothImage(6, 8, 3, i);
      ASSERT_EQ(d.data().size(), 3u * 48);
      for (int c = 0; c < 3; ++c) {
        for (int p = 0; p < 48; ++p) {
          ASSERT_EQ(static_cast<uint8_t>(d.data()[c * 48 + p]), image.pixels[3 * p + c]) << i;
        }
      }
    }
    // An existing output is kept unless --overwrite is given.
    EXPECT_EQ(1, Convert({"--list", folder + ".txt", "--root_folder", folder, "--out", out,
                          "--backend", backend}));
    EXPECT_EQ(0, Convert({"--list", folder + ".txt", "--root_folder", folder, "--out", out,
                          "--backend", backend, "--overwrite"}));
  }
}

TEST(KilnConvertImagesTest, ResizeAndGray) {
  const std::string folder = MakeImages("cv_small");
  const std::string out = ScratchFile("cv_small_lmdb");
  ASSERT_EQ(0, Convert({"--list", folder + ".txt", "--root_folder", folder + "/", "--out", out,
                        "--resize_height", "3", "--resize_width", "4", "--gray"}));
  const auto records = ReadAll(out, DbBackend::kLmdb);
  ASSERT_EQ(records.size(), static_cast<size_t>(kImages));
  for (int i = 0; i < kImages; ++i) {
    const caffe::Datum& d = records[i].second;
    EXPECT_EQ(d.channels(), 1);
    EXPECT_EQ(d.height(), 3);
    EXPECT_EQ(d.width(), 4);
    const std::string file = absl::StrCat(folder, "/img", i, i == 3 ? ".jpg" : ".png");
    auto resized = ResizeBilinear(Decoded(file, ColorMode::kGray), 3, 4);
    ASSERT_TRUE(resized.ok());
    EXPECT_EQ(d.data(), std::string(resized->pixels.begin(), resized->pixels.end())) << i;
  }
}

std::vector<std::string> Keys(const std::string& path) {
  std::vector<std::string> keys;
  for (const auto& [key, datum] : ReadAll(path, DbBackend::kLmdb)) keys.push_back(key);
  return keys;
}

TEST(KilnConvertImagesTest, ShuffleIsSeeded) {
  const std::string folder = MakeImages("cv_shuffle");
  auto run = [&](const std::string& seed, const std::string& out) {
    EXPECT_EQ(0, Convert({"--list", folder + ".txt", "--root_folder", folder, "--out",
                          ScratchFile(out), "--shuffle", "--seed", seed, "--overwrite"}));
    return Keys(ScratchFile(out));
  };
  const std::vector<std::string> a = run("5", "cv_shuffle_a"), b = run("5", "cv_shuffle_b");
  const std::vector<std::string> c = run("6", "cv_shuffle_c");
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  std::set<std::string> files;
  bool moved = false;
  for (int i = 0; i < kImages; ++i) {
    ASSERT_EQ(a[i].substr(0, 9), DatumKey(i) + "_");  // positions stay in order
    files.insert(a[i].substr(9));
    moved |= a[i].substr(9, 4) != absl::StrCat("img", i);
  }
  EXPECT_EQ(files.size(), static_cast<size_t>(kImages));  // a permutation of the list
  EXPECT_TRUE(moved);
}

TEST(KilnConvertImagesTest, EncodedRecordsHoldTheFileAndDecodeLikeRawOnes) {
  const std::string folder = MakeImages("cv_encoded");
  const std::string raw = ScratchFile("cv_raw_lmdb"), encoded = ScratchFile("cv_encoded_lmdb");
  ASSERT_EQ(0, Convert({"--list", folder + ".txt", "--root_folder", folder, "--out", raw}));
  ASSERT_EQ(0, Convert({"--list", folder + ".txt", "--root_folder", folder, "--out", encoded,
                        "--encoded"}));
  const auto records = ReadAll(encoded, DbBackend::kLmdb);
  ASSERT_EQ(records.size(), static_cast<size_t>(kImages));
  for (int i = 0; i < kImages; ++i) {
    const caffe::Datum& d = records[i].second;
    EXPECT_TRUE(d.encoded());
    EXPECT_EQ(d.label(), 2 * i);
    auto file = ReadFileBytes(absl::StrCat(folder, "/img", i, i == 3 ? ".jpg" : ".png"));
    ASSERT_TRUE(file.ok());
    EXPECT_EQ(d.data(), *file);
  }
  // Through a Data layer both databases give the same batches: the encoded records are decoded.
  auto batches = [](const std::string& db) {
    caffe::LayerParameter layer;
    EXPECT_TRUE(ParseTextMessage(
                    absl::StrCat("name: 'd' type: 'Data' top: 'data' top: 'label' ",
                                 "data_param { source: '", db, "' backend: LMDB batch_size: 5 } ",
                                 "transform_param { scale: 0.25 mean_value: 10 }"),
                    "layer", layer)
                    .ok());
    auto source = DatumBatchSource::OpenDataLayer(layer, caffe::TEST, "", 1);
    EXPECT_TRUE(source.ok()) << source.status();
    Batch batch;
    if (source.ok()) {
      EXPECT_EQ((*source)->data_dims(), (std::vector<int64_t>{5, 3, 6, 8}));
      EXPECT_TRUE((*source)->Next(&batch).ok());
    }
    return batch;
  };
  const Batch from_raw = batches(raw), from_encoded = batches(encoded);
  EXPECT_EQ(from_raw.data.size(), 5u * 3 * 48);
  EXPECT_EQ(from_raw.data, from_encoded.data);
  EXPECT_EQ(from_encoded.labels, (std::vector<float>{0, 2, 4, 6, 8}));

  // Storing the file's bytes cannot also resize them.
  ImageListConversion c;
  c.list = folder + ".txt";
  c.root_folder = folder;
  c.out = ScratchFile("cv_encoded_resized");
  c.encoded = true;
  c.resize_height = c.resize_width = 4;
  auto refused = ConvertImageList(c);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("cannot be combined"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(c.out));
}

TEST(KilnConvertImagesTest, CheckSizeBadImagesAndFlags) {
  const std::string folder = MakeImages("cv_errors");
  ASSERT_TRUE(WriteBytes(folder + "/odd.png", EncodePng(SmoothImage(5, 8, 3))));
  ASSERT_TRUE(WriteBytes(folder + "/bad.png", EncodePng(SmoothImage(6, 8, 3)).substr(0, 30)));
  ASSERT_TRUE(WriteBytes(folder + "/sizes.txt", "img0.png 0\nodd.png 1\n"));
  ASSERT_TRUE(WriteBytes(folder + "/bad.txt", "img0.png 0\nbad.png 1\nimg1.png 2\n"));

  ImageListConversion c;
  c.root_folder = folder;
  c.list = folder + "/sizes.txt";
  c.out = ScratchFile("cv_sizes_unchecked");
  auto unchecked = ConvertImageList(c);
  ASSERT_TRUE(unchecked.ok()) << unchecked.status();
  EXPECT_EQ(unchecked->written, 2);
  c.check_size = true;
  c.out = ScratchFile("cv_sizes_checked");
  auto checked = ConvertImageList(c);
  EXPECT_EQ(checked.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(checked.status().message().find("sizes.txt:2: image '" + folder +
                                            "/odd.png' is "
                                            "3x5x8 but the first image is 3x6x8 (--check_size)"),
            std::string::npos)
      << checked.status();

  c = ImageListConversion();
  c.root_folder = folder;
  c.list = folder + "/bad.txt";
  c.out = ScratchFile("cv_bad");
  auto bad = ConvertImageList(c);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("bad.txt:2: " + folder + "/bad.png: "), std::string::npos)
      << bad.status();
  EXPECT_NE(bad.status().message().find("left incomplete"), std::string::npos) << bad.status();
  c.skip_bad = true;
  c.out = ScratchFile("cv_bad_skipped");
  auto skipped = ConvertImageList(c);
  ASSERT_TRUE(skipped.ok()) << skipped.status();
  EXPECT_EQ(skipped->written, 2);
  ASSERT_EQ(skipped->skipped.size(), 1u);
  EXPECT_NE(skipped->skipped[0].find("bad.png"), std::string::npos);
  EXPECT_EQ(Keys(c.out),
            (std::vector<std::string>{DatumKey(0) + "_img0.png", DatumKey(2) + "_img1.png"}));

  const std::string list = folder + ".txt";
  EXPECT_EQ(1, Convert({"--list", list, "--root_folder", folder, "--out", ScratchFile("cv_f1"),
                        "--resize_height", "4"}));
  EXPECT_EQ(1, Convert({"--list", list, "--root_folder", folder, "--out", ScratchFile("cv_f2"),
                        "--resize_height", "x", "--resize_width", "4"}));
  EXPECT_EQ(1, Convert({"--list", ScratchFile("cv_none.txt"), "--out", ScratchFile("cv_f3")}));
  EXPECT_EQ(1, Convert({"--list", list, "--root_folder", folder}));  // no --out
  EXPECT_EQ(1, Convert({"--list", list, "--out", ScratchFile("cv_f4"), "--images", "x"}));
}

}  // namespace
}  // namespace kiln
