// Caffe's LSTM and RNN layers as Kiln imports them
// (frontends/caffe/layers/recurrent_converters.cc), checked against plain loops written here from
// Caffe's own definitions (its LSTMUnit and the nets RecurrentLayer unrolls), never against
// dnn/rnn: gate blocks i, f, o, g, `cont` on both h_{t-1} and c_{t-1}, x flattened from axis 2, the
// exposed initial and final states, the state carried from run to run, the RNN's tanh output
// projection, the static input. Every net runs on the reference and the CPU backends. Also the
// layers' refusals and the .caffemodel round trip of their blobs in Caffe's order and shapes.
#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "frontends/caffe/caffe_io.h"
#include "frontends/caffe/caffe_model.h"
#include "frontends/caffe/caffemodel_writer.h"
#include "gtest/gtest.h"
#include "kernels/all_kernels.h"
#include "ops/all_ops.h"
#include "runtime/compiler.h"
#include "runtime/executor.h"
#include "tests/util/caffe_net_runner.h"

namespace kiln {
namespace {

using Dims = std::vector<int64_t>;
using Floats = std::vector<float>;

constexpr int64_t kT = 5, kN = 3, kH = 4, kI = 6;  // x is [T, N, 2, 3]: I = 6 from axis 2
const Dims kXDims = {kT, kN, 2, 3};

Floats Uniform(int64_t n, float lo, float hi, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(lo, hi);
  Floats v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

// ---- Caffe's definitions, in double -------------------------------------------------------

double Sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }

// out[r] = sum_k w[r, k] in[k] (+ b[r]): Caffe's InnerProduct, weight [rows, cols].
std::vector<double> Affine(const Floats& w, const double* in, int64_t rows, int64_t cols,
                           const Floats* b) {
  std::vector<double> out(rows);
  for (int64_t r = 0; r < rows; ++r) {
    double s = b != nullptr ? (*b)[r] : 0.0;
    for (int64_t k = 0; k < cols; ++k) s += double{w[r * cols + k]} * in[k];
    out[r] = s;
  }
  return out;
}

struct Sequence {
  Floats x;       // [T, N, I] row-major (x [T, N, 2, 3] flattened from axis 2)
  Floats cont;    // [T, N]
  Floats h0, c0;  // [N, H]; zeros unless the states are exposed
  int64_t I = kI;
  Floats xs;  // the static input [N, S], when S > 0
  int64_t S = 0;
};

// W_static x_static for sequence n (zeros without a static input): Caffe adds it to the gate
// (or hidden) pre-activations at every step, not gated by cont.
std::vector<double> StaticTerm(const Sequence& s, const std::vector<Floats>& blobs, int64_t n,
                               int64_t rows) {
  if (s.S == 0) return std::vector<double>(rows, 0.0);
  std::vector<double> xs(s.xs.begin() + n * s.S, s.xs.begin() + (n + 1) * s.S);
  return Affine(blobs[2], xs.data(), rows, s.S, nullptr);
}

struct Result {
  std::vector<double> top;     // [T, N, H]
  std::vector<double> hT, cT;  // [N, H]
};

// Caffe's LSTM: per step, h_conted = cont_t h_{t-1}; gates = W_xc x_t + b_c + W_hc h_conted in
// blocks i, f, o, g; c_t = cont_t f c_{t-1} + i g; h_t = o tanh(c_t). Blobs W_xc, b_c, W_hc, or
// W_xc, b_c, W_xc_static, W_hc with a static input (which adds W_xc_static x_static).
Result PlainLstm(const Sequence& s, const std::vector<Floats>& blobs) {
  const Floats &w_xc = blobs[0], &b_c = blobs[1], &w_hc = blobs[s.S > 0 ? 3 : 2];
  std::vector<double> h(s.h0.begin(), s.h0.end()), c(s.c0.begin(), s.c0.end());
  Result r;
  r.top.resize(kT * kN * kH);
  for (int64_t t = 0; t < kT; ++t) {
    for (int64_t n = 0; n < kN; ++n) {
      const double cont = s.cont[t * kN + n];
      std::vector<double> x(s.I), h_conted(kH);
      for (int64_t k = 0; k < s.I; ++k) x[k] = s.x[(t * kN + n) * s.I + k];
      for (int64_t j = 0; j < kH; ++j) h_conted[j] = cont * h[n * kH + j];
      const std::vector<double> gx = Affine(w_xc, x.data(), 4 * kH, s.I, &b_c);
      const std::vector<double> gh = Affine(w_hc, h_conted.data(), 4 * kH, kH, nullptr);
      const std::vector<double> gs = StaticTerm(s, blobs, n, 4 * kH);
      for (int64_t j = 0; j < kH; ++j) {
        auto pre = [&](int block) {
          return gx[block * kH + j] + gh[block * kH + j] + gs[block * kH + j];
        };
        const double i = Sigmoid(pre(0)), f = Sigmoid(pre(1)), o = Sigmoid(pre(2));
        const double g = std::tanh(pre(3));
        double& cell = c[n * kH + j];
        cell = cont * f * cell + i * g;
        r.top[(t * kN + n) * kH + j] = o * std::tanh(cell);
      }
      for (int64_t j = 0; j < kH; ++j) h[n * kH + j] = r.top[(t * kN + n) * kH + j];
    }
  }
  r.hT = h;
  r.cT = c;
  return r;
}

// Caffe's RNN: h_t = tanh(W_xh x_t + b_h + W_hh (cont_t h_{t-1})), top o_t = tanh(W_ho h_t +
// b_o). Blobs W_xh, b_h, W_hh, W_ho, b_o, with W_xh_static third when there is a static input.
Result PlainRnn(const Sequence& s, const std::vector<Floats>& blobs) {
  const int w = s.S > 0 ? 3 : 2;  // W_hh's blob
  std::vector<double> h(s.h0.begin(), s.h0.end());
  Result r;
  r.top.resize(kT * kN * kH);
  for (int64_t t = 0; t < kT; ++t) {
    for (int64_t n = 0; n < kN; ++n) {
      const double cont = s.cont[t * kN + n];
      std::vector<double> x(s.I), h_conted(kH);
      for (int64_t k = 0; k < s.I; ++k) x[k] = s.x[(t * kN + n) * s.I + k];
      for (int64_t j = 0; j < kH; ++j) h_conted[j] = cont * h[n * kH + j];
      const std::vector<double> ax = Affine(blobs[0], x.data(), kH, s.I, &blobs[1]);
      const std::vector<double> ah = Affine(blobs[w], h_conted.data(), kH, kH, nullptr);
      const std::vector<double> as = StaticTerm(s, blobs, n, kH);
      for (int64_t j = 0; j < kH; ++j) h[n * kH + j] = std::tanh(ax[j] + ah[j] + as[j]);
      const std::vector<double> o = Affine(blobs[w + 1], &h[n * kH], kH, kH, &blobs[w + 2]);
      for (int64_t j = 0; j < kH; ++j) r.top[(t * kN + n) * kH + j] = std::tanh(o[j]);
    }
  }
  r.hT = h;
  return r;
}

// ---- Nets, weights, runs ------------------------------------------------------------------

std::string ShapeText(const Dims& dims) {
  std::string s = "shape {";
  for (int64_t d : dims) absl::StrAppend(&s, " dim: ", d);
  return s + " }";
}

// An Input layer for `inputs` (blob, shape) and one `type` layer named `name` reading them all.
std::string NetText(const std::string& type, const std::string& name,
                    const std::vector<std::pair<std::string, Dims>>& inputs,
                    const std::vector<std::string>& tops, const std::string& recurrent_param) {
  std::string text = R"(layer { name: "input" type: "Input")";
  std::string shapes, bottoms;
  for (const auto& [blob, dims] : inputs) {
    absl::StrAppend(&text, " top: \"", blob, "\"");
    absl::StrAppend(&shapes, " ", ShapeText(dims));
    absl::StrAppend(&bottoms, " bottom: \"", blob, "\"");
  }
  absl::StrAppend(&text, " input_param {", shapes, " } }\n");
  absl::StrAppend(&text, "layer { name: \"", name, "\" type: \"", type, "\"", bottoms);
  for (const std::string& top : tops) absl::StrAppend(&text, " top: \"", top, "\"");
  absl::StrAppend(&text, " recurrent_param { ", recurrent_param, " } }\n");
  return text;
}

// The blob shapes Caffe gives the layer, in its order (S > 0: with a static input of S values).
std::vector<Dims> BlobShapes(bool lstm, int64_t I = kI, int64_t S = 0) {
  const int64_t rows = lstm ? 4 * kH : kH;
  std::vector<Dims> shapes = {{rows, I}, {rows}, {rows, kH}};
  if (!lstm) shapes.insert(shapes.end(), {{kH, kH}, {kH}});
  if (S > 0) shapes.insert(shapes.begin() + 2, Dims{rows, S});
  return shapes;
}

std::vector<Floats> RandomBlobs(bool lstm, std::mt19937& rng, int64_t I = kI, int64_t S = 0) {
  std::vector<Floats> blobs;
  for (const Dims& dims : BlobShapes(lstm, I, S)) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    blobs.push_back(Uniform(n, -0.8f, 0.8f, rng));
  }
  return blobs;
}

// A .caffemodel's NetParameter holding `blobs` for layer `name`.
caffe::NetParameter WeightsFor(const std::string& name, const std::vector<Dims>& shapes,
                               const std::vector<Floats>& blobs) {
  caffe::NetParameter net;
  caffe::LayerParameter* layer = net.add_layer();
  layer->set_name(name);
  for (size_t i = 0; i < blobs.size(); ++i) {
    caffe::BlobProto* blob = layer->add_blobs();
    for (int64_t d : shapes[i]) blob->mutable_shape()->add_dim(d);
    for (float v : blobs[i]) blob->add_data(v);
  }
  return net;
}

absl::StatusOr<CaffeModel> Import(const std::string& text, const caffe::NetParameter* weights) {
  return testing::ImportNetText(text, /*fill_seed=*/1, weights);
}

// Runs `model` on `backend` with the blobs in `feeds` bound to its inputs; every output by blob.
absl::StatusOr<std::map<std::string, Floats>> RunOn(const CaffeModel& model, BackendChoice backend,
                                                    const std::map<std::string, Floats>& feeds) {
  return testing::RunNet(model, feeds, backend);
}

void ExpectNear(const Floats& got, const std::vector<double>& want, double tol,
                const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], tol) << what << " element " << i;
  }
}

// Imports `text` with `blobs` as the weights of layer `name`, runs it on both host backends and
// checks each of `expected` (top blob -> values) on each, and the backends against each other.
void CheckNet(const std::string& text, const std::string& name, bool lstm,
              const std::vector<Floats>& blobs, const std::map<std::string, Floats>& feeds,
              const std::map<std::string, std::vector<double>>& expected, int64_t I = kI,
              int64_t S = 0) {
  const caffe::NetParameter weights = WeightsFor(name, BlobShapes(lstm, I, S), blobs);
  auto model = Import(text, &weights);
  ASSERT_TRUE(model.ok()) << model.status();
  const CaffeLayer* layer = model->FindLayer(name);
  ASSERT_NE(layer, nullptr);
  ASSERT_EQ(layer->params.size(), blobs.size());
  for (size_t i = 0; i < blobs.size(); ++i) {
    const CaffeParam& p = model->params[layer->params[i]];
    EXPECT_EQ(p.index, static_cast<int>(i));
    EXPECT_EQ(p.shape, BlobShapes(lstm, I, S)[i]) << "blob " << i;
    EXPECT_EQ(p.source, "weights") << "blob " << i;
  }
  std::vector<std::map<std::string, Floats>> runs;
  for (BackendChoice backend : {BackendChoice::kReference, BackendChoice::kCpu}) {
    auto out = RunOn(*model, backend, feeds);
    ASSERT_TRUE(out.ok()) << out.status();
    for (const auto& [blob, want] : expected) {
      ASSERT_TRUE(out->count(blob)) << "no output " << blob;
      ExpectNear(out->at(blob), want, 1e-5,
                 absl::StrCat(blob, backend == BackendChoice::kCpu ? " (cpu)" : " (reference)"));
    }
    runs.push_back(*out);
  }
  for (const auto& [blob, want] : expected) {
    const Floats &a = runs[0].at(blob), &b = runs[1].at(blob);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5) << blob << " " << i;
  }
}

// cont [T, N]: 0 at t = 0 (every row starts a sequence) unless `continue_first`, and restarts
// inside rows: row 1 at t = 2, row 2 at t = 3.
Floats Cont(bool continue_first = false) {
  Floats cont(kT * kN, 1.0f);
  for (int n = 0; n < kN; ++n) cont[n] = continue_first && n != 1 ? 1.0f : 0.0f;
  cont[2 * kN + 1] = 0.0f;
  cont[3 * kN + 2] = 0.0f;
  return cont;
}

// ---- LSTM ---------------------------------------------------------------------------------

TEST(CaffeRecurrentTest, LstmMatchesCaffesEquations) {
  std::mt19937 rng(11);
  const std::vector<Floats> blobs = RandomBlobs(true, rng);
  Sequence s;
  s.x = Uniform(kT * kN * kI, -1.5f, 1.5f, rng);
  s.cont = Cont();
  s.h0.assign(kN * kH, 0.0f);
  s.c0.assign(kN * kH, 0.0f);
  const Result want = PlainLstm(s, blobs);
  // The restarts matter: without them row 1's h at t = 2 is not the same.
  Sequence no_restart = s;
  no_restart.cont.assign(kT * kN, 1.0f);
  const Result other = PlainLstm(no_restart, blobs);
  double moved = 0;
  for (int j = 0; j < kH; ++j) {
    moved = std::max(moved,
                     std::fabs(want.top[(2 * kN + 1) * kH + j] - other.top[(2 * kN + 1) * kH + j]));
  }
  ASSERT_GT(moved, 1e-3);
  const std::string text =
      NetText("LSTM", "lstm", {{"x", kXDims}, {"cont", {kT, kN}}}, {"h"}, "num_output: 4");
  CheckNet(text, "lstm", true, blobs, {{"x", s.x}, {"cont", s.cont}}, {{"h", want.top}});
}

TEST(CaffeRecurrentTest, LstmExposesItsInitialAndFinalStates) {
  std::mt19937 rng(12);
  const std::vector<Floats> blobs = RandomBlobs(true, rng);
  Sequence s;
  s.x = Uniform(kT * kN * kI, -1.5f, 1.5f, rng);
  s.cont = Cont(/*continue_first=*/true);  // rows 0 and 2 continue from h_0, c_0
  s.h0 = Uniform(kN * kH, -0.9f, 0.9f, rng);
  s.c0 = Uniform(kN * kH, -2.0f, 2.0f, rng);
  const Result want = PlainLstm(s, blobs);
  const std::string text =
      NetText("LSTM", "lstm",
              {{"x", kXDims}, {"cont", {kT, kN}}, {"h_0", {1, kN, kH}}, {"c_0", {1, kN, kH}}},
              {"h", "h_T", "c_T"}, "num_output: 4 expose_hidden: true");
  auto model = Import(text, nullptr);
  ASSERT_TRUE(model.ok()) << model.status();
  std::map<std::string, Dims> outputs;
  for (const GraphOutput& o : model->graph->outputs()) outputs[o.name] = o.value.type().dims();
  EXPECT_EQ(outputs, (std::map<std::string, Dims>{
                         {"h", {kT, kN, kH}}, {"h_T", {1, kN, kH}}, {"c_T", {1, kN, kH}}}));
  CheckNet(text, "lstm", true, blobs, {{"x", s.x}, {"cont", s.cont}, {"h_0", s.h0}, {"c_0", s.c0}},
           {{"h", want.top}, {"h_T", want.hT}, {"c_T", want.cT}});
  // The last step's h is h_T.
  for (int64_t i = 0; i < kN * kH; ++i) EXPECT_EQ(want.hT[i], want.top[(kT - 1) * kN * kH + i]);
}

// Caffe takes x of exactly two axes [T, N] as one feature per step (I = 1).
TEST(CaffeRecurrentTest, TwoAxisInputIsOneFeaturePerStep) {
  for (bool lstm : {true, false}) {
    std::mt19937 rng(lstm ? 17 : 18);
    const std::vector<Floats> blobs = RandomBlobs(lstm, rng, /*I=*/1);
    Sequence s;
    s.I = 1;
    s.x = Uniform(kT * kN, -1.5f, 1.5f, rng);
    s.cont = Cont();
    s.h0.assign(kN * kH, 0.0f);
    s.c0.assign(kN * kH, 0.0f);
    const Result want = lstm ? PlainLstm(s, blobs) : PlainRnn(s, blobs);
    const std::string name = lstm ? "lstm" : "rnn";
    const std::string text = NetText(lstm ? "LSTM" : "RNN", name,
                                     {{"x", {kT, kN}}, {"cont", {kT, kN}}}, {"y"}, "num_output: 4");
    CheckNet(text, name, lstm, blobs, {{"x", s.x}, {"cont", s.cont}}, {{"y", want.top}}, 1);
  }
}

// ---- RNN ----------------------------------------------------------------------------------

TEST(CaffeRecurrentTest, RnnMatchesCaffesEquations) {
  std::mt19937 rng(13);
  const std::vector<Floats> blobs = RandomBlobs(false, rng);
  Sequence s;
  s.x = Uniform(kT * kN * kI, -1.5f, 1.5f, rng);
  s.cont = Cont();
  s.h0.assign(kN * kH, 0.0f);
  const Result want = PlainRnn(s, blobs);
  const std::string text =
      NetText("RNN", "rnn", {{"x", kXDims}, {"cont", {kT, kN}}}, {"o"}, "num_output: 4");
  CheckNet(text, "rnn", false, blobs, {{"x", s.x}, {"cont", s.cont}}, {{"o", want.top}});
}

TEST(CaffeRecurrentTest, RnnExposesItsInitialAndFinalState) {
  std::mt19937 rng(14);
  const std::vector<Floats> blobs = RandomBlobs(false, rng);
  Sequence s;
  s.x = Uniform(kT * kN * kI, -1.5f, 1.5f, rng);
  s.cont = Cont(/*continue_first=*/true);
  s.h0 = Uniform(kN * kH, -0.9f, 0.9f, rng);
  const Result want = PlainRnn(s, blobs);
  const std::string text =
      NetText("RNN", "rnn", {{"x", kXDims}, {"cont", {kT, kN}}, {"h_0", {1, kN, kH}}}, {"o", "h_T"},
              "num_output: 4 expose_hidden: true");
  // h_T is the hidden state h, not the projected top o.
  CheckNet(text, "rnn", false, blobs, {{"x", s.x}, {"cont", s.cont}, {"h_0", s.h0}},
           {{"o", want.top}, {"h_T", want.hT}});
}

// ---- State carried between runs -------------------------------------------------------------

// With CaffeImportOptions::carry_recurrent_state, a layer without expose_hidden gets its initial
// state as graph inputs and its final state as graph outputs (CaffeModel::carried_states); a
// second run fed the first one's final state is Caffe's second forward, which starts from the
// state its layer kept: row 0 continues (cont 1 at t = 0), row 1 restarts (cont 0).
TEST(CaffeRecurrentTest, CarriedStateContinuesTheLastRunAsCaffesLayerDoes) {
  for (const bool lstm : {true, false}) {
    SCOPED_TRACE(lstm ? "LSTM" : "RNN");
    std::mt19937 rng(lstm ? 15 : 16);
    const std::vector<Floats> blobs = RandomBlobs(lstm, rng);
    Sequence first, second;
    first.x = Uniform(kT * kN * kI, -1.5f, 1.5f, rng);
    first.cont = Cont();
    first.h0.assign(kN * kH, 0.0f);
    first.c0.assign(kN * kH, 0.0f);
    const Result a = lstm ? PlainLstm(first, blobs) : PlainRnn(first, blobs);
    second.x = Uniform(kT * kN * kI, -1.5f, 1.5f, rng);
    second.cont = Cont(/*continue_first=*/true);
    second.h0.assign(a.hT.begin(), a.hT.end());
    second.c0 = lstm ? Floats(a.cT.begin(), a.cT.end()) : Floats(kN * kH, 0.0f);
    const Result b = lstm ? PlainLstm(second, blobs) : PlainRnn(second, blobs);

    const std::string name = lstm ? "lstm" : "rnn";
    const std::string text = NetText(lstm ? "LSTM" : "RNN", name,
                                     {{"x", kXDims}, {"cont", {kT, kN}}}, {"top"}, "num_output: 4");
    const caffe::NetParameter weights = WeightsFor(name, BlobShapes(lstm), blobs);
    caffe::NetParameter net;
    ASSERT_TRUE(ParseTextMessage(text, "net", net).ok());
    CaffeImportOptions options;
    options.weights = &weights;
    options.carry_recurrent_state = true;
    auto model = ImportCaffeNet(net, options, DefaultOpRegistry());
    ASSERT_TRUE(model.ok()) << model.status();
    std::vector<std::pair<std::string, std::string>> carried = {
        {"carried/" + name + "/h", "carried/" + name + "/h_next"}};
    if (lstm) carried.push_back({"carried/lstm/c", "carried/lstm/c_next"});
    ASSERT_EQ(model->carried_states, carried);
    // Without the option the same net has no such inputs (every run starts from zeros).
    CaffeImportOptions plain = options;
    plain.carry_recurrent_state = false;
    auto stateless = ImportCaffeNet(net, plain, DefaultOpRegistry());
    ASSERT_TRUE(stateless.ok()) << stateless.status();
    EXPECT_TRUE(stateless->carried_states.empty());
    EXPECT_EQ(stateless->graph->Parameters().size(), 2u);

    for (BackendChoice backend : {BackendChoice::kReference, BackendChoice::kCpu}) {
      CompileOptions compile;
      compile.backend = backend;
      auto plan = Compile(*model->graph, DefaultKernelRegistry(), compile);
      ASSERT_TRUE(plan.ok()) << plan.status();
      auto context = ExecutionContext::Create(**plan, {/*poison_buffers=*/true});
      ASSERT_TRUE(context.ok()) << context.status();
      auto tensor = [](const Dims& dims, const Floats& values) {
        return *HostTensor::FromF32(*TensorType::Create(DataType::kF32, dims), values);
      };
      std::map<std::string, HostTensor> feed = {{"x", tensor(kXDims, first.x)},
                                                {"cont", tensor({kT, kN}, first.cont)}};
      for (const auto& [input, output] : carried) feed[input] = tensor({kN, kH}, Floats(kN * kH));
      auto run1 = (*context)->Run(feed);
      ASSERT_TRUE(run1.ok()) << run1.status();
      ExpectNear(run1->at("top").ToF32Vector(), a.top, 1e-5, "first run");
      feed["x"] = tensor(kXDims, second.x);
      feed["cont"] = tensor({kT, kN}, second.cont);
      for (const auto& [input, output] : carried) feed[input] = run1->at(output);
      auto run2 = (*context)->Run(feed);
      ASSERT_TRUE(run2.ok()) << run2.status();
      ExpectNear(run2->at("top").ToF32Vector(), b.top, 1e-5, "second run");
      ExpectNear(run2->at(carried[0].second).ToF32Vector(), b.hT, 1e-5, "its final h");
      // The carried state matters: from zeros, row 0 of the second run's first step differs.
      for (const auto& [input, output] : carried) feed[input] = tensor({kN, kH}, Floats(kN * kH));
      auto from_zeros = (*context)->Run(feed);
      ASSERT_TRUE(from_zeros.ok()) << from_zeros.status();
      EXPECT_GT(std::fabs(from_zeros->at("top").ToF32Vector()[0] - b.top[0]), 1e-3);
    }
  }
}

// ---- The static input ---------------------------------------------------------------------

// x_static [N, 5] (given as [N, 1, 5]: flattened from axis 1) adds W_static x_static at every
// step, with and without exposed states, for both layers.
TEST(CaffeRecurrentTest, StaticInputAddsItsProjectionAtEveryStep) {
  constexpr int64_t kS = 5;
  for (bool lstm : {true, false}) {
    for (bool expose : {false, true}) {
      std::mt19937 rng(lstm ? 21 + expose : 23 + expose);
      const std::vector<Floats> blobs = RandomBlobs(lstm, rng, kI, kS);
      Sequence s;
      s.x = Uniform(kT * kN * kI, -1.5f, 1.5f, rng);
      s.cont = Cont(/*continue_first=*/expose);
      s.S = kS;
      s.xs = Uniform(kN * kS, -1.5f, 1.5f, rng);
      s.h0 = expose ? Uniform(kN * kH, -0.9f, 0.9f, rng) : Floats(kN * kH, 0.0f);
      s.c0 = expose ? Uniform(kN * kH, -2.0f, 2.0f, rng) : Floats(kN * kH, 0.0f);
      const Result want = lstm ? PlainLstm(s, blobs) : PlainRnn(s, blobs);
      // The static term matters: without it the first output differs.
      Sequence without = s;
      without.S = 0;
      std::vector<Floats> plain_blobs = blobs;
      plain_blobs.erase(plain_blobs.begin() + 2);
      const Result other = lstm ? PlainLstm(without, plain_blobs) : PlainRnn(without, plain_blobs);
      ASSERT_GT(std::fabs(want.top[0] - other.top[0]), 1e-4);
      std::vector<std::pair<std::string, Dims>> inputs = {
          {"x", kXDims}, {"cont", {kT, kN}}, {"xs", {kN, 1, kS}}};
      std::map<std::string, Floats> feeds = {{"x", s.x}, {"cont", s.cont}, {"xs", s.xs}};
      std::vector<std::string> tops = {"y"};
      std::map<std::string, std::vector<double>> expected = {{"y", want.top}};
      if (expose) {
        inputs.push_back({"h_0", {1, kN, kH}});
        feeds["h_0"] = s.h0;
        tops.push_back("h_T");
        expected["h_T"] = want.hT;
        if (lstm) {
          inputs.push_back({"c_0", {1, kN, kH}});
          feeds["c_0"] = s.c0;
          tops.push_back("c_T");
          expected["c_T"] = want.cT;
        }
      }
      const std::string name = lstm ? "lstm" : "rnn";
      const std::string text =
          NetText(lstm ? "LSTM" : "RNN", name, inputs, tops,
                  expose ? "num_output: 4 expose_hidden: true" : "num_output: 4");
      SCOPED_TRACE(absl::StrCat(name, expose ? " exposed" : ""));
      CheckNet(text, name, lstm, blobs, feeds, expected, kI, kS);
    }
  }
}

// ---- Refusals -----------------------------------------------------------------------------

struct Refusal {
  const char* what;
  std::string type;
  std::vector<std::pair<std::string, Dims>> inputs;
  std::vector<std::string> tops;
  std::string param;
  absl::StatusCode code;
  std::vector<std::string> message_has;
};

TEST(CaffeRecurrentTest, MalformedLayersAreRefusedWithAStatus) {
  const Dims cont = {kT, kN}, state = {1, kN, kH};
  using Code = absl::StatusCode;
  const Refusal refusals[] = {
      {"x_static of another N",
       "LSTM",
       {{"x", kXDims}, {"cont", cont}, {"xs", {2, 5}}},
       {"h"},
       "num_output: 4",
       Code::kInvalidArgument,
       {"x_static", "N = 3"}},
      {"RNN x_static of another N, exposed states",
       "RNN",
       {{"x", kXDims}, {"cont", cont}, {"xs", {kN + 1, 5}}, {"h_0", state}},
       {"o", "h_T"},
       "num_output: 4 expose_hidden: true",
       Code::kInvalidArgument,
       {"x_static"}},
      {"cont of another N",
       "LSTM",
       {{"x", kXDims}, {"cont", {kT, 2}}},
       {"h"},
       "num_output: 4",
       Code::kInvalidArgument,
       {"cont", "[T, N] = [5, 3]"}},
      {"cont with a third axis",
       "RNN",
       {{"x", kXDims}, {"cont", {kT, kN, 1}}},
       {"o"},
       "num_output: 4",
       Code::kInvalidArgument,
       {"cont"}},
      {"num_output 0",
       "LSTM",
       {{"x", kXDims}, {"cont", cont}},
       {"h"},
       "num_output: 0",
       Code::kInvalidArgument,
       {"num_output"}},
      {"num_output missing",
       "RNN",
       {{"x", kXDims}, {"cont", cont}},
       {"o"},
       "",
       Code::kInvalidArgument,
       {"num_output"}},
      {"x of one axis",
       "LSTM",
       {{"x", {kT}}, {"cont", cont}},
       {"h"},
       "num_output: 4",
       Code::kInvalidArgument,
       {"at least 2 axes"}},
      {"two tops without expose_hidden",
       "LSTM",
       {{"x", kXDims}, {"cont", cont}},
       {"h", "h_T"},
       "num_output: 4",
       Code::kInvalidArgument,
       {"top(s), got 2"}},
      {"one top with expose_hidden",
       "LSTM",
       {{"x", kXDims}, {"cont", cont}, {"h_0", state}, {"c_0", state}},
       {"h"},
       "num_output: 4 expose_hidden: true",
       Code::kInvalidArgument,
       {"top(s), got 1"}},
      {"RNN three tops with expose_hidden",
       "RNN",
       {{"x", kXDims}, {"cont", cont}, {"h_0", state}},
       {"o", "h_T", "c_T"},
       "num_output: 4 expose_hidden: true",
       Code::kInvalidArgument,
       {"top(s), got 3"}},
      {"expose_hidden without the states",
       "LSTM",
       {{"x", kXDims}, {"cont", cont}},
       {"h", "h_T", "c_T"},
       "num_output: 4 expose_hidden: true",
       Code::kInvalidArgument,
       {"bottom(s), got 2"}},
      {"h_0 of another H",
       "LSTM",
       {{"x", kXDims}, {"cont", cont}, {"h_0", {1, kN, 5}}, {"c_0", state}},
       {"h", "h_T", "c_T"},
       "num_output: 4 expose_hidden: true",
       Code::kInvalidArgument,
       {"h_0", "[1, N, H]"}},
      {"h_0 without its leading 1",
       "RNN",
       {{"x", kXDims}, {"cont", cont}, {"h_0", {kN, kH}}},
       {"o", "h_T"},
       "num_output: 4 expose_hidden: true",
       Code::kInvalidArgument,
       {"h_0"}},
      {"c_0 of another N",
       "LSTM",
       {{"x", kXDims}, {"cont", cont}, {"h_0", state}, {"c_0", {1, 2, kH}}},
       {"h", "h_T", "c_T"},
       "num_output: 4 expose_hidden: true",
       Code::kInvalidArgument,
       {"c_0"}},
  };
  for (const Refusal& r : refusals) {
    const std::string name = r.type == "LSTM" ? "lstm" : "rnn";
    const std::string text = NetText(r.type, name, r.inputs, r.tops, r.param);
    auto model = Import(text, nullptr);
    ASSERT_FALSE(model.ok()) << r.what;
    EXPECT_EQ(model.status().code(), r.code) << r.what << ": " << model.status();
    const std::string message(model.status().message());
    EXPECT_NE(message.find(absl::StrCat("layer '", name, "' (", r.type, ")")), std::string::npos)
        << r.what << ": " << message;
    for (const std::string& part : r.message_has) {
      EXPECT_NE(message.find(part), std::string::npos) << r.what << ": " << message;
    }
  }
}

// ---- .caffemodel ---------------------------------------------------------------------------

// The blobs are written back unchanged, in Caffe's order and shapes (no gate permutation), and
// the written file imports into a net computing the same values.
TEST(CaffeRecurrentTest, BlobsRoundTripThroughACaffemodel) {
  for (bool lstm : {true, false}) {
    std::mt19937 rng(lstm ? 15 : 16);
    const std::vector<Floats> blobs = RandomBlobs(lstm, rng);
    const std::string name = lstm ? "lstm" : "rnn";
    const std::string text = NetText(lstm ? "LSTM" : "RNN", name,
                                     {{"x", kXDims}, {"cont", {kT, kN}}}, {"y"}, "num_output: 4");
    const caffe::NetParameter weights = WeightsFor(name, BlobShapes(lstm), blobs);
    auto model = Import(text, &weights);
    ASSERT_TRUE(model.ok()) << model.status();
    auto written = ModelToNetParameter(*model);
    ASSERT_TRUE(written.ok()) << written.status();
    const caffe::LayerParameter* layer = nullptr;
    for (const caffe::LayerParameter& l : written->layer()) {
      if (l.name() == name) layer = &l;
    }
    ASSERT_NE(layer, nullptr) << name;
    ASSERT_EQ(layer->blobs_size(), static_cast<int>(blobs.size())) << name;
    for (int i = 0; i < layer->blobs_size(); ++i) {
      const caffe::BlobProto& blob = layer->blobs(i);
      const Dims shape(blob.shape().dim().begin(), blob.shape().dim().end());
      EXPECT_EQ(shape, BlobShapes(lstm)[i]) << name << " blob " << i;
      ASSERT_EQ(blob.data_size(), static_cast<int>(blobs[i].size())) << name << " blob " << i;
      for (int k = 0; k < blob.data_size(); ++k) {
        EXPECT_EQ(blob.data(k), blobs[i][k]) << name << " blob " << i << " element " << k;
      }
    }
    // Bytes -> NetParameter -> import again: the same parameters, bit for bit.
    auto bytes = SerializeCaffemodel(*model);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    caffe::NetParameter reread;
    ASSERT_TRUE(ParseBinaryMessage(*bytes, "caffemodel", reread).ok());
    auto again = Import(text, &reread);
    ASSERT_TRUE(again.ok()) << again.status();
    const CaffeLayer* a = model->FindLayer(name);
    const CaffeLayer* b = again->FindLayer(name);
    ASSERT_TRUE(a && b);
    ASSERT_EQ(a->params.size(), b->params.size());
    for (size_t i = 0; i < a->params.size(); ++i) {
      EXPECT_EQ(ParamTensor(*model, model->params[a->params[i]]).ToF32Vector(),
                ParamTensor(*again, again->params[b->params[i]]).ToF32Vector());
    }
  }
}

}  // namespace
}  // namespace kiln
