// Reference LSTMUnit and LSTMUnitGradient (ops/lstm_unit_ops.cc), in double, per (row, d) with
// rows the T N (t, n) pairs: the gates of x's row in Caffe's order i, f, o, g.
//
// The forget gate is cont sigmoid(x_f), and exactly 0 where cont is 0 (as Caffe computes it, so
// a restarted sequence ignores c_prev even when its sigmoid would round oddly). Its gradient is
// the true derivative, dc_total c_prev cont s (1 - s) with s = sigmoid(x_f); Caffe writes
// f (1 - f) with f = cont s, which is the same for its 0/1 markers.
#include <cmath>

#include "base/status_macros.h"
#include "kernels/reference/reference_kernel.h"

namespace kiln {

namespace {

double Sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }

// The activated gates and the cell of one (row, d).
struct Cell {
  double i, s_f, f, o, g, c_prev, c, tanh_c, cont;
};

Cell CellAt(const DenseArgs& a, int64_t row, int64_t d, int64_t width) {
  const float* x = a.in[1] + row * 4 * width;
  Cell cell;
  cell.cont = a.in[2][row];
  cell.i = Sigmoid(x[d]);
  cell.s_f = Sigmoid(x[width + d]);
  cell.f = cell.cont == 0 ? 0.0 : cell.cont * cell.s_f;
  cell.o = Sigmoid(x[2 * width + d]);
  cell.g = std::tanh(double{x[3 * width + d]});
  cell.c_prev = a.in[0][row * width + d];
  cell.c = cell.f * cell.c_prev + cell.i * cell.g;
  cell.tanh_c = std::tanh(cell.c);
  return cell;
}

absl::Status LstmUnit(const Node& node, const DenseArgs& a) {
  const int64_t width = a.in_types[0].dim(2);
  const int64_t rows = a.in_types[0].dim(0) * a.in_types[0].dim(1);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t d = 0; d < width; ++d) {
      const Cell cell = CellAt(a, r, d, width);
      a.out[0][r * width + d] = static_cast<float>(cell.c);
      a.out[1][r * width + d] = static_cast<float>(cell.o * cell.tanh_c);
    }
  }
  return absl::OkStatus();
}

absl::Status LstmUnitGradient(const Node& node, const DenseArgs& a) {
  const int64_t width = a.in_types[0].dim(2);
  const int64_t rows = a.in_types[0].dim(0) * a.in_types[0].dim(1);
  const bool has_dc = node.GetBool("has_dc"), has_dh = node.GetBool("has_dh");
  const float* dc = has_dc ? a.in[3] : nullptr;
  const float* dh = has_dh ? a.in[has_dc ? 4 : 3] : nullptr;
  for (int64_t r = 0; r < rows; ++r) {
    float* dx = a.out[1] + r * 4 * width;
    for (int64_t d = 0; d < width; ++d) {
      const int64_t e = r * width + d;
      const Cell cell = CellAt(a, r, d, width);
      const double dh_e = dh ? dh[e] : 0.0;
      // c reaches the loss directly and through h = o tanh(c).
      const double dc_total =
          (dc ? dc[e] : 0.0) + dh_e * cell.o * (1.0 - cell.tanh_c * cell.tanh_c);
      a.out[0][e] = static_cast<float>(dc_total * cell.f);
      dx[d] = static_cast<float>(dc_total * cell.g * cell.i * (1.0 - cell.i));
      dx[width + d] =
          static_cast<float>(dc_total * cell.c_prev * cell.cont * cell.s_f * (1.0 - cell.s_f));
      dx[2 * width + d] = static_cast<float>(dh_e * cell.tanh_c * cell.o * (1.0 - cell.o));
      dx[3 * width + d] = static_cast<float>(dc_total * cell.i * (1.0 - cell.g * cell.g));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterReferenceLstmUnit(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "LSTMUnit", LstmUnit));
  return RegisterReference(registry, "LSTMUnitGradient", LstmUnitGradient);
}

}  // namespace kiln
