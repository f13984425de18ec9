#include "dnn/conv_gemm_views.h"

namespace kiln {
namespace dnn {

namespace {

bool Flip(const ConvProblem& p) { return p.mode == ConvolutionMode::kConvolution; }

// Fills `map` with the digits (n, spatial 0, spatial 1, spatial 2).
void PixelDigits(IndexMap& map, int64_t n, const int64_t* extent) {
  map.size[0] = n;
  for (int i = 0; i < 3; ++i) map.size[1 + i] = extent[i];
}

// The channel-by-taps index (c, t, r, s) or (t, r, s, c): `channel_stride` for the channel digit,
// `tap_coord[i]` per unit of tap i for the coordinates (0 when the operand is a filter), and
// `tap_stride[i]` per unit of tap i for the offset (filters only).
void ChannelTapDigits(IndexMap& map, bool channels_innermost, int64_t channels,
                      int64_t channel_stride, const int64_t* taps, const int32_t* tap_coord,
                      const int64_t* tap_stride) {
  const int channel_digit = channels_innermost ? 3 : 0;
  const int first_tap = channels_innermost ? 0 : 1;
  map.size[channel_digit] = channels;
  map.stride[channel_digit] = channel_stride;
  for (int i = 0; i < 3; ++i) {
    map.size[first_tap + i] = taps[i];
    map.stride[first_tap + i] = tap_stride[i];
    map.coord[first_tap + i][i] = tap_coord[i];
  }
}

// Tap strides of the filter, reversed for true convolution (the flipped filter starts at the
// last tap, so the base moves there).
void FilterTapStrides(const ConvProblem& p, int64_t* stride, int64_t* base) {
  for (int i = 0; i < 3; ++i) {
    stride[i] = Flip(p) ? -p.w_stride[2 + i] : p.w_stride[2 + i];
    if (Flip(p)) *base += (p.filter[i] - 1) * p.w_stride[2 + i];
  }
}

void SetSpatial(GatherOperand& op, const int64_t* extent, const int64_t* strides) {
  op.spatial = true;
  for (int i = 0; i < 3; ++i) {
    op.extent[i] = static_cast<int32_t>(extent[i]);
    op.coord_stride[i] = strides[i];
  }
}

}  // namespace

GemmView ForwardGemmView(const ConvProblem& p, bool channels_innermost) {
  GemmView v;
  const int64_t no_stride[3] = {0, 0, 0};
  int32_t dil[3];
  for (int i = 0; i < 3; ++i) dil[i] = static_cast<int32_t>(p.dilation[i]);

  GatherOperand& a = v.a;  // x gathered as [output pixel][c, taps]
  PixelDigits(a.outer, p.n, p.out);
  a.outer.stride[0] = p.x_stride[0];
  for (int i = 0; i < 3; ++i) {
    a.outer.coord[1 + i][i] = static_cast<int32_t>(p.stride[i]);
    a.outer.coord_base[i] = static_cast<int32_t>(-p.pad[i]);
  }
  ChannelTapDigits(a.inner, channels_innermost, p.cg(), p.x_stride[1], p.filter, dil, no_stride);
  SetSpatial(a, p.in, p.x_stride + 2);
  a.group_stride = p.cg() * p.x_stride[1];

  GatherOperand& b = v.b;  // the filter as [k][c, taps]
  b.outer.size[3] = p.kg();
  b.outer.stride[3] = p.w_stride[0];
  int64_t tap_stride[3];
  const int32_t no_coord[3] = {0, 0, 0};
  FilterTapStrides(p, tap_stride, &b.inner.base);
  ChannelTapDigits(b.inner, channels_innermost, p.cg(), p.w_stride[1], p.filter, no_coord,
                   tap_stride);
  b.group_stride = p.kg() * p.w_stride[0];

  PixelDigits(v.c.rows, p.n, p.out);
  for (int i = 0; i < 4; ++i) v.c.rows.stride[i] = p.y_stride[i == 0 ? 0 : 1 + i];
  v.c.cols.size[3] = p.kg();
  v.c.cols.stride[3] = p.y_stride[1];
  v.c.group_stride = p.kg() * p.y_stride[1];

  v.m = p.OutputPixels();
  v.n = p.kg();
  v.k = p.cg() * p.FilterTaps();
  v.groups = p.groups;
  return v;
}

GemmView BackwardDataGemmView(const ConvProblem& p, bool channels_innermost) {
  GemmView v;
  const int64_t no_stride[3] = {0, 0, 0};
  int32_t neg_dil[3];
  for (int i = 0; i < 3; ++i) neg_dil[i] = static_cast<int32_t>(-p.dilation[i]);

  // dy gathered as [input pixel][k, taps]: input pixel h receives dy at p = (h + pad - r dil) /
  // stride when that divides exactly.
  GatherOperand& a = v.a;
  PixelDigits(a.outer, p.n, p.in);
  a.outer.stride[0] = p.y_stride[0];
  for (int i = 0; i < 3; ++i) {
    a.outer.coord[1 + i][i] = 1;
    a.outer.coord_base[i] = static_cast<int32_t>(p.pad[i]);
    a.divisor[i] = static_cast<int32_t>(p.stride[i]);
    a.divide = a.divide || p.stride[i] > 1;
  }
  ChannelTapDigits(a.inner, channels_innermost, p.kg(), p.y_stride[1], p.filter, neg_dil,
                   no_stride);
  SetSpatial(a, p.out, p.y_stride + 2);
  a.group_stride = p.kg() * p.y_stride[1];

  GatherOperand& b = v.b;  // the filter as [c][k, taps]
  b.outer.size[3] = p.cg();
  b.outer.stride[3] = p.w_stride[1];
  int64_t tap_stride[3];
  const int32_t no_coord[3] = {0, 0, 0};
  FilterTapStrides(p, tap_stride, &b.inner.base);
  ChannelTapDigits(b.inner, channels_innermost, p.kg(), p.w_stride[0], p.filter, no_coord,
                   tap_stride);
  b.group_stride = p.kg() * p.w_stride[0];

  PixelDigits(v.c.rows, p.n, p.in);
  for (int i = 0; i < 4; ++i) v.c.rows.stride[i] = p.x_stride[i == 0 ? 0 : 1 + i];
  v.c.cols.size[3] = p.cg();
  v.c.cols.stride[3] = p.x_stride[1];
  v.c.group_stride = p.cg() * p.x_stride[1];

  v.m = p.n * p.in[0] * p.in[1] * p.in[2];
  v.n = p.cg();
  v.k = p.kg() * p.FilterTaps();
  v.groups = p.groups;
  return v;
}

GemmView BackwardFilterGemmView(const ConvProblem& p, bool channels_innermost) {
  GemmView v;
  const int64_t no_stride[3] = {0, 0, 0};
  int32_t dil[3];
  for (int i = 0; i < 3; ++i) dil[i] = static_cast<int32_t>(p.dilation[i]);

  GatherOperand& a = v.a;  // dy as [k][output pixel]
  a.outer.size[3] = p.kg();
  a.outer.stride[3] = p.y_stride[1];
  PixelDigits(a.inner, p.n, p.out);
  for (int i = 0; i < 4; ++i) a.inner.stride[i] = p.y_stride[i == 0 ? 0 : 1 + i];
  a.group_stride = p.kg() * p.y_stride[1];

  GatherOperand& b = v.b;  // x as [c, taps][output pixel]
  ChannelTapDigits(b.outer, channels_innermost, p.cg(), p.x_stride[1], p.filter, dil, no_stride);
  PixelDigits(b.inner, p.n, p.out);
  b.inner.stride[0] = p.x_stride[0];
  for (int i = 0; i < 3; ++i) {
    b.inner.coord[1 + i][i] = static_cast<int32_t>(p.stride[i]);
    b.inner.coord_base[i] = static_cast<int32_t>(-p.pad[i]);
  }
  SetSpatial(b, p.in, p.x_stride + 2);
  b.group_stride = p.cg() * p.x_stride[1];

  v.c.rows.size[3] = p.kg();
  v.c.rows.stride[3] = p.w_stride[0];
  int64_t tap_stride[3];
  const int32_t no_coord[3] = {0, 0, 0};
  FilterTapStrides(p, tap_stride, &v.c.cols.base);
  ChannelTapDigits(v.c.cols, channels_innermost, p.cg(), p.w_stride[1], p.filter, no_coord,
                   tap_stride);
  v.c.group_stride = p.kg() * p.w_stride[0];

  v.m = p.kg();
  v.n = p.cg() * p.FilterTaps();
  v.k = p.OutputPixels();
  v.groups = p.groups;
  return v;
}

bool InnerVectorizable(const GatherOperand& op, int width) {
  const IndexMap& in = op.inner;
  if (in.size[3] % width != 0 || in.stride[3] != 1) return false;
  for (int j = 0; j < 3; ++j)
    if (in.coord[3][j] != 0) return false;
  auto aligned = [width](int64_t v) { return v % width == 0; };
  for (int d = 0; d < 3; ++d)
    if (!aligned(in.stride[d])) return false;
  for (int d = 0; d < 4; ++d)
    if (!aligned(op.outer.stride[d])) return false;
  if (!aligned(in.base) || !aligned(op.outer.base) || !aligned(op.group_stride)) return false;
  for (int j = 0; j < 3; ++j)
    if (op.spatial && !aligned(op.coord_stride[j])) return false;
  return true;
}

bool InnerIsContiguous(const GatherOperand& op) {
  // The fastest digit with more than one value decides.
  auto fastest_step = [](const IndexMap& map, const GatherOperand& o) -> int64_t {
    for (int d = 3; d >= 0; --d) {
      if (map.size[d] == 1) continue;
      int64_t step = map.stride[d];
      for (int j = 0; j < 3; ++j)
        if (o.spatial) step += map.coord[d][j] * o.coord_stride[j];
      return step < 0 ? -step : step;
    }
    return 0;
  };
  const int64_t inner = fastest_step(op.inner, op);
  const int64_t outer = fastest_step(op.outer, op);
  if (inner == 1) return true;
  if (outer == 1) return false;
  return inner <= outer;
}

}  // namespace dnn
}  // namespace kiln
