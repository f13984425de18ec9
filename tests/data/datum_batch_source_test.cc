// DatumBatchSource on small databases the test writes: shapes, order, wrap-around, shuffle, shards,
// errors from setup and from the prefetch thread.
#include "frontends/caffe/data/datum_batch_source.h"

#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "frontends/caffe/caffe_io.h"
#include "frontends/caffe/data/datum_db.h"
#include "gtest/gtest.h"
#include "tests/util/scratch_file.h"

namespace kiln {
namespace {

// Record i: a 1x3x4 image whose pixels are all i, label i.
caffe::Datum Record(int i, int h = 3) {
  caffe::Datum d;
  d.set_channels(1);
  d.set_height(h);
  d.set_width(4);
  d.set_data(std::string(h * 4, static_cast<char>(i)));
  d.set_label(i);
  return d;
}

// A database of `n` records in the scratch folder; returns its folder name (relative).
std::string MakeDb(const std::string& name, int n, DbBackend backend = DbBackend::kLmdb,
                   int odd_record = -1) {
  DatumWriterOptions options;
  options.overwrite = true;
  auto writer = DatumWriter::Open(ScratchFile(name), backend, options);
  EXPECT_TRUE(writer.ok()) << writer.status();
  for (int i = 0; i < n; ++i) {
    EXPECT_TRUE((*writer)->Put(DatumKey(i), Record(i, i == odd_record ? 5 : 3)).ok());
  }
  EXPECT_TRUE((*writer)->Close().ok());
  return name;
}

std::string BaseDir() {
  const std::string any = ScratchFile("x");
  return any.substr(0, any.rfind('/'));
}

caffe::LayerParameter Layer(const std::string& text) {
  caffe::LayerParameter layer;
  EXPECT_TRUE(ParseTextMessage(text, "layer", layer).ok());
  return layer;
}

caffe::LayerParameter DataLayer(const std::string& source, int batch, const std::string& extra = "",
                                const std::string& backend = "LMDB") {
  return Layer(absl::StrCat("name: 'mnist' type: 'Data' top: 'data' top: 'label' data_param { ",
                            "source: '", source, "' backend: ", backend, " batch_size: ", batch,
                            " } ", extra));
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

TEST(BatchSourceTest, ShapesLabelsInKeyOrderAndWrapAround) {
  const std::string db = MakeDb("ten_lmdb", 10);
  auto source = DatumBatchSource::OpenDataLayer(DataLayer(db, 4, "transform_param { scale: 0.5 }"),
                                                caffe::TRAIN, BaseDir(), 1);
  ASSERT_TRUE(source.ok()) << source.status();
  EXPECT_EQ((*source)->data_dims(), (std::vector<int64_t>{4, 1, 3, 4}));
  EXPECT_EQ((*source)->dataset_size(), 10);
  Batch batch;
  ASSERT_TRUE((*source)->Next(&batch).ok());
  EXPECT_EQ(batch.data_dims, (std::vector<int64_t>{4, 1, 3, 4}));
  ASSERT_EQ(batch.data.size(), 48u);
  EXPECT_EQ(batch.labels, (std::vector<float>{0, 1, 2, 3}));
  EXPECT_FLOAT_EQ(batch.data[12 * 3 + 5], 1.5f);  // record 3, scaled by 0.5
  EXPECT_EQ(Labels(**source, 2), (std::vector<float>{4, 5, 6, 7, 8, 9, 0, 1}));
}

TEST(BatchSourceTest, LevelDbSourceAndTheDeprecatedTransformFields) {
  const std::string db = MakeDb("ten_leveldb", 10, DbBackend::kLevelDb);
  // A V1-era layer: crop_size and scale inside data_param.
  caffe::LayerParameter layer = DataLayer(db, 3, "", "LEVELDB");
  layer.mutable_data_param()->set_crop_size(2);
  layer.mutable_data_param()->set_scale(2.0f);
  auto source = DatumBatchSource::OpenDataLayer(layer, caffe::TEST, BaseDir(), 1);
  ASSERT_TRUE(source.ok()) << source.status();
  EXPECT_EQ((*source)->data_dims(), (std::vector<int64_t>{3, 1, 2, 2}));
  Batch batch;
  ASSERT_TRUE((*source)->Next(&batch).ok());
  EXPECT_EQ(batch.labels, (std::vector<float>{0, 1, 2}));
  EXPECT_FLOAT_EQ(batch.data[4], 2.0f);  // record 1 (pixels 1), times 2
}

TEST(BatchSourceTest, SeededShuffleIsAPermutationPerEpochAndRepeats) {
  const std::string db = MakeDb("shuffle_lmdb", 10);
  auto a = DatumBatchSource::OpenDataLayer(DataLayer(db, 5), caffe::TRAIN, BaseDir(), 42, true);
  auto b = DatumBatchSource::OpenDataLayer(DataLayer(db, 5), caffe::TRAIN, BaseDir(), 42, true);
  auto c = DatumBatchSource::OpenDataLayer(DataLayer(db, 5), caffe::TRAIN, BaseDir(), 43, true);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  const std::vector<float> la = Labels(**a, 6), lb = Labels(**b, 6), lc = Labels(**c, 6);
  EXPECT_EQ(la, lb);
  EXPECT_NE(la, lc);
  for (int epoch = 0; epoch < 3; ++epoch) {
    std::set<float> seen(la.begin() + 10 * epoch, la.begin() + 10 * epoch + 10);
    EXPECT_EQ(seen.size(), 10u) << "epoch " << epoch;
  }
  EXPECT_NE(std::vector<float>(la.begin(), la.begin() + 10),
            std::vector<float>(la.begin() + 10, la.begin() + 20));  // a new order each epoch
}

TEST(BatchSourceTest, ShardsAreDisjointAndCoverTheData) {
  const std::string db = MakeDb("shards_lmdb", 12);
  for (bool shuffle : {false, true}) {
    std::vector<std::unique_ptr<DatumBatchSource>> shards;
    for (int k = 0; k < 3; ++k) {
      auto s = DatumBatchSource::OpenDataLayer(DataLayer(db, 2), caffe::TRAIN, BaseDir(), 5,
                                               shuffle, k, 3);
      ASSERT_TRUE(s.ok()) << s.status();
      shards.push_back(std::move(s).value());
    }
    std::multiset<float> all;
    for (auto& shard : shards) {
      for (float label : Labels(*shard, 2)) all.insert(label);  // 4 each, one epoch in all
    }
    std::multiset<float> expected;
    for (int i = 0; i < 12; ++i) expected.insert(i);
    EXPECT_EQ(all, expected) << "shuffle " << shuffle;
  }
  auto bad =
      DatumBatchSource::OpenDataLayer(DataLayer(db, 2), caffe::TRAIN, BaseDir(), 5, false, 3, 3);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(BatchSourceTest, RandSkipIsSeeded) {
  const std::string db = MakeDb("skip_lmdb", 50);
  caffe::LayerParameter layer = DataLayer(db, 1);
  layer.mutable_data_param()->set_rand_skip(40);
  std::set<float> firsts;
  for (uint64_t seed : {1, 2, 3, 4, 5}) {
    auto a = DatumBatchSource::OpenDataLayer(layer, caffe::TRAIN, BaseDir(), seed);
    auto b = DatumBatchSource::OpenDataLayer(layer, caffe::TRAIN, BaseDir(), seed);
    ASSERT_TRUE(a.ok() && b.ok());
    const std::vector<float> first = Labels(**a, 2);
    EXPECT_EQ(first, Labels(**b, 2));
    EXPECT_LT(first[0], 40);
    EXPECT_EQ(first[1], first[0] + 1);
    firsts.insert(first[0]);
  }
  EXPECT_GT(firsts.size(), 1u);
}

TEST(BatchSourceTest, SeededCropAndMirrorRepeat) {
  caffe::Datum d;
  d.set_channels(1);
  d.set_height(4);
  d.set_width(4);
  std::string pixels;
  for (int i = 0; i < 16; ++i) pixels.push_back(static_cast<char>(i));
  d.set_data(pixels);
  {
    DatumWriterOptions options;
    options.overwrite = true;
    auto writer = DatumWriter::Open(ScratchFile("crop_lmdb"), DbBackend::kLmdb, options);
    ASSERT_TRUE(writer.ok());
    for (int i = 0; i < 3; ++i) ASSERT_TRUE((*writer)->Put(DatumKey(i), d).ok());
    ASSERT_TRUE((*writer)->Close().ok());
  }
  const caffe::LayerParameter layer =
      DataLayer("crop_lmdb", 3, "transform_param { crop_size: 2 mirror: true }");
  auto a = DatumBatchSource::OpenDataLayer(layer, caffe::TRAIN, BaseDir(), 9);
  auto b = DatumBatchSource::OpenDataLayer(layer, caffe::TRAIN, BaseDir(), 9);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ((*a)->data_dims(), (std::vector<int64_t>{3, 1, 2, 2}));
  Batch x, y;
  std::set<std::vector<float>> windows;
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE((*a)->Next(&x).ok());
    ASSERT_TRUE((*b)->Next(&y).ok());
    EXPECT_EQ(x.data, y.data);
    for (int n = 0; n < 3; ++n) windows.emplace(x.data.begin() + 4 * n, x.data.begin() + 4 * n + 4);
  }
  EXPECT_GT(windows.size(), 4u);
}

TEST(BatchSourceTest, SetupErrorsNameTheLayerAndTheSource) {
  auto missing =
      DatumBatchSource::OpenDataLayer(DataLayer("x_lmdb", 4), caffe::TRAIN, BaseDir(), 1);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message().rfind("data layer 'mnist': source 'x_lmdb': ", 0), 0u)
      << missing.status();

  const std::string db = MakeDb("errors_lmdb", 3);
  auto zero = DatumBatchSource::OpenDataLayer(DataLayer(db, 0), caffe::TRAIN, BaseDir(), 1);
  EXPECT_NE(zero.status().message().find("batch_size 0"), std::string::npos);
  auto crop = DatumBatchSource::OpenDataLayer(DataLayer(db, 1, "transform_param { crop_size: 9 }"),
                                              caffe::TRAIN, BaseDir(), 1);
  EXPECT_NE(crop.status().message().find("record '00000000': crop_size 9"), std::string::npos)
      << crop.status();
  auto type = DatumBatchSource::OpenDataLayer(Layer("name: 'h5' type: 'HDF5Data'"), caffe::TRAIN,
                                              BaseDir(), 1);
  EXPECT_EQ(type.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(type.status().message().find("'HDF5Data'"), std::string::npos) << type.status();
  auto no_source =
      DatumBatchSource::OpenDataLayer(Layer("name: 'd' type: 'Data'"), caffe::TRAIN, BaseDir(), 1);
  EXPECT_NE(no_source.status().message().find("data_param.source is missing"), std::string::npos);
}

TEST(BatchSourceTest, ThreadErrorsComeOutOfNextAfterTheGoodBatches) {
  const std::string db = MakeDb("odd_lmdb", 6, DbBackend::kLmdb, /*odd_record=*/4);
  auto source = DatumBatchSource::OpenDataLayer(DataLayer(db, 2), caffe::TRAIN, BaseDir(), 1);
  ASSERT_TRUE(source.ok()) << source.status();
  Batch batch;
  EXPECT_TRUE((*source)->Next(&batch).ok());
  EXPECT_TRUE((*source)->Next(&batch).ok());
  for (int i = 0; i < 2; ++i) {  // and again on every later call
    absl::Status s = (*source)->Next(&batch);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message().rfind("data layer 'mnist': source 'odd_lmdb': record '00000004'", 0), 0u)
        << s;
  }
}

TEST(BatchSourceTest, DestructorStopsAFullPrefetchQueue) {
  const std::string db = MakeDb("stop_lmdb", 5);
  for (int i = 0; i < 20; ++i) {
    auto source = DatumBatchSource::OpenDataLayer(DataLayer(db, 3), caffe::TRAIN, BaseDir(), i);
    ASSERT_TRUE(source.ok());
    if (i % 2 == 1) Labels(**source, 1);
  }  // each destroyed with its thread blocked or mid-batch
}

}  // namespace
}  // namespace kiln
