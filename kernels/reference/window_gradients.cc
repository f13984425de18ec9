// Reference backward of the ops that mix the elements of a window: PoolingGradient and
// LRNGradient, each the derivative of the forward loops beside it (pooling.cc, normalization.cc)
// written out by hand.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <utility>
#include <vector>

#include "base/status_macros.h"
#include "kernels/reference/reference_kernel.h"
#include "kernels/reference/spatial3.h"
#include "ops/pooling_params.h"
#include "ops/shape_util.h"

namespace kiln {

namespace {

// Max: dy goes to the first maximum of the window in (d, h, w) order (what the forward pass
// and Caffe's argmax pick). Average: dy spread over the window with the forward's divisor.
absl::Status Pooling(const Node& node, const DenseArgs& a) {
  const TensorType& xt = a.in_types[0];
  KILN_ASSIGN_OR_RETURN(PoolingParams p, PoolingParams::Create(node.attrs(), node.input(0).type()));
  const Dims3 in = SpatialOf(xt.dims()), out = SpatialOf(a.in_types[1].dims());
  const Dims3 k = Promote3(p.kernel, 1), s = Promote3(p.stride, 1), pad = Promote3(p.pad, 0);
  const int64_t planes = xt.dim(0) * xt.dim(1);
  std::vector<double> dx(static_cast<size_t>(Volume(in)));
  for (int64_t plane = 0; plane < planes; ++plane) {
    const float* x = a.in[0] + plane * Volume(in);
    const float* dy = a.in[2] + plane * Volume(out);
    std::fill(dx.begin(), dx.end(), 0.0);
    for (int64_t od = 0; od < out[0]; ++od) {
      for (int64_t oh = 0; oh < out[1]; ++oh) {
        for (int64_t ow = 0; ow < out[2]; ++ow) {
          const int64_t o[3] = {od, oh, ow};
          int64_t lo[3], hi[3];
          int64_t padded_count = 1, count = 1;
          for (int d = 0; d < 3; ++d) {
            const int64_t start = o[d] * s[d] - pad[d];
            const int64_t end = std::min(start + k[d], in[d] + pad[d]);
            padded_count *= end - start;
            lo[d] = std::max<int64_t>(start, 0);
            hi[d] = std::min(end, in[d]);
            count *= std::max<int64_t>(hi[d] - lo[d], 0);
          }
          const double g = dy[(od * out[1] + oh) * out[2] + ow];
          if (p.mode == PoolingMode::kMax) {
            int64_t best = -1;
            float max = -FLT_MAX;
            for (int64_t id = lo[0]; id < hi[0]; ++id) {
              for (int64_t ih = lo[1]; ih < hi[1]; ++ih) {
                for (int64_t iw = lo[2]; iw < hi[2]; ++iw) {
                  const int64_t at = (id * in[1] + ih) * in[2] + iw;
                  if (best < 0 || x[at] > max) {
                    max = x[at];
                    best = at;
                  }
                }
              }
            }
            if (best >= 0) dx[best] += g;
            continue;
          }
          const double divisor = p.mode == PoolingMode::kAverageIncludePad
                                     ? static_cast<double>(padded_count)
                                     : static_cast<double>(count);
          if (divisor <= 0) continue;
          for (int64_t id = lo[0]; id < hi[0]; ++id) {
            for (int64_t ih = lo[1]; ih < hi[1]; ++ih) {
              for (int64_t iw = lo[2]; iw < hi[2]; ++iw) {
                dx[(id * in[1] + ih) * in[2] + iw] += g / divisor;
              }
            }
          }
        }
      }
    }
    float* out_dx = a.out[0] + plane * Volume(in);
    for (size_t i = 0; i < dx.size(); ++i) out_dx[i] = static_cast<float>(dx[i]);
  }
  return absl::OkStatus();
}

// With s = k + (alpha/n) Σ_window x² and y = x s^-beta, and windows symmetric (q is in c's
// window exactly when c is in q's): dx_q = dy_q s_q^-beta
//   - (2 alpha beta / n) x_q Σ_{c in window(q)} dy_c x_c s_c^(-beta-1).
// Within a channel the same holds over the 2-d window, with n² for n and 1 for k.
absl::Status Lrn(const Node& node, const DenseArgs& a) {
  const TensorType& t = a.in_types[0];
  const int64_t size = node.GetInt("local_size");
  const double alpha = node.GetFloat("alpha"), beta = node.GetFloat("beta");
  const int64_t half = (size - 1) / 2;
  const float* x = a.in[0];
  const float* dy = a.in[1];
  const int64_t count = t.num_elements();
  std::vector<double> s(static_cast<size_t>(count)), ratio(static_cast<size_t>(count));
  const bool across = node.GetString("region") == "across_channels";
  const double k = across ? node.GetFloat("k") : 1.0;
  const double norm = across ? static_cast<double>(size) : static_cast<double>(size * size);
  // Visits every element of `at`'s window (the same set for the forward and backward sums).
  const int64_t c = t.dim(1);
  const int64_t inner = ProductOfDims(t.dims(), 2, t.rank());
  const int64_t h = across ? 1 : t.dim(2), w = across ? 1 : t.dim(3);
  auto window = [&](int64_t at, auto visit) {
    const int64_t i = at % inner, ch = (at / inner) % c, b = at / (inner * c);
    if (across) {
      for (int64_t q = std::max<int64_t>(0, ch - half); q <= std::min(c - 1, ch + half); ++q) {
        visit((b * c + q) * inner + i);
      }
      return;
    }
    const int64_t row = i / w, col = i % w, base = at - i;
    for (int64_t u = std::max<int64_t>(0, row - half); u <= std::min(h - 1, row + half); ++u) {
      for (int64_t v = std::max<int64_t>(0, col - half); v <= std::min(w - 1, col + half); ++v) {
        visit(base + u * w + v);
      }
    }
  };
  for (int64_t at = 0; at < count; ++at) {
    double sum = 0.0;
    window(at, [&](int64_t q) { sum += double{x[q]} * x[q]; });
    s[at] = k + alpha / norm * sum;
    ratio[at] = double{dy[at]} * x[at] * std::pow(s[at], -beta - 1.0);
  }
  for (int64_t at = 0; at < count; ++at) {
    double sum = 0.0;
    window(at, [&](int64_t q) { sum += ratio[q]; });
    a.out[0][at] = static_cast<float>(dy[at] * std::pow(s[at], -beta) -
                                      2.0 * alpha * beta / norm * x[at] * sum);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterReferenceWindowGradients(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "PoolingGradient", Pooling, "direct"));
  return RegisterReference(registry, "LRNGradient", Lrn);
}

}  // namespace kiln
