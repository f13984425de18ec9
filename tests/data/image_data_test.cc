// Caffe's ImageData layer through DatumBatchSource: image lists, labels, shapes, BGR planes,
// resize, gray, crops, seeded shuffling per epoch, rand_skip, and errors naming the list or the
// image.
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "frontends/caffe/caffe_io.h"
#include "frontends/caffe/data/datum_batch_source.h"
#include "frontends/caffe/data/image_list.h"
#include "gtest/gtest.h"
#include "tests/util/scratch_file.h"
#include "tests/util/image_files.h"

namespace kiln {
namespace {

constexpr int kImages = 6;

std::string BaseDir() {
  const std::string any = ScratchFile("x");
  return any.substr(0, any.rfind('/'));
}

// Image i of a folder: a solid (10i, 10i+1, 10i+2) BGR picture, PNG for even i and JPEG for odd
// i, of h x w (or of `sizes[i]` when given), labelled 100 + i in `list`.
void MakeFolder(const std::string& folder, const std::string& list, int h, int w,
                const std::vector<std::pair<int, int>>& sizes = {}) {
  std::filesystem::create_directories(ScratchFile(folder));
  std::string text;
  for (int i = 0; i < kImages; ++i) {
    const int ih = sizes.empty() ? h : sizes[i].first, iw = sizes.empty() ? w : sizes[i].second;
    const Image image = SolidImage(ih, iw, 10 * i, 10 * i + 1, 10 * i + 2);
    const std::string name = absl::StrCat("img", i, i % 2 == 0 ? ".png" : ".jpg");
    ASSERT_TRUE(WriteBytes(ScratchFile(folder + "/" + name),
                           i % 2 == 0 ? EncodePng(image) : EncodeJpeg(image, 100)));
    absl::StrAppend(&text, name, " ", 100 + i, "\n");
  }
  ASSERT_TRUE(WriteBytes(ScratchFile(list), text));
}

caffe::LayerParameter ImageLayer(const std::string& list, int batch, const std::string& more = "",
                                 const std::string& extra = "") {
  caffe::LayerParameter layer;
  EXPECT_TRUE(ParseTextMessage(absl::StrCat("name: 'photos' type: 'ImageData' top: 'data' ",
                                            "top: 'label' image_data_param { source: '", list,
                                            "' batch_size: ", batch, " ", more, " } ", extra),
                               "layer", layer)
                  .ok());
  return layer;
}

std::unique_ptr<DatumBatchSource> Open(const caffe::LayerParameter& layer, uint64_t seed = 1,
                                       caffe::Phase phase = caffe::TRAIN) {
  auto source = DatumBatchSource::OpenDataLayer(layer, phase, BaseDir(), seed);
  EXPECT_TRUE(source.ok()) << source.status();
  return source.ok() ? std::move(source).value() : nullptr;
}

std::vector<float> Labels(DatumBatchSource& source, int batches) {
  std::vector<float> labels;
  Batch batch;
  for (int i = 0; i < batches; ++i) {
    absl::Status s = source.Next(&batch);
    EXPECT_TRUE(s.ok()) << s;
    labels.insert(labels.end(), batch.labels.begin(), batch.labels.end());
  }
  return labels;
}

TEST(ImageDataTest, BatchesHoldBgrPlanesAndLabelsInListOrder) {
  MakeFolder("plain", "plain.txt", 5, 7);
  auto source = Open(ImageLayer("plain.txt", 4, "root_folder: 'plain/'"));
  ASSERT_NE(source, nullptr);
  EXPECT_EQ(source->data_dims(), (std::vector<int64_t>{4, 3, 5, 7}));
  EXPECT_EQ(source->dataset_size(), kImages);
  Batch batch;
  ASSERT_TRUE(source->Next(&batch).ok());
  EXPECT_EQ(batch.labels, (std::vector<float>{100, 101, 102, 103}));
  const int plane = 5 * 7;
  for (int i = 0; i < 4; ++i) {
    for (int c = 0; c < 3; ++c) {
      // PNG is exact; the solid JPEG at quality 100 is within 1.
      const float expected = 10.0f * i + c;
      for (int p = 0; p < plane; ++p) {
        ASSERT_NEAR(batch.data[(i * 3 + c) * plane + p], expected, i % 2 == 0 ? 0.0f : 1.0f)
            << "image " << i << " channel " << c;
      }
    }
  }
  ASSERT_TRUE(source->Next(&batch).ok());
  EXPECT_EQ(batch.labels, (std::vector<float>{104, 105, 100, 101}));  // wraps around
}

TEST(ImageDataTest, ResizeGrayAndTransform) {
  MakeFolder("sizes", "sizes.txt", 0, 0, {{5, 7}, {9, 4}, {3, 3}, {12, 10}, {6, 8}, {2, 15}});
  // Without new_height/new_width the sizes differ and the second image cannot join the batch.
  auto mixed = Open(ImageLayer("sizes.txt", 2, "root_folder: 'sizes'"));
  ASSERT_NE(mixed, nullptr);
  Batch batch;
  absl::Status s = mixed->Next(&batch);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("img1.jpg"), std::string::npos) << s;
  EXPECT_NE(s.message().find("one size"), std::string::npos) << s;

  // Resized to 6x8, gray, scaled by 0.5: every pixel of image i is half its luma.
  auto gray = Open(ImageLayer("sizes.txt", 3,
                              "root_folder: 'sizes' new_height: 6 new_width: 8 is_color: false",
                              "transform_param { scale: 0.5 }"));
  ASSERT_NE(gray, nullptr);
  EXPECT_EQ(gray->data_dims(), (std::vector<int64_t>{3, 1, 6, 8}));
  ASSERT_TRUE(gray->Next(&batch).ok());
  for (int i = 0; i < 3; ++i) {
    const float luma = GrayFromBgr(10 * i, 10 * i + 1, 10 * i + 2);
    for (int p = 0; p < 48; ++p) ASSERT_NEAR(batch.data[i * 48 + p], 0.5f * luma, 0.5f) << i;
  }

  // A crop gives the data top its size (the centre in TEST).
  auto crop = Open(ImageLayer("sizes.txt", 2, "root_folder: 'sizes' new_height: 6 new_width: 8",
                              "transform_param { crop_size: 4 }"),
                   1, caffe::TEST);
  ASSERT_NE(crop, nullptr);
  EXPECT_EQ(crop->data_dims(), (std::vector<int64_t>{2, 3, 4, 4}));
  EXPECT_TRUE(crop->Next(&batch).ok());
}

TEST(ImageDataTest, ShuffleIsSeededAndNewEachEpoch) {
  MakeFolder("shuffled", "shuffled.txt", 4, 4);
  const caffe::LayerParameter layer =
      ImageLayer("shuffled.txt", 3, "root_folder: 'shuffled' shuffle: true");
  const std::vector<float> a = Labels(*Open(layer, 7), 6);  // three epochs of six
  const std::vector<float> b = Labels(*Open(layer, 7), 6);
  EXPECT_EQ(a, b);
  std::vector<std::vector<float>> epochs;
  for (int e = 0; e < 3; ++e) {
    std::vector<float> epoch(a.begin() + e * kImages, a.begin() + (e + 1) * kImages);
    EXPECT_EQ(std::set<float>(epoch.begin(), epoch.end()),
              (std::set<float>{100, 101, 102, 103, 104, 105}));
    epochs.push_back(epoch);
  }
  EXPECT_TRUE(epochs[0] != epochs[1] || epochs[1] != epochs[2]) << "reshuffled every epoch";
  const std::vector<float> list_order = {100, 101, 102, 103, 104, 105};
  EXPECT_TRUE(epochs[0] != list_order || epochs[1] != list_order);
  EXPECT_NE(Labels(*Open(layer, 8), 6), a);  // another seed, another order

  // Without shuffle the list order is kept.
  const std::vector<float> plain =
      Labels(*Open(ImageLayer("shuffled.txt", 3, "root_folder: 'shuffled'"), 7), 2);
  EXPECT_EQ(plain, list_order);
}

TEST(ImageDataTest, RandSkipStartsAtASeededImage) {
  MakeFolder("skipped", "skipped.txt", 4, 4);
  const caffe::LayerParameter layer =
      ImageLayer("skipped.txt", 2, "root_folder: 'skipped' rand_skip: 5");
  std::set<int> starts;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    const std::vector<float> labels = Labels(*Open(layer, seed), 4);
    const int skip = static_cast<int>(labels[0]) - 100;
    EXPECT_GE(skip, 0);
    EXPECT_LT(skip, 5);
    for (int k = 0; k < 8; ++k) ASSERT_EQ(labels[k], 100 + (skip + k) % kImages) << seed;
    EXPECT_EQ(Labels(*Open(layer, seed), 1)[0], labels[0]) << "same seed, same skip";
    starts.insert(skip);
  }
  EXPECT_GT(starts.size(), 1u);
}

TEST(ImageDataTest, RelativePathsWithoutRootFolderAreResolvedAgainstTheBaseDir) {
  MakeFolder("norooted", "norooted_unused.txt", 3, 3);
  ASSERT_TRUE(WriteBytes(ScratchFile("norooted.txt"),
                         "norooted/img2.png 7\r\n\n"
                         "  norooted/img4.png\t9  \n"));
  auto source = Open(ImageLayer("norooted.txt", 2));
  ASSERT_NE(source, nullptr);
  EXPECT_EQ(Labels(*source, 2), (std::vector<float>{7, 9, 7, 9}));
}

TEST(ImageDataTest, ErrorsNameTheLayerTheListAndTheImage) {
  MakeFolder("broken", "broken.txt", 4, 4);
  // A truncated image in the middle: the batches before it arrive, then the error.
  const std::string img3 = ScratchFile("broken/img3.jpg");
  const std::string jpeg = EncodeJpeg(SmoothImage(4, 4, 3));
  ASSERT_TRUE(WriteBytes(img3, jpeg.substr(0, jpeg.size() / 2)));
  auto source = Open(ImageLayer("broken.txt", 3, "root_folder: 'broken'"));
  ASSERT_NE(source, nullptr);
  Batch batch;
  EXPECT_TRUE(source->Next(&batch).ok());
  absl::Status s = source->Next(&batch);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message().rfind("data layer 'photos': source 'broken.txt': ", 0), 0u) << s;
  EXPECT_NE(s.message().find("list line 4"), std::string::npos) << s;
  EXPECT_NE(s.message().find(img3), std::string::npos) << s;

  // The first image missing fails at setup.
  ASSERT_TRUE(WriteBytes(ScratchFile("ghost.txt"), "ghost.png 1\n"));
  auto ghost =
      DatumBatchSource::OpenDataLayer(ImageLayer("ghost.txt", 1), caffe::TRAIN, BaseDir(), 1);
  EXPECT_EQ(ghost.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(ghost.status().message().find("ghost.png"), std::string::npos) << ghost.status();

  ASSERT_TRUE(WriteBytes(ScratchFile("badlabel.txt"), "a.png 1\nb.png cat\n"));
  auto label =
      DatumBatchSource::OpenDataLayer(ImageLayer("badlabel.txt", 1), caffe::TRAIN, BaseDir(), 1);
  EXPECT_EQ(label.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(label.status().message().find("badlabel.txt:2: label 'cat' is not an integer"),
            std::string::npos)
      << label.status();

  ASSERT_TRUE(WriteBytes(ScratchFile("nolabel.txt"), "lonely.png\n"));
  auto nolabel =
      DatumBatchSource::OpenDataLayer(ImageLayer("nolabel.txt", 1), caffe::TRAIN, BaseDir(), 1);
  EXPECT_NE(nolabel.status().message().find("nolabel.txt:1: expected 'path label'"),
            std::string::npos)
      << nolabel.status();

  auto half = DatumBatchSource::OpenDataLayer(
      ImageLayer("broken.txt", 1, "root_folder: 'broken' new_height: 8"), caffe::TRAIN, BaseDir(),
      1);
  EXPECT_EQ(half.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(half.status().message().find("new_width 0"), std::string::npos) << half.status();

  auto missing =
      DatumBatchSource::OpenDataLayer(ImageLayer("absent.txt", 1), caffe::TRAIN, BaseDir(), 1);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message().rfind("data layer 'photos': source 'absent.txt': ", 0), 0u)
      << missing.status();

  caffe::LayerParameter no_source;
  no_source.set_name("x");
  no_source.set_type("ImageData");
  EXPECT_NE(DatumBatchSource::OpenDataLayer(no_source, caffe::TRAIN, BaseDir(), 1)
                .status()
                .message()
                .find("image_data_param.source is missing"),
            std::string::npos);
}

TEST(ImageListTest, ParsesPathsWithSpacesAndJoinsRootFolders) {
  auto entries = ParseImageList("dir/a b.jpg 3\n\nc.png\t-1\r\n", "l.txt");
  ASSERT_TRUE(entries.ok()) << entries.status();
  ASSERT_EQ(entries->size(), 2u);
  EXPECT_EQ((*entries)[0].path, "dir/a b.jpg");
  EXPECT_EQ((*entries)[0].label, 3);
  EXPECT_EQ((*entries)[0].line, 1);
  EXPECT_EQ((*entries)[1].path, "c.png");
  EXPECT_EQ((*entries)[1].label, -1);
  EXPECT_EQ((*entries)[1].line, 3);
  EXPECT_EQ(ParseImageList("\n  \n", "e.txt").status().message(),
            "e.txt: the image list has no entries");
  EXPECT_EQ(ImagePath("", "a.jpg"), "a.jpg");
  EXPECT_EQ(ImagePath("root/", "a.jpg"), "root/a.jpg");
  EXPECT_EQ(ImagePath("root", "a.jpg"), "root/a.jpg");
}

}  // namespace
}  // namespace kiln
