// `kiln convert` end to end: IDX files in, a Datum database out that DatumBatchSource reads.
#include <fstream>
#include <string>
#include <vector>

#include "data/idx_file.h"
#include "frontends/caffe/data/datum_batch_source.h"
#include "frontends/caffe/data/datum_db.h"
#include "gtest/gtest.h"
#include "tests/util/scratch_file.h"
#include "tools/convert_command.h"

namespace kiln {
namespace {

int Convert(std::vector<std::string> args) {
  args.insert(args.begin(), {"kiln", "convert"});
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(&a[0]);
  return ConvertCommand(static_cast<int>(argv.size()), argv.data());
}

// Five 2x3 images whose pixels are all 10*i, labels 9-i.
void WriteSmallIdx(const std::string& images, const std::string& labels, int n = 5) {
  IdxArray im{{n, 2, 3}, {}}, lb{{n}, {}};
  for (int i = 0; i < n; ++i) {
    for (int p = 0; p < 6; ++p) im.data.push_back(static_cast<uint8_t>(10 * i));
    lb.data.push_back(static_cast<uint8_t>(9 - i));
  }
  ASSERT_TRUE(WriteIdxFile(images, im).ok());
  ASSERT_TRUE(WriteIdxFile(labels, lb).ok());
}

TEST(KilnConvertTest, WritesOneDatumPerImageInFileOrder) {
  const std::string images = ScratchFile("im.idx"), labels = ScratchFile("lb.idx");
  WriteSmallIdx(images, labels);
  for (const std::string backend : {"lmdb", "leveldb"}) {
    const std::string out = ScratchFile("small_" + backend);
    ASSERT_EQ(
        0, Convert({"--images", images, "--labels", labels, "--out", out, "--backend", backend}));
    // Closed before the overwrite below: LevelDB locks a database while it is open.
    std::unique_ptr<DatumReader> reader;
    {
      auto opened = DatumReader::Open(out, *ParseDbBackend(backend));
      ASSERT_TRUE(opened.ok()) << opened.status();
      reader = std::move(opened).value();
    }
    EXPECT_EQ(reader->Count(), 5);
    for (int i = 0; i < 5; ++i) {
      caffe::Datum d;
      std::string key;
      ASSERT_TRUE(reader->Read(&key, &d).ok());
      EXPECT_EQ(key, DatumKey(i));
      EXPECT_EQ(d.channels(), 1);
      EXPECT_EQ(d.height(), 2);
      EXPECT_EQ(d.width(), 3);
      EXPECT_EQ(d.data(), std::string(6, static_cast<char>(10 * i)));
      EXPECT_EQ(d.label(), 9 - i);
      EXPECT_FALSE(d.encoded());
    }
    reader.reset();
    // An existing output is kept unless --overwrite is given.
    EXPECT_EQ(
        1, Convert({"--images", images, "--labels", labels, "--out", out, "--backend", backend}));
    EXPECT_EQ(0, Convert({"--images", images, "--labels", labels, "--out", out, "--backend",
                          backend, "--overwrite"}));
  }
}

TEST(KilnConvertTest, RefusesMismatchedOrMissingInputs) {
  const std::string images = ScratchFile("im5.idx"), labels = ScratchFile("lb5.idx");
  WriteSmallIdx(images, labels);
  const std::string labels4 = ScratchFile("lb4.idx"), unused = ScratchFile("im4.idx");
  WriteSmallIdx(unused, labels4, 4);
  IdxConversion c{images, labels4, ScratchFile("mismatch_lmdb")};
  auto n = ConvertIdx(c);
  EXPECT_NE(n.status().message().find("hold 5 images but labels"), std::string::npos) << n.status();
  c.labels = images;  // 3-d "labels"
  EXPECT_NE(ConvertIdx(c).status().message().find("expected 1"), std::string::npos);
  EXPECT_EQ(1, Convert({"--images", images, "--out", ScratchFile("x_lmdb")}));
  EXPECT_EQ(1, Convert({"--images", images, "--labels", labels, "--out", ScratchFile("y_db"),
                        "--backend", "hdf5"}));
  EXPECT_EQ(1, Convert({"--images", ScratchFile("none.idx"), "--labels", labels, "--out",
                        ScratchFile("z_lmdb")}));
}

// The real Fashion-MNIST test set, when dataset-fashion-mnist is installed: converted and read
// back through a Data layer as the Trainer will.
TEST(KilnConvertTest, FashionMnistThroughADataLayer) {
  const std::string dir = "/usr/share/datasets/fashion-mnist/";
  if (!std::ifstream(dir + "t10k-images-idx3-ubyte.gz").good()) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
  const std::string out = ScratchFile("fashion_test_lmdb");
  ASSERT_EQ(0, Convert({"--images", dir + "t10k-images-idx3-ubyte.gz", "--labels",
                        dir + "t10k-labels-idx1-ubyte.gz", "--out", out, "--overwrite"}));
  auto labels = ReadIdxFile(dir + "t10k-labels-idx1-ubyte.gz");
  ASSERT_TRUE(labels.ok());
  caffe::LayerParameter layer;
  layer.set_name("fashion");
  layer.set_type("Data");
  layer.mutable_data_param()->set_source(out);
  layer.mutable_data_param()->set_backend(caffe::DataParameter::LMDB);
  layer.mutable_data_param()->set_batch_size(64);
  layer.mutable_transform_param()->set_scale(1.0f / 256);
  auto source = DatumBatchSource::OpenDataLayer(layer, caffe::TEST, "", 1);
  ASSERT_TRUE(source.ok()) << source.status();
  EXPECT_EQ((*source)->dataset_size(), 10000);
  EXPECT_EQ((*source)->data_dims(), (std::vector<int64_t>{64, 1, 28, 28}));
  Batch batch;
  for (int b = 0; b < 3; ++b) {
    ASSERT_TRUE((*source)->Next(&batch).ok());
    for (int i = 0; i < 64; ++i) ASSERT_EQ(batch.labels[i], labels->data[b * 64 + i]);
    for (float v : batch.data) ASSERT_TRUE(v >= 0.0f && v < 1.0f);
  }
}

}  // namespace
}  // namespace kiln
