#include "kernels/cpu/im2col.h"

#include <cstring>

namespace kiln {

namespace {

// Calls row_fn(c, r, s, row_of_col) and, per output row p, the input row it reads (or -1).
template <typename Fn>
void ForEachPatchRow(const Im2colShape& g, Fn fn) {
  for (int64_t c = 0; c < g.channels; ++c) {
    for (int64_t r = 0; r < g.r; ++r) {
      for (int64_t s = 0; s < g.s; ++s) {
        const int64_t row = (c * g.r + r) * g.s + s;
        for (int64_t p = 0; p < g.p; ++p) {
          const int64_t ih = p * g.stride_h - g.pad_h + r * g.dilation_h;
          fn(c, s, row * g.p * g.q + p * g.q, (ih < 0 || ih >= g.h) ? -1 : ih);
        }
      }
    }
  }
}

}  // namespace

void Im2col(const Im2colShape& g, const float* x, float* col) {
  ForEachPatchRow(g, [&](int64_t c, int64_t s, int64_t at, int64_t ih) {
    if (ih < 0) {
      std::memset(col + at, 0, sizeof(float) * g.q);
      return;
    }
    const float* xrow = x + (c * g.h + ih) * g.w;
    for (int64_t q = 0; q < g.q; ++q) {
      const int64_t iw = q * g.stride_w - g.pad_w + s * g.dilation_w;
      col[at + q] = (iw >= 0 && iw < g.w) ? xrow[iw] : 0.0f;
    }
  });
}

void Col2imAdd(const Im2colShape& g, const float* col, float* x) {
  ForEachPatchRow(g, [&](int64_t c, int64_t s, int64_t at, int64_t ih) {
    if (ih < 0) return;
    float* xrow = x + (c * g.h + ih) * g.w;
    for (int64_t q = 0; q < g.q; ++q) {
      const int64_t iw = q * g.stride_w - g.pad_w + s * g.dilation_w;
      if (iw >= 0 && iw < g.w) xrow[iw] += col[at + q];
    }
  });
}

}  // namespace kiln
