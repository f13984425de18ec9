// The reference runs each sequence of the batch on its own (they never interact), one step at a
// time, keeping every step's gates and states for the backward pass, which replays the same
// forward first: slow, plain and easy to check against the equations in rnn_descriptor.h.
#include "dnn/rnn/rnn_reference.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/dropout_mask.h"

namespace kiln {
namespace dnn {
namespace reference {

namespace {

double Sigmoid(double v) { return 1 / (1 + std::exp(-v)); }

// One step of one sequence in one (layer, direction): what backward needs.
struct Step {
  int64_t t = 0;
  std::vector<double> x;       // the layer's input at t
  std::vector<double> h_prev;  // the previous h times cont
  std::vector<double> c_prev;  // LSTM: the previous c times cont
  std::vector<double> gates;   // activated gates, gates() * hidden (GRU: r, z, n)
  std::vector<double> hn;      // GRU: W_hn h_prev + b_hn
  std::vector<double> c, h;    // the new states
};

// The parameters of one (layer, direction), as pointers into w (bias pointers null when absent).
struct Params {
  const double *w_ih, *w_hh, *b_ih, *b_hh;
  int64_t in;
};

Params ParamsOf(const RnnDescriptor& rnn, const double* w, int64_t layer, int dir) {
  const RnnWeightOffsets o = RnnLayerWeights(rnn, layer, dir);
  return {w + o.w_ih, w + o.w_hh, o.b_ih >= 0 ? w + o.b_ih : nullptr,
          o.b_hh >= 0 ? w + o.b_hh : nullptr, rnn.LayerInputSize(layer)};
}

// One forward step: fills s.gates, s.hn, s.c and s.h from s.x, s.h_prev and s.c_prev.
void CellForward(const RnnDescriptor& rnn, const Params& p, Step& s) {
  const int64_t H = rnn.hidden_size, G = rnn.gates();
  std::vector<double> xin(G * H), hin(G * H);  // W_ih x + b_ih and W_hh h + b_hh per gate row
  for (int64_t r = 0; r < G * H; ++r) {
    double a = p.b_ih ? p.b_ih[r] : 0, b = p.b_hh ? p.b_hh[r] : 0;
    for (int64_t k = 0; k < p.in; ++k) a += p.w_ih[r * p.in + k] * s.x[k];
    for (int64_t k = 0; k < H; ++k) b += p.w_hh[r * H + k] * s.h_prev[k];
    xin[r] = a;
    hin[r] = b;
  }
  s.gates.assign(G * H, 0);
  s.h.assign(H, 0);
  s.c.assign(H, 0);
  for (int64_t j = 0; j < H; ++j) {
    switch (rnn.cell) {
      case RnnCell::kRnnRelu:
        s.h[j] = std::max(0.0, xin[j] + hin[j]);
        break;
      case RnnCell::kRnnTanh:
        s.h[j] = std::tanh(xin[j] + hin[j]);
        break;
      case RnnCell::kLstm: {
        const int64_t gb = rnn.LstmBlock(2) * H + j, ob = rnn.LstmBlock(3) * H + j;
        const double i = Sigmoid(xin[j] + hin[j]), f = Sigmoid(xin[H + j] + hin[H + j]);
        const double g = std::tanh(xin[gb] + hin[gb]);
        const double o = Sigmoid(xin[ob] + hin[ob]);
        s.gates[j] = i, s.gates[H + j] = f, s.gates[gb] = g, s.gates[ob] = o;
        s.c[j] = f * s.c_prev[j] + i * g;
        s.h[j] = o * std::tanh(s.c[j]);
        break;
      }
      case RnnCell::kGru: {
        const double r = Sigmoid(xin[j] + hin[j]), z = Sigmoid(xin[H + j] + hin[H + j]);
        const double n = std::tanh(xin[2 * H + j] + r * hin[2 * H + j]);
        s.gates[j] = r, s.gates[H + j] = z, s.gates[2 * H + j] = n;
        s.hn.resize(H);
        s.hn[j] = hin[2 * H + j];
        s.h[j] = (1 - z) * n + z * s.h_prev[j];
        break;
      }
    }
  }
  if (rnn.cell != RnnCell::kLstm && rnn.cell != RnnCell::kGru) s.gates = s.h;
}

// One backward step. dh and dc hold the gradients of s.h and s.c; on return they hold those of
// the previous states (before cont). dx_t (the input's gradient at t) is accumulated; dw too.
void CellBackward(const RnnDescriptor& rnn, const Params& p, const RnnWeightOffsets& o,
                  const Step& s, double cont, std::vector<double>& dh, std::vector<double>& dc,
                  double* dx_t, double* dw) {
  const int64_t H = rnn.hidden_size, G = rnn.gates();
  std::vector<double> dxin(G * H), dhin(G * H);  // gradients of W_ih x + b_ih and W_hh h + b_hh
  std::vector<double> dh_prev(H, 0), dc_prev(H, 0);
  for (int64_t j = 0; j < H; ++j) {
    switch (rnn.cell) {
      case RnnCell::kRnnRelu:
        dxin[j] = dhin[j] = s.h[j] > 0 ? dh[j] : 0;
        break;
      case RnnCell::kRnnTanh:
        dxin[j] = dhin[j] = dh[j] * (1 - s.h[j] * s.h[j]);
        break;
      case RnnCell::kLstm: {
        const int64_t gb = rnn.LstmBlock(2) * H + j, ob = rnn.LstmBlock(3) * H + j;
        const double i = s.gates[j], f = s.gates[H + j], g = s.gates[gb], og = s.gates[ob];
        const double tc = std::tanh(s.c[j]);
        const double dct = dc[j] + dh[j] * og * (1 - tc * tc);
        const double d[4] = {dct * g * i * (1 - i), dct * s.c_prev[j] * f * (1 - f),
                             dct * i * (1 - g * g), dh[j] * tc * og * (1 - og)};
        for (int q = 0; q < 4; ++q) {
          const int64_t at = rnn.LstmBlock(q) * H + j;
          dxin[at] = dhin[at] = d[q];
        }
        dc_prev[j] = dct * f;
        break;
      }
      case RnnCell::kGru: {
        const double r = s.gates[j], z = s.gates[H + j], n = s.gates[2 * H + j];
        const double dn = dh[j] * (1 - z) * (1 - n * n);
        const double dr = dn * s.hn[j] * r * (1 - r);
        const double dz = dh[j] * (s.h_prev[j] - n) * z * (1 - z);
        dxin[j] = dhin[j] = dr;
        dxin[H + j] = dhin[H + j] = dz;
        dxin[2 * H + j] = dn;
        dhin[2 * H + j] = dn * r;
        dh_prev[j] = dh[j] * z;
        break;
      }
    }
  }
  for (int64_t r = 0; r < G * H; ++r) {
    for (int64_t k = 0; k < p.in; ++k) {
      dx_t[k] += p.w_ih[r * p.in + k] * dxin[r];
      dw[o.w_ih + r * p.in + k] += dxin[r] * s.x[k];
    }
    for (int64_t k = 0; k < H; ++k) {
      dh_prev[k] += p.w_hh[r * H + k] * dhin[r];
      dw[o.w_hh + r * H + k] += dhin[r] * s.h_prev[k];
    }
    if (o.b_ih >= 0) dw[o.b_ih + r] += dxin[r];
    if (o.b_hh >= 0) dw[o.b_hh + r] += dhin[r];
  }
  for (int64_t j = 0; j < H; ++j) {
    dh[j] = cont * dh_prev[j];
    dc[j] = cont * dc_prev[j];
  }
}

// The whole forward, every step kept: steps[layer][dir][n] and each layer's (dropped-out)
// input [T, N, features] sequence-major.
struct Trace {
  std::vector<std::vector<std::vector<std::vector<Step>>>> steps;
  std::vector<std::vector<double>> inputs;  // inputs[l]: what layer l read
  std::vector<double> output;               // the last layer's output, sequence-major
};

absl::Status RunForward(const RnnDescriptor& rnn, bool training, const RnnSequences& xs,
                        const double* x, const RnnSequences& ys, const double* hx, const double* cx,
                        const double* w, const double* cont, Trace& trace, const char* where) {
  if (absl::Status s = CheckRnnCall(rnn, xs, ys, cont != nullptr, where); !s.ok()) return s;
  if (x == nullptr || w == nullptr)
    return absl::InvalidArgumentError(absl::StrCat(where, ": null x or w"));
  const int64_t T = xs.max_length, N = xs.batch, H = rnn.hidden_size, D = rnn.directions();
  const bool lstm = rnn.cell == RnnCell::kLstm;
  std::vector<double> in(T * N * xs.features);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t k = 0; k < xs.features; ++k) {
        in[(t * N + n) * xs.features + k] = x[xs.Offset(t, n) + k];
      }
    }
  }
  trace.steps.assign(rnn.layers, std::vector<std::vector<std::vector<Step>>>(
                                     D, std::vector<std::vector<Step>>(N)));
  for (int64_t l = 0; l < rnn.layers; ++l) {
    const int64_t F = rnn.LayerInputSize(l);
    std::vector<double> out(T * N * D * H, 0);
    for (int d = 0; d < D; ++d) {
      const Params p = ParamsOf(rnn, w, l, d);
      for (int64_t n = 0; n < N; ++n) {
        const int64_t state = ((l * D + d) * N + n) * H;
        std::vector<double> h(hx ? hx + state : nullptr, hx ? hx + state + H : nullptr);
        std::vector<double> c(cx && lstm ? cx + state : nullptr,
                              cx && lstm ? cx + state + H : nullptr);
        h.resize(H, 0);
        c.resize(H, 0);
        const int64_t L = xs.length(n);
        for (int64_t s = 0; s < L; ++s) {
          Step step;
          step.t = d == 0 ? s : L - 1 - s;
          const double keep = cont ? cont[step.t * N + n] : 1;
          step.x.assign(in.begin() + (step.t * N + n) * F, in.begin() + (step.t * N + n + 1) * F);
          step.h_prev = h;
          step.c_prev = c;
          for (int64_t j = 0; j < H; ++j) step.h_prev[j] *= keep, step.c_prev[j] *= keep;
          CellForward(rnn, p, step);
          h = step.h;
          c = step.c;
          for (int64_t j = 0; j < H; ++j) out[(step.t * N + n) * D * H + d * H + j] = h[j];
          trace.steps[l][d][n].push_back(std::move(step));
        }
      }
    }
    trace.inputs.push_back(std::move(in));
    if (l + 1 < rnn.layers && training && rnn.dropout > 0) {
      const double scale = 1 / (1 - rnn.dropout);
      for (int64_t e = 0; e < static_cast<int64_t>(out.size()); ++e) {
        out[e] = DropoutKeep(rnn.dropout_seed + l, e, static_cast<float>(rnn.dropout))
                     ? out[e] * scale
                     : 0;
      }
    }
    in = std::move(out);
  }
  trace.output = std::move(in);
  return absl::OkStatus();
}

}  // namespace

absl::Status RnnForward(const RnnDescriptor& rnn, bool training, const RnnSequences& xs,
                        const double* x, const RnnSequences& ys, double* y, const double* hx,
                        const double* cx, const double* w, const double* cont, double* hy,
                        double* cy) {
  Trace trace;
  if (absl::Status s = RunForward(rnn, training, xs, x, ys, hx, cx, w, cont, trace, "RnnForward");
      !s.ok()) {
    return s;
  }
  const int64_t T = ys.max_length, N = ys.batch, H = rnn.hidden_size, D = rnn.directions();
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t k = 0; k < D * H; ++k)
        y[ys.Offset(t, n) + k] = trace.output[(t * N + n) * D * H + k];
    }
  }
  for (int64_t l = 0; l < rnn.layers; ++l) {
    for (int d = 0; d < D; ++d) {
      for (int64_t n = 0; n < N; ++n) {
        const int64_t state = ((l * D + d) * N + n) * H;
        const std::vector<Step>& steps = trace.steps[l][d][n];
        for (int64_t j = 0; j < H; ++j) {
          // A sequence of length 0 keeps its initial state.
          if (hy) hy[state + j] = steps.empty() ? (hx ? hx[state + j] : 0) : steps.back().h[j];
          if (cy && rnn.cell == RnnCell::kLstm) {
            cy[state + j] = steps.empty() ? (cx ? cx[state + j] : 0) : steps.back().c[j];
          }
        }
      }
    }
  }
  return absl::OkStatus();
}

absl::Status RnnBackward(const RnnDescriptor& rnn, const RnnSequences& xs, const double* x,
                         const RnnSequences& ys, const double* dy, const double* hx,
                         const double* cx, const double* w, const double* cont, const double* dhy,
                         const double* dcy, double* dx, double* dhx, double* dcx, double* dw) {
  Trace trace;
  if (absl::Status s =
          RunForward(rnn, /*training=*/true, xs, x, ys, hx, cx, w, cont, trace, "RnnBackward");
      !s.ok()) {
    return s;
  }
  const int64_t T = ys.max_length, N = ys.batch, H = rnn.hidden_size, D = rnn.directions();
  const bool lstm = rnn.cell == RnnCell::kLstm;
  // dout: the gradient of the current layer's output, sequence-major.
  std::vector<double> dout(T * N * D * H, 0);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t n = 0; n < N; ++n) {
      if (t >= ys.length(n)) continue;  // outputs past the end are constant zeros
      for (int64_t k = 0; k < D * H; ++k) dout[(t * N + n) * D * H + k] = dy[ys.Offset(t, n) + k];
    }
  }
  for (int64_t l = rnn.layers - 1; l >= 0; --l) {
    const int64_t F = rnn.LayerInputSize(l);
    std::vector<double> din(T * N * F, 0);
    for (int d = 0; d < D; ++d) {
      const Params p = ParamsOf(rnn, w, l, d);
      const RnnWeightOffsets o = RnnLayerWeights(rnn, l, d);
      for (int64_t n = 0; n < N; ++n) {
        const int64_t state = ((l * D + d) * N + n) * H;
        std::vector<double> dh(H, 0), dc(H, 0);
        for (int64_t j = 0; j < H; ++j) {
          if (dhy) dh[j] = dhy[state + j];
          if (dcy && lstm) dc[j] = dcy[state + j];
        }
        const std::vector<Step>& steps = trace.steps[l][d][n];
        for (int64_t s = static_cast<int64_t>(steps.size()) - 1; s >= 0; --s) {
          const Step& step = steps[s];
          for (int64_t j = 0; j < H; ++j) dh[j] += dout[(step.t * N + n) * D * H + d * H + j];
          const double keep = cont ? cont[step.t * N + n] : 1;
          CellBackward(rnn, p, o, step, keep, dh, dc, &din[(step.t * N + n) * F], dw);
        }
        for (int64_t j = 0; j < H; ++j) {
          if (dhx) dhx[state + j] = dh[j];
          if (dcx && lstm) dcx[state + j] = dc[j];
        }
      }
    }
    if (l > 0 && rnn.dropout > 0) {  // layer l read layer l - 1's output through the dropout
      const double scale = 1 / (1 - rnn.dropout);
      for (int64_t e = 0; e < static_cast<int64_t>(din.size()); ++e) {
        din[e] = DropoutKeep(rnn.dropout_seed + l - 1, e, static_cast<float>(rnn.dropout))
                     ? din[e] * scale
                     : 0;
      }
    }
    dout = std::move(din);
  }
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t k = 0; k < xs.features; ++k) {
        dx[xs.Offset(t, n) + k] = dout[(t * N + n) * xs.features + k];
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace reference
}  // namespace dnn
}  // namespace kiln
