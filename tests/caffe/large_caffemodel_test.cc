// A .caffemodel over 500 MB (one 134M-weight InnerProduct) writes, reads back past protobuf's
// old 64 MB default limit, and loads into its net with every value intact.
#include <string>

#include "frontends/caffe/caffe_io.h"
#include "frontends/caffe/caffe_model.h"
#include "frontends/caffe/caffemodel_writer.h"
#include "gtest/gtest.h"
#include "ops/all_ops.h"
#include "tests/util/scratch_file.h"

namespace kiln {
namespace {

TEST(LargeCaffemodelTest, FileOver500MegabytesRoundTrips) {
  caffe::NetParameter net;
  ASSERT_TRUE(ParseTextMessage("input: 'x' input_shape { dim: 1 dim: 16384 }\n"
                               "layer { name: 'fc' type: 'InnerProduct' bottom: 'x' top: 'y'\n"
                               "  inner_product_param { num_output: 8200 bias_term: false\n"
                               "    weight_filler { type: 'uniform' min: -1 max: 1 } } }",
                               "big", net)
                  .ok());
  CaffeImportOptions options;
  options.fill_seed = 11;
  std::string path = ScratchFile("big.caffemodel");
  float probes[3];
  {
    auto model = ImportCaffeNet(net, options, DefaultOpRegistry());
    ASSERT_TRUE(model.ok()) << model.status();
    const HostTensor& w = ParamTensor(*model, model->params[0]);
    probes[0] = w.GetFloat(0);
    probes[1] = w.GetFloat(70000000);
    probes[2] = w.GetFloat(16384LL * 8200 - 1);
    ASSERT_TRUE(WriteCaffemodel(*model, path).ok());
  }
  auto bytes = ReadFileBytes(path);
  ASSERT_TRUE(bytes.ok());
  EXPECT_GT(bytes->size(), 500u * 1000 * 1000);
  caffe::NetParameter weights;
  ASSERT_TRUE(ParseBinaryMessage(*bytes, path, weights).ok());
  bytes->clear();
  bytes->shrink_to_fit();
  options.weights = &weights;
  auto loaded = ImportCaffeNet(net, options, DefaultOpRegistry());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const HostTensor& w = ParamTensor(*loaded, loaded->params[0]);
  EXPECT_EQ(loaded->params[0].source, "weights");
  EXPECT_EQ(w.GetFloat(0), probes[0]);
  EXPECT_EQ(w.GetFloat(70000000), probes[1]);
  EXPECT_EQ(w.GetFloat(16384LL * 8200 - 1), probes[2]);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace kiln
