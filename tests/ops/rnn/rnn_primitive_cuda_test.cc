// The CUDA RNN primitives (dnn/cuda/rnn/rnn.h) against the CPU reference: every cell, one and
// two directions, stacked layers, both layouts, ragged lengths, cont markers, bias modes and
// dropout, in f32 (strict and TF32), f16 and bf16, with fresh random inputs and every output
// poisoned with NaN first; dw accumulates onto what it held; two runs are bitwise equal.
// Skipped where no CUDA device is usable.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/dtype.h"
#include "dnn/cuda/dnn_handle.h"
#include "dnn/cuda/rnn/rnn.h"
#include "dnn/cuda/rnn/rnn_plan.h"
#include "dnn/rnn/rnn_reference.h"
#include "gtest/gtest.h"

namespace kiln {
namespace dnn {
namespace {

bool HaveGpu() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    return false;
  }
  return true;
}

double RoundTo(DataType dt, double v) {
  const float f = static_cast<float>(v);
  if (dt == DataType::kF16) return HalfToFloat(FloatToHalf(f));
  if (dt == DataType::kBF16) return BFloat16ToFloat(FloatToBFloat16(f));
  return f;
}

// A device buffer of `dt` elements mirroring a host vector of doubles.
class DeviceArray {
 public:
  DeviceArray(DataType dt, size_t count) : dt_(dt), count_(count) {
    EXPECT_EQ(cudaMalloc(&ptr_, std::max<size_t>(1, count) * DataTypeSize(dt)), cudaSuccess);
  }
  ~DeviceArray() { cudaFree(ptr_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  void* get() { return ptr_; }
  void Upload(const std::vector<double>& v) {
    std::vector<char> bytes(count_ * DataTypeSize(dt_));
    for (size_t i = 0; i < count_; ++i) {
      const float f = static_cast<float>(v[i]);
      if (dt_ == DataType::kF32) {
        std::memcpy(&bytes[i * 4], &f, 4);
      } else {
        const uint16_t h = dt_ == DataType::kF16 ? FloatToHalf(f) : FloatToBFloat16(f);
        std::memcpy(&bytes[i * 2], &h, 2);
      }
    }
    EXPECT_EQ(cudaMemcpy(ptr_, bytes.data(), bytes.size(), cudaMemcpyHostToDevice), cudaSuccess);
  }
  void Poison() { Upload(std::vector<double>(count_, std::numeric_limits<double>::quiet_NaN())); }
  std::vector<double> Download() const {
    std::vector<char> bytes(count_ * DataTypeSize(dt_));
    EXPECT_EQ(cudaMemcpy(bytes.data(), ptr_, bytes.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    std::vector<double> v(count_);
    for (size_t i = 0; i < count_; ++i) {
      if (dt_ == DataType::kF32) {
        float f;
        std::memcpy(&f, &bytes[i * 4], 4);
        v[i] = f;
      } else {
        uint16_t h;
        std::memcpy(&h, &bytes[i * 2], 2);
        v[i] = dt_ == DataType::kF16 ? HalfToFloat(h) : BFloat16ToFloat(h);
      }
    }
    return v;
  }
  std::vector<char> Bytes() const {
    std::vector<char> bytes(count_ * DataTypeSize(dt_));
    EXPECT_EQ(cudaMemcpy(bytes.data(), ptr_, bytes.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    return bytes;
  }

 private:
  DataType dt_;
  size_t count_;
  void* ptr_ = nullptr;
};

std::vector<double> Random(std::mt19937& rng, size_t n, double scale, DataType dt) {
  std::uniform_real_distribution<double> u(-scale, scale);
  std::vector<double> v(n);
  for (double& e : v) e = RoundTo(dt, u(rng));
  return v;
}

// |got - want| <= tol (max |want| + 0.1), element by element; NaN fails.
void ExpectClose(const std::vector<double>& got, const std::vector<double>& want, double tol,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 0.1;
  for (double w : want) scale = std::max(scale, std::abs(w));
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::abs(got[i] - want[i]);
    if (!(err <= worst)) worst = err, at = i;  // NaN wins
  }
  EXPECT_LE(worst, tol * scale) << what << ": worst at " << at << " got " << got[at] << " want "
                                << want[at] << " (scale " << scale << ")";
}

struct Case {
  RnnCell cell;
  int64_t layers;
  bool bidirectional;
  RnnLayout layout;
  RnnBias bias;
  double dropout;
  bool ragged, cont;
  int64_t T, N, I, H;
  bool caffe_order = false;  // LSTM gates i f o g
  bool separate = false;     // parameters and gradients through RnnLayerParams / RnnLayerGrads
};

struct Precision {
  DataType dtype;
  MathMode math;
  double tol;
  const char* name;
};

class RnnCudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
    auto h = Handle::Create();
    ASSERT_TRUE(h.ok()) << h.status();
    handle_ = std::move(*h);
  }
  void Run(const Case& c, const Precision& prec);
  std::unique_ptr<Handle> handle_;
  std::mt19937 rng_{2026};
};

void RnnCudaTest::Run(const Case& c, const Precision& prec) {
  const DataType dt = prec.dtype;
  auto rnn_or =
      RnnDescriptor::Create(c.cell, c.I, c.H, c.layers, c.bidirectional, c.bias, c.dropout, 99);
  ASSERT_TRUE(rnn_or.ok()) << rnn_or.status();
  RnnDescriptor rnn = *rnn_or;
  if (c.caffe_order) rnn.gate_order = RnnGateOrder::kIfog;
  std::vector<int32_t> len;
  if (c.ragged) {
    std::uniform_int_distribution<int> pick(0, static_cast<int>(c.T));
    for (int64_t n = 0; n < c.N; ++n)
      len.push_back(n == 0 ? static_cast<int32_t>(c.T) : pick(rng_));
  }
  RnnProblem p;
  p.rnn = rnn;
  p.dtype = dt;
  p.math = prec.math;
  p.x = *RnnSequences::Create(c.layout, c.T, c.N, c.I, len);
  p.y = *RnnSequences::Create(c.layout, c.T, c.N, rnn.directions() * c.H, len);
  const std::string what =
      absl::StrCat(rnn.ToString(), " ", p.x.ToString(), " T", c.T, " N", c.N,
                   c.cont ? " cont " : " ", c.separate ? "separate " : "", prec.name);
  const bool lstm = c.cell == RnnCell::kLstm;
  const double wscale = 1 / std::sqrt(static_cast<double>(c.H));
  const size_t states = RnnStateCount(rnn, c.N);
  const std::vector<double> x = Random(rng_, p.x.elements(), 1, dt);
  const std::vector<double> w = Random(rng_, RnnWeightCount(rnn), wscale, dt);
  const std::vector<double> hx = Random(rng_, states, 0.5, dt), cx = Random(rng_, states, 0.5, dt);
  const std::vector<double> dy = Random(rng_, p.y.elements(), 1, dt);
  const std::vector<double> dhy = Random(rng_, states, 1, dt), dcy = Random(rng_, states, 1, dt);
  const std::vector<double> dw0 = Random(rng_, w.size(), 0.5, dt);
  std::vector<double> cont;
  if (c.cont) {
    cont.assign(c.T * c.N, 1);
    for (int64_t i = 0; i < c.T * c.N; i += 5) cont[i] = 0;
  }

  // The reference.
  std::vector<double> y_ref(p.y.elements()), hy_ref(states), cy_ref(states);
  ASSERT_TRUE(reference::RnnForward(rnn, true, p.x, x.data(), p.y, y_ref.data(), hx.data(),
                                    lstm ? cx.data() : nullptr, w.data(),
                                    c.cont ? cont.data() : nullptr, hy_ref.data(),
                                    lstm ? cy_ref.data() : nullptr)
                  .ok());
  std::vector<double> dx_ref(x.size()), dhx_ref(states), dcx_ref(states), dw_ref = dw0;
  ASSERT_TRUE(reference::RnnBackward(
                  rnn, p.x, x.data(), p.y, dy.data(), hx.data(), lstm ? cx.data() : nullptr,
                  w.data(), c.cont ? cont.data() : nullptr, dhy.data(), lstm ? dcy.data() : nullptr,
                  dx_ref.data(), dhx_ref.data(), lstm ? dcx_ref.data() : nullptr, dw_ref.data())
                  .ok());

  // The GPU.
  auto sizes = RnnGetBufferSizes(p);
  ASSERT_TRUE(sizes.ok()) << sizes.status();
  DeviceArray d_x(dt, x.size()), d_y(dt, y_ref.size()), d_hx(dt, states), d_cx(dt, states),
      d_hy(dt, states), d_cy(dt, states), d_w(dt, w.size()), d_dy(dt, dy.size()), d_dhy(dt, states),
      d_dcy(dt, states), d_dx(dt, x.size()), d_dhx(dt, states), d_dcx(dt, states),
      d_dw(dt, w.size()), d_cont(dt, cont.size());
  DeviceArray ws(DataType::kU8, sizes->workspace), reserve(DataType::kU8, sizes->reserve);
  d_x.Upload(x), d_hx.Upload(hx), d_cx.Upload(cx), d_w.Upload(w), d_dy.Upload(dy);
  d_dhy.Upload(dhy), d_dcy.Upload(dcy), d_dw.Upload(dw0);
  if (c.cont) d_cont.Upload(cont);
  d_y.Poison(), d_hy.Poison(), d_cy.Poison(), d_dx.Poison(), d_dhx.Poison(), d_dcx.Poison();
  RnnTensors t;
  t.x = d_x.get(), t.y = d_y.get(), t.hx = d_hx.get(), t.cx = lstm ? d_cx.get() : nullptr;
  t.hy = d_hy.get(), t.cy = lstm ? d_cy.get() : nullptr, t.w = d_w.get();
  t.cont = c.cont ? d_cont.get() : nullptr;
  t.dy = d_dy.get(), t.dhy = d_dhy.get(), t.dcy = lstm ? d_dcy.get() : nullptr;
  t.dx = d_dx.get(), t.dhx = d_dhx.get(), t.dcx = lstm ? d_dcx.get() : nullptr, t.dw = d_dw.get();
  std::vector<RnnLayerParams> params;
  std::vector<RnnLayerGrads> grads;
  if (c.separate) {  // the same buffers, reached through per-layer pointers
    for (int64_t l = 0; l < rnn.layers; ++l) {
      for (int d = 0; d < rnn.directions(); ++d) {
        const RnnWeightOffsets o = RnnLayerWeights(rnn, l, d);
        const size_t e = DataTypeSize(dt);
        char* w_base = static_cast<char*>(d_w.get());
        char* g_base = static_cast<char*>(d_dw.get());
        RnnLayerParams q;
        RnnLayerGrads g;
        q.w_ih = w_base + o.w_ih * e, g.w_ih = g_base + o.w_ih * e;
        q.w_hh = w_base + o.w_hh * e, g.w_hh = g_base + o.w_hh * e;
        if (o.b_ih >= 0) q.b_ih = w_base + o.b_ih * e, g.b_ih = g_base + o.b_ih * e;
        if (o.b_hh >= 0) q.b_hh = w_base + o.b_hh * e, g.b_hh = g_base + o.b_hh * e;
        params.push_back(q);
        grads.push_back(g);
      }
    }
    t.w = nullptr, t.dw = nullptr, t.params = params.data(), t.grads = grads.data();
  }
  t.workspace = ws.get(), t.workspace_bytes = sizes->workspace;
  t.reserve = reserve.get(), t.reserve_bytes = sizes->reserve;
  ASSERT_TRUE(RnnForward(*handle_, p, RnnForwardMode::kTraining, t).ok()) << what;
  ASSERT_TRUE(RnnBackwardData(*handle_, p, t).ok()) << what;
  ASSERT_TRUE(RnnBackwardWeights(*handle_, p, t).ok()) << what;
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
  const double tol = prec.tol * (1 + 0.5 * (c.layers - 1));
  ExpectClose(d_y.Download(), y_ref, tol, what + " y");
  ExpectClose(d_hy.Download(), hy_ref, tol, what + " hy");
  if (lstm) ExpectClose(d_cy.Download(), cy_ref, tol, what + " cy");
  ExpectClose(d_dx.Download(), dx_ref, 2 * tol, what + " dx");
  ExpectClose(d_dhx.Download(), dhx_ref, 2 * tol, what + " dhx");
  if (lstm) ExpectClose(d_dcx.Download(), dcx_ref, 2 * tol, what + " dcx");
  ExpectClose(d_dw.Download(), dw_ref, 2 * tol, what + " dw");

  // Inference gives training's y when there is no dropout; a second run is bitwise equal.
  const std::vector<char> y_bytes = d_y.Bytes(), dx_bytes = d_dx.Bytes();
  if (c.dropout == 0) {
    d_y.Poison();
    ASSERT_TRUE(RnnForward(*handle_, p, RnnForwardMode::kInference, t).ok()) << what;
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(d_y.Bytes(), y_bytes) << what << " inference";
  }
  d_y.Poison(), d_dx.Poison();
  ASSERT_TRUE(RnnForward(*handle_, p, RnnForwardMode::kTraining, t).ok()) << what;
  ASSERT_TRUE(RnnBackwardData(*handle_, p, t).ok()) << what;
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(d_y.Bytes(), y_bytes) << what << " rerun";
  EXPECT_EQ(d_dx.Bytes(), dx_bytes) << what << " rerun";
}

const Precision kPrecisions[] = {
    {DataType::kF32, MathMode::kFp32, 2e-5, "f32"},
    {DataType::kF32, MathMode::kTf32, 1.5e-2, "tf32"},
    {DataType::kF16, MathMode::kFp32, 1.5e-2, "f16"},
    {DataType::kBF16, MathMode::kFp32, 8e-2, "bf16"},
};

TEST_F(RnnCudaTest, EveryCellMatchesTheReference) {
  using C = RnnCell;
  using B = RnnBias;
  const RnnLayout S = RnnLayout::kSequenceMajor, Bm = RnnLayout::kBatchMajor;
  const std::vector<Case> cases = {
      {C::kRnnTanh, 1, false, S, B::kDouble, 0, false, false, 6, 5, 7, 9},
      {C::kRnnRelu, 2, true, Bm, B::kDouble, 0, true, false, 5, 4, 6, 8},
      {C::kLstm, 1, false, S, B::kDouble, 0, false, false, 7, 3, 5, 16},
      {C::kLstm, 1, false, S, B::kInputOnly, 0, true, true, 8, 6, 4, 12, true, true},
      {C::kLstm, 2, true, S, B::kDouble, 0, true, false, 6, 5, 8, 10},
      {C::kLstm, 3, false, Bm, B::kNone, 0.4, true, false, 5, 4, 6, 8},
      {C::kGru, 1, false, S, B::kDouble, 0, true, true, 7, 4, 5, 11},
      {C::kGru, 2, true, Bm, B::kInputOnly, 0.25, true, false, 6, 3, 7, 9, false, true},
      {C::kLstm, 2, true, S, B::kDouble, 0, true, false, 5, 4, 6, 8, true, false},
      {C::kGru, 2, false, S, B::kDouble, 0, false, false, 5, 6, 4, 13},
      // Wider: many blocks per step, more than one warp per sequence.
      {C::kLstm, 2, true, S, B::kDouble, 0, true, false, 12, 16, 64, 128},
      {C::kGru, 1, false, Bm, B::kDouble, 0, true, false, 10, 16, 48, 96},
  };
  for (const Case& c : cases) {
    for (const Precision& prec : kPrecisions) Run(c, prec);
  }
}

// A plan gives the free functions' bits: direct on its first call, direct on its own stream and
// recorded on the second, a graph launch from the third (on the handle's default stream, which
// cannot itself be captured); it follows new tensors (a re-recorded graph) and uploads ragged
// lengths before every launch.
TEST_F(RnnCudaTest, PlanReplaysGraphsWithTheDirectCallsResults) {
  const DataType dt = DataType::kF16;
  RnnProblem p;
  p.rnn = *RnnDescriptor::Create(RnnCell::kLstm, 8, 16, 2, true);
  p.dtype = dt;
  p.x = *RnnSequences::Create(RnnLayout::kSequenceMajor, 9, 5, 8, {9, 3, 0, 7, 5});
  p.y = *RnnSequences::Create(RnnLayout::kSequenceMajor, 9, 5, 32, {9, 3, 0, 7, 5});
  auto plan = RnnPlan::Create(p);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const RnnBufferSizes sizes = (*plan)->sizes();
  const size_t states = RnnStateCount(p.rnn, 5), weights = RnnWeightCount(p.rnn);
  DeviceArray x(dt, p.x.elements()), y(dt, p.y.elements()), y2(dt, p.y.elements()),
      dy(dt, p.y.elements()), dx(dt, p.x.elements()), hy(dt, states), w(dt, weights),
      dw(dt, weights), ws(DataType::kU8, sizes.workspace), reserve(DataType::kU8, sizes.reserve);
  x.Upload(Random(rng_, p.x.elements(), 1, dt));
  dy.Upload(Random(rng_, p.y.elements(), 1, dt));
  w.Upload(Random(rng_, weights, 0.25, dt));
  RnnTensors t;
  t.x = x.get(), t.y = y.get(), t.hy = hy.get(), t.w = w.get(), t.dy = dy.get(), t.dx = dx.get();
  t.dw = dw.get(), t.workspace = ws.get(), t.workspace_bytes = sizes.workspace;
  t.reserve = reserve.get(), t.reserve_bytes = sizes.reserve;
  auto step = [&](RnnPlan* with) {
    dw.Upload(std::vector<double>(weights, 0));
    y.Poison(), dx.Poison(), hy.Poison();
    if (with == nullptr) {
      EXPECT_TRUE(RnnForward(*handle_, p, RnnForwardMode::kTraining, t).ok());
      EXPECT_TRUE(RnnBackwardData(*handle_, p, t).ok());
      EXPECT_TRUE(RnnBackwardWeights(*handle_, p, t).ok());
    } else {
      EXPECT_TRUE(with->Forward(*handle_, RnnForwardMode::kTraining, t).ok());
      EXPECT_TRUE(with->BackwardData(*handle_, t).ok());
      EXPECT_TRUE(with->BackwardWeights(*handle_, t).ok());
    }
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<char> all = y.Bytes();
    for (const DeviceArray* a : {&dx, &hy, &dw}) {
      const std::vector<char> b = a->Bytes();
      all.insert(all.end(), b.begin(), b.end());
    }
    return all;
  };
  const std::vector<char> direct = step(nullptr);
  for (int call = 0; call < 4; ++call) EXPECT_EQ(step(plan->get()), direct) << "call " << call;
  EXPECT_FALSE((*plan)->capture_disabled());
  EXPECT_EQ((*plan)->graph_launches(), 3 * 2);  // calls 3 and 4 of each of the three kinds
  // New output tensors: direct once, then a re-recorded graph writing to them.
  t.y = y2.get();
  for (int call = 0; call < 3; ++call) {
    y2.Poison();
    ASSERT_TRUE((*plan)->Forward(*handle_, RnnForwardMode::kInference, t).ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<char> got = y2.Bytes();
    EXPECT_EQ(got, std::vector<char>(direct.begin(), direct.begin() + got.size()))
        << "inference call " << call;
  }
  EXPECT_EQ((*plan)->graph_launches(), 3 * 2 + 1);
}

TEST_F(RnnCudaTest, BadCallsAreRefused) {
  RnnProblem p;
  p.rnn = *RnnDescriptor::Create(RnnCell::kLstm, 4, 8);
  p.x = *RnnSequences::Create(RnnLayout::kSequenceMajor, 3, 2, 4);
  p.y = *RnnSequences::Create(RnnLayout::kSequenceMajor, 3, 2, 8);
  auto sizes = RnnGetBufferSizes(p);
  ASSERT_TRUE(sizes.ok()) << sizes.status();
  RnnTensors t;  // no buffers at all
  absl::Status s = RnnForward(*handle_, p, RnnForwardMode::kTraining, t);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  p.dtype = DataType::kI32;
  EXPECT_EQ(RnnGetBufferSizes(p).status().code(), absl::StatusCode::kInvalidArgument);
  p.dtype = DataType::kF32;
  p.y = *RnnSequences::Create(RnnLayout::kSequenceMajor, 3, 2, 7);
  s = RnnGetBufferSizes(p).status();
  EXPECT_NE(s.message().find("features"), std::string::npos) << s;
}

}  // namespace
}  // namespace dnn
}  // namespace kiln
