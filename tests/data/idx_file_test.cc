// The IDX reader on small files the test writes: plain and gzip'd, and broken ones.
#include "data/idx_file.h"

#include <zlib.h>

#include <fstream>
#include <string>

#include "frontends/caffe/caffe_io.h"
#include "gtest/gtest.h"
#include "tests/util/scratch_file.h"

namespace kiln {
namespace {

std::string Header(int rank, std::initializer_list<uint32_t> dims) {
  std::string s = {0, 0, 0x08, static_cast<char>(rank)};
  for (uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) s.push_back(static_cast<char>(d >> shift));
  }
  return s;
}

std::string Write(const std::string& name, const std::string& bytes) {
  const std::string path = ScratchFile(name);
  EXPECT_TRUE(WriteFileBytes(path, bytes).ok());
  return path;
}

std::string Message(const std::string& path) {
  return std::string(ReadIdxFile(path).status().message());
}

TEST(IdxFileTest, ReadsImagesAndLabels) {
  std::string bytes = Header(3, {2, 2, 3});
  for (int i = 0; i < 12; ++i) bytes.push_back(static_cast<char>(i * 20));
  auto images = ReadIdxFile(Write("images.idx", bytes));
  ASSERT_TRUE(images.ok()) << images.status();
  EXPECT_EQ(images->dims, (std::vector<int64_t>{2, 2, 3}));
  ASSERT_EQ(images->data.size(), 12u);
  EXPECT_EQ(images->data[11], 220);

  auto labels = ReadIdxFile(Write("labels.idx", Header(1, {3}) + "\x01\x02\x09"));
  ASSERT_TRUE(labels.ok()) << labels.status();
  EXPECT_EQ(labels->dims, (std::vector<int64_t>{3}));
  EXPECT_EQ(labels->data, (std::vector<uint8_t>{1, 2, 9}));
}

TEST(IdxFileTest, WriteThenReadRoundTrips) {
  IdxArray array{{4, 5}, std::vector<uint8_t>(20)};
  for (int i = 0; i < 20; ++i) array.data[i] = static_cast<uint8_t>(255 - i);
  const std::string path = ScratchFile("round.idx");
  ASSERT_TRUE(WriteIdxFile(path, array).ok());
  auto back = ReadIdxFile(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->dims, array.dims);
  EXPECT_EQ(back->data, array.data);
  EXPECT_FALSE(WriteIdxFile(path, IdxArray{{4, 4}, array.data}).ok());
}

TEST(IdxFileTest, ReadsGzip) {
  std::string bytes = Header(2, {3, 4});
  for (int i = 0; i < 12; ++i) bytes.push_back(static_cast<char>(i));
  const std::string path = ScratchFile("small.idx.gz");
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, bytes.data(), bytes.size()), static_cast<int>(bytes.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
  auto array = ReadIdxFile(path);
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_EQ(array->dims, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(array->data[7], 7);

  // A gzip stream cut in the middle is reported, not read as a short array.
  const std::string gz = *ReadFileBytes(path);
  const std::string cut = Write("cut.idx.gz", gz.substr(0, gz.size() / 2));
  EXPECT_FALSE(ReadIdxFile(cut).ok());
}

TEST(IdxFileTest, ErrorsNameTheFileAndTheProblem) {
  const std::string missing = ScratchFile("missing.idx");
  EXPECT_EQ(ReadIdxFile(missing).status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(Message(missing).find("missing.idx"), std::string::npos);

  const std::string magic = Write("magic.idx", "\x12\x34\x08\x01" + std::string(8, 'x'));
  EXPECT_NE(Message(magic).find("bad magic"), std::string::npos) << Message(magic);
  EXPECT_NE(Message(magic).find("magic.idx"), std::string::npos);

  const std::string type = Write("type.idx", std::string("\0\0\x0d\x01", 4) + "\0\0\0\1abcd");
  EXPECT_EQ(ReadIdxFile(type).status().code(), absl::StatusCode::kUnimplemented);

  const std::string tiny = Write("tiny.idx", std::string("\0\0", 2));
  EXPECT_NE(Message(tiny).find("truncated"), std::string::npos) << Message(tiny);

  const std::string header = Write("header.idx", Header(3, {2, 2}));
  EXPECT_NE(Message(header).find("truncated header"), std::string::npos) << Message(header);

  const std::string data = Write("data.idx", Header(2, {2, 3}) + "abcde");
  EXPECT_NE(Message(data).find("truncated: the header declares 6 bytes"), std::string::npos)
      << Message(data);

  const std::string extra = Write("extra.idx", Header(1, {2}) + "abc");
  EXPECT_NE(Message(extra).find("past the 2 bytes"), std::string::npos) << Message(extra);

  const std::string huge =
      Write("huge.idx", Header(4, {0xffffffffu, 0xffffffffu, 0xffffffffu, 2}) + "ab");
  EXPECT_NE(Message(huge).find("overflow"), std::string::npos) << Message(huge);

  // A header claiming far more than the file holds fails without allocating the claim.
  const std::string liar = Write("liar.idx", Header(2, {1u << 20, 1u << 16}) + "abc");
  EXPECT_NE(Message(liar).find("truncated"), std::string::npos) << Message(liar);

  const std::string zero = Write("zero.idx", std::string("\0\0\x08\0", 4));
  EXPECT_NE(Message(zero).find("zero dimensions"), std::string::npos) << Message(zero);
}

// The real Fashion-MNIST files (apt-get install dataset-fashion-mnist), when present.
TEST(IdxFileTest, FashionMnistWhenInstalled) {
  const std::string dir = "/usr/share/datasets/fashion-mnist/";
  if (!std::ifstream(dir + "t10k-labels-idx1-ubyte.gz").good()) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
  auto images = ReadIdxFile(dir + "t10k-images-idx3-ubyte.gz");
  auto labels = ReadIdxFile(dir + "t10k-labels-idx1-ubyte.gz");
  ASSERT_TRUE(images.ok()) << images.status();
  ASSERT_TRUE(labels.ok()) << labels.status();
  EXPECT_EQ(images->dims, (std::vector<int64_t>{10000, 28, 28}));
  EXPECT_EQ(labels->dims, (std::vector<int64_t>{10000}));
  for (uint8_t label : labels->data) ASSERT_LT(label, 10);
}

}  // namespace
}  // namespace kiln
