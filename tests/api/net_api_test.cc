// pycaffe-style nets through the public API (kiln_net, kiln.hpp's Net) on the CPU: LeNet's
// forward equals the engine's, backward's blob and parameter diffs match finite differences,
// parameters written between passes are used, recurrent layers carry their state from forward to
// forward, save/copy_from round-trip, bad input is refused.
#include <cmath>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kiln/kiln.hpp"
#include "tests/util/caffe_files.h"
#include "tests/util/scratch_file.h"

namespace {

// tests/api/testdata/tiny_net.prototxt with `conv_outputs` convolution outputs.
std::string WriteTinyNet(const std::string& conv_outputs = "2") {
  std::ifstream in("tests/api/testdata/tiny_net.prototxt");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  text.replace(text.find("num_output: 2"), 13, "num_output: " + conv_outputs);
  const std::string path = kiln::ScratchFile("tiny_net_" + conv_outputs + ".prototxt");
  std::ofstream(path) << text;
  return path;
}

void Fill(float* data, size_t count, unsigned seed) {
  for (size_t i = 0; i < count; ++i) {
    seed = seed * 1664525u + 1013904223u;
    data[i] = static_cast<float>(seed >> 8) / 8388608.0f - 1.0f;
  }
}

std::map<std::string, kiln::BlobInfo> ByName(const kiln::Net& net) {
  std::map<std::string, kiln::BlobInfo> blobs;
  for (const kiln::BlobInfo& b : net.Blobs()) blobs[b.name] = b;
  return blobs;
}

kiln::CompileOptions Cpu() {
  kiln::CompileOptions options;
  options.device = "cpu";
  return options;
}

TEST(NetApiTest, LenetForwardEqualsTheEngine) {
  kiln::CompileOptions options = Cpu();
  options.batch = 3;
  auto net = kiln::Net::Create(kiln::CaffeFile("lenet.prototxt"),
                               kiln::CaffeFile("lenet_iter_10000.caffemodel"), false, options);
  ASSERT_TRUE(net.ok()) << net.status().ToString();
  auto blobs = ByName(*net);
  ASSERT_TRUE(blobs.count("data") && blobs.count("prob") && blobs.count("conv1"));
  ASSERT_EQ(blobs["data"].dims, (std::vector<int64_t>{3, 1, 28, 28}));
  for (size_t i = 0; i < blobs["data"].count; ++i) blobs["data"].data[i] = 0.5f;  // then fresh
  Fill(blobs["data"].data, blobs["data"].count, 11);
  for (size_t i = 0; i < blobs["prob"].count; ++i) blobs["prob"].data[i] = NAN;  // poisoned
  kiln::Status forward = net->Forward();
  ASSERT_TRUE(forward.ok()) << forward.ToString();
  EXPECT_EQ(net->Inputs(), std::vector<std::string>{"data"});
  EXPECT_EQ(net->Outputs(), std::vector<std::string>{"prob"});

  auto engine = kiln::Engine::FromCaffe(kiln::CaffeFile("lenet.prototxt"),
                                        kiln::CaffeFile("lenet_iter_10000.caffemodel"), options);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  auto context = engine->CreateContext();
  ASSERT_TRUE(context.ok());
  ASSERT_TRUE(context->SetInput("data", blobs["data"].data, blobs["data"].count * 4).ok());
  ASSERT_TRUE(context->Run().ok());
  auto prob = context->Output<float>("prob", 30);
  ASSERT_TRUE(prob.ok());
  double worst = 0, sum = 0;
  for (size_t i = 0; i < 30; ++i) {
    worst = std::fmax(worst, std::fabs(blobs["prob"].data[i] - (*prob)[i]));
    sum += blobs["prob"].data[i];
  }
  EXPECT_LT(worst, 1e-5);
  EXPECT_NEAR(sum, 3.0, 1e-4);  // three softmax rows
  // The parameters are the caffemodel's: conv1's 20x1x5x5 weights, not zeros.
  auto conv1 = net->Param(1, 0);
  ASSERT_TRUE(conv1.ok()) << conv1.status().ToString();
  EXPECT_EQ(conv1->dims, (std::vector<int64_t>{20, 1, 5, 5}));
  double norm = 0;
  for (size_t i = 0; i < conv1->count; ++i) norm += std::fabs(conv1->data[i]);
  EXPECT_GT(norm, 1.0);
}

TEST(NetApiTest, BackwardMatchesFiniteDifferences) {
  auto net = kiln::Net::Create(WriteTinyNet(), "", true, Cpu());
  ASSERT_TRUE(net.ok()) << net.status().ToString();
  auto blobs = ByName(*net);
  Fill(blobs["data"].data, blobs["data"].count, 3);
  Fill(blobs["target"].data, blobs["target"].count, 4);
  auto loss = [&]() {
    kiln::Status s = net->Forward();
    EXPECT_TRUE(s.ok()) << s.ToString();
    return static_cast<double>(blobs["loss"].data[0]);
  };
  loss();
  kiln::Status backward = net->Backward();
  ASSERT_TRUE(backward.ok()) << backward.ToString();
  EXPECT_EQ(blobs["loss"].diff[0], 1.0f);  // d loss / d loss = its loss_weight

  // (what, the value to move, its gradient as backward gave it)
  struct Check {
    std::string what;
    float* value;
    double analytic;
  };
  std::vector<Check> checks;
  auto layers = net->Layers();
  for (int l = 0; l < static_cast<int>(layers.size()); ++l) {
    for (int i = 0; i < layers[l].num_params; ++i) {
      auto p = net->Param(l, i);
      ASSERT_TRUE(p.ok());
      for (size_t k : {size_t{0}, p->count / 2, p->count - 1}) {
        checks.push_back({layers[l].name + "[" + std::to_string(i) + "] #" + std::to_string(k),
                          p->data + k, p->diff[k]});
      }
    }
  }
  ASSERT_EQ(checks.size(), 12u);  // conv and ip: weights and biases
  for (size_t k : {size_t{0}, size_t{37}, blobs["data"].count - 1}) {
    checks.push_back({"data #" + std::to_string(k), blobs["data"].data + k, blobs["data"].diff[k]});
  }
  const double eps = 1e-2;
  for (const Check& c : checks) {
    SCOPED_TRACE(c.what);
    float* x = c.value;
    const float saved = *x;
    *x = saved + static_cast<float>(eps);
    const double up = loss();
    *x = saved - static_cast<float>(eps);
    const double down = loss();
    *x = saved;
    const double numeric = (up - down) / (2 * eps);
    EXPECT_NEAR(c.analytic, numeric, 2e-2 * std::fmax(1.0, std::fabs(numeric)));
  }
}

TEST(NetApiTest, ParametersWrittenBetweenPassesAreUsedAndSaved) {
  auto net = kiln::Net::Create(WriteTinyNet(), "", false, Cpu());
  ASSERT_TRUE(net.ok()) << net.status().ToString();
  auto blobs = ByName(*net);
  Fill(blobs["data"].data, blobs["data"].count, 9);
  ASSERT_TRUE(net->Forward().ok());
  auto bias = net->Param(2, 1);  // conv's bias (layers: data, target, conv, ...)
  ASSERT_TRUE(bias.ok()) << bias.status().ToString();
  EXPECT_EQ(net->Layers()[2].name, "conv");
  // A large bias saturates tanh: every conv value becomes ~1.
  for (size_t i = 0; i < bias->count; ++i) bias->data[i] = 50.0f;
  ASSERT_TRUE(net->Forward().ok());
  for (size_t i = 0; i < blobs["conv"].count; ++i) EXPECT_NEAR(blobs["conv"].data[i], 1.0f, 1e-6);

  const std::string saved = kiln::ScratchFile("tiny_saved.caffemodel");
  std::remove(saved.c_str());
  ASSERT_TRUE(net->Save(saved).ok());
  kiln::Status again = net->Save(saved);
  EXPECT_EQ(again.code(), KILN_ALREADY_EXISTS) << again.ToString();
  EXPECT_TRUE(net->Save(saved, true).ok());
  auto other = kiln::Net::Create(WriteTinyNet(), "", false, Cpu());
  ASSERT_TRUE(other.ok());
  auto other_bias = other->Param(2, 1);
  EXPECT_NEAR(other_bias->data[0], 0.1f, 1e-7);
  ASSERT_TRUE(other->CopyFrom(saved).ok());
  EXPECT_EQ(other_bias->data[0], 50.0f);

  // Same layer names, other shapes: refused whole, nothing copied.
  auto wider = kiln::Net::Create(WriteTinyNet("3"), "", false, Cpu());
  ASSERT_TRUE(wider.ok()) << wider.status().ToString();
  kiln::Status mismatch = wider->CopyFrom(saved);
  EXPECT_FALSE(mismatch.ok());
  EXPECT_NE(mismatch.message().find("conv"), std::string::npos) << mismatch.message();
  EXPECT_NEAR(wider->Param(2, 1)->data[0], 0.1f, 1e-7);
}

// An LSTM net of `steps` steps (2 sequences, 2 features, 3 hidden, fillers seeded by layer name)
// with a Euclidean loss against "target"; `exposed`: expose_hidden, with h_0 and c_0 inputs.
std::string WriteLstmNet(int steps, bool exposed = false) {
  const std::string path = kiln::ScratchFile("lstm_net_" + std::to_string(steps) +
                                             (exposed ? "_exposed" : "") + ".prototxt");
  const std::string t = std::to_string(steps);
  std::ofstream out(path);
  out << "layer { name: \"in\" type: \"Input\" top: \"x\" top: \"cont\" top: \"target\""
      << (exposed ? " top: \"h_0\" top: \"c_0\"" : "") << "\n  input_param { shape { dim: " << t
      << " dim: 2 dim: 2 } shape { dim: " << t << " dim: 2 } shape { dim: " << t
      << " dim: 2 dim: 3 }"
      << (exposed ? " shape { dim: 1 dim: 2 dim: 3 } shape { dim: 1 dim: 2 dim: 3 }" : "")
      << " } }\n"
      << "layer { name: \"lstm\" type: \"LSTM\" bottom: \"x\" bottom: \"cont\""
      << (exposed ? " bottom: \"h_0\" bottom: \"c_0\" top: \"h\" top: \"h_T\" top: \"c_T\""
                  : " top: \"h\"")
      << "\n  recurrent_param { num_output: 3" << (exposed ? " expose_hidden: true" : "")
      << " weight_filler { type: \"uniform\" min: -0.7 max: 0.7 }"
      << " bias_filler { type: \"uniform\" min: -0.3 max: 0.3 } } }\n"
      << "layer { name: \"loss\" type: \"EuclideanLoss\" bottom: \"h\" bottom: \"target\""
      << " top: \"loss\" }\n";
  return path;
}

// As pycaffe's Net: an LSTM without expose_hidden starts each forward from the state the last
// one left where cont is 1, so two forwards of 3 steps equal one of 6, and each backward starts
// from the state its forward started from (as the same net with expose_hidden, fed that state);
// where cont is 0 a forward starts afresh.
TEST(NetApiTest, RecurrentLayersCarryTheirStateFromForwardToForward) {
  auto halves = kiln::Net::Create(WriteLstmNet(3), "", false, Cpu());
  auto whole = kiln::Net::Create(WriteLstmNet(6), "", false, Cpu());
  auto exposed = kiln::Net::Create(WriteLstmNet(3, true), "", false, Cpu());
  ASSERT_TRUE(halves.ok()) << halves.status().ToString();
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  ASSERT_TRUE(exposed.ok()) << exposed.status().ToString();
  auto h = ByName(*halves), w = ByName(*whole), e = ByName(*exposed);
  Fill(w["x"].data, w["x"].count, 5);
  Fill(w["target"].data, w["target"].count, 6);
  for (size_t i = 0; i < w["cont"].count; ++i) w["cont"].data[i] = i < 2 ? 0.0f : 1.0f;
  ASSERT_TRUE(whole->Forward().ok());
  std::vector<float> second_half;
  for (int pass = 0; pass < 2; ++pass) {
    for (const char* blob : {"x", "cont", "target"}) {
      const size_t n = h[blob].count;
      for (size_t i = 0; i < n; ++i) h[blob].data[i] = e[blob].data[i] = w[blob].data[pass * n + i];
    }
    // The exposed net is fed the state the last pass left (zeros before the first).
    for (const char* state : {"h_0", "c_0"}) {
      const std::string last = state[0] == 'h' ? "h_T" : "c_T";
      for (size_t i = 0; i < e[state].count; ++i) {
        e[state].data[i] = pass == 0 ? 0.0f : e[last].data[i];
      }
    }
    kiln::Status forward = halves->Forward();
    ASSERT_TRUE(forward.ok()) << forward.ToString();
    ASSERT_TRUE(exposed->Forward().ok());
    for (size_t i = 0; i < h["h"].count; ++i) {
      EXPECT_NEAR(h["h"].data[i], w["h"].data[pass * 18 + i], 1e-6) << "pass " << pass << " " << i;
      EXPECT_NEAR(h["h"].data[i], e["h"].data[i], 1e-6) << "pass " << pass << " " << i;
    }
    kiln::Status backward = halves->Backward();
    ASSERT_TRUE(backward.ok()) << backward.ToString();
    ASSERT_TRUE(exposed->Backward().ok());
    for (int blob = 0; blob < 3; ++blob) {
      auto mine = halves->Param(1, blob), theirs = exposed->Param(1, blob);
      ASSERT_TRUE(mine.ok() && theirs.ok());
      double largest = 0;
      for (size_t i = 0; i < mine->count; ++i) {
        EXPECT_NEAR(mine->diff[i], theirs->diff[i], 1e-6) << "pass " << pass << " blob " << blob;
        largest = std::fmax(largest, std::fabs(theirs->diff[i]));
      }
      EXPECT_GT(largest, 1e-4) << "blob " << blob;
    }
    if (pass == 1) second_half.assign(h["h"].data, h["h"].data + h["h"].count);
  }
  // cont 0 at the first step: the same inputs again start afresh, and the output differs.
  for (size_t i = 0; i < 2; ++i) h["cont"].data[i] = 0.0f;
  ASSERT_TRUE(halves->Forward().ok());
  EXPECT_GT(std::fabs(h["h"].data[0] - second_half[0]), 1e-4);
}

TEST(NetApiTest, BadInputIsAnErrorNamingIt) {
  auto missing = kiln::Net::Create("/nonexistent/net.prototxt", "", false, Cpu());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/net.prototxt"), std::string::npos)
      << missing.status().message();
  kiln::CompileOptions options = Cpu();
  options.batch = 2;
  auto lenet = kiln::Net::Create(kiln::CaffeFile("lenet.prototxt"),
                                 kiln::CaffeFile("lenet_iter_10000.caffemodel"), false, options);
  ASSERT_TRUE(lenet.ok()) << lenet.status().ToString();
  kiln::Status no_loss = lenet->Backward();
  EXPECT_EQ(no_loss.code(), KILN_FAILED_PRECONDITION) << no_loss.ToString();
  EXPECT_EQ(lenet->Param(0, 0).status().code(), KILN_OUT_OF_RANGE);
  EXPECT_EQ(lenet->Param(99, 0).status().code(), KILN_OUT_OF_RANGE);
  kiln::Status absent = lenet->CopyFrom("/nonexistent/w.caffemodel");
  EXPECT_NE(absent.message().find("/nonexistent/w.caffemodel"), std::string::npos)
      << absent.ToString();
  kiln_net* raw = nullptr;
  EXPECT_EQ(kiln_net_create(nullptr, nullptr, KILN_PHASE_TEST, nullptr, &raw),
            KILN_INVALID_ARGUMENT);
  EXPECT_EQ(kiln_net_create("x", nullptr, 7, nullptr, &raw), KILN_INVALID_ARGUMENT);
  EXPECT_EQ(kiln_net_forward(nullptr), KILN_INVALID_ARGUMENT);
}

}  // namespace
