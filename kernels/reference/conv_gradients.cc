// Reference backward of the layers with weights: ConvolutionBackwardData/Filter (direct loops
// with double accumulation, the forward loop nest of convolution.cc run the other way),
// InnerProductBackwardData/Filter, and the broadcast-parameter sums BiasGradient and
// ScaleParamGradient. These are the oracle the CPU and CUDA backward kernels are tested against,
// and are themselves checked by finite differences (tests/training/gradient_check_test.cc).
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/reference/reference_kernel.h"
#include "kernels/reference/spatial3.h"
#include "ops/broadcast_params.h"
#include "ops/convolution_params.h"
#include "ops/shape_util.h"

namespace kiln {

namespace {

struct ConvGeometry {
  int64_t n, c, k, c_per_group, k_per_group;
  Dims3 in, out, filter, stride, pad, dilation;
  bool flip;
};

// x: [N,C,in...], filter [K,C/group,R...], y: [N,K,out...].
absl::StatusOr<ConvGeometry> Geometry(const Node& node, const std::vector<int64_t>& x,
                                      const std::vector<int64_t>& w,
                                      const std::vector<int64_t>& y) {
  const int ns = static_cast<int>(x.size()) - 2;
  KILN_ASSIGN_OR_RETURN(ConvolutionParams p, ConvolutionParams::FromAttrs(node.attrs(), ns));
  ConvGeometry g;
  g.n = x[0];
  g.c = x[1];
  g.k = y[1];
  if (g.c % p.group != 0 || g.k % p.group != 0 || w[0] != g.k || w[1] * p.group != g.c) {
    return absl::InvalidArgumentError(absl::StrCat("node '", node.name(), "': filter ",
                                                   DimsToString(w), " does not match x ",
                                                   DimsToString(x), " and y ", DimsToString(y)));
  }
  g.c_per_group = g.c / p.group;
  g.k_per_group = g.k / p.group;
  g.in = SpatialOf(x);
  g.out = SpatialOf(y);
  g.filter = SpatialOf(w);
  g.stride = Promote3(p.stride, 1);
  g.pad = Promote3(p.pad, 0);
  g.dilation = Promote3(p.dilation, 1);
  g.flip = p.flip_filter;
  return g;
}

inline int64_t Tap(int64_t r, int64_t size, bool flip) { return flip ? size - 1 - r : r; }

// Calls visit(x_index, w_index, y_index) for every (input, tap, output) triple the forward
// convolution multiplies together; the two backward directions are both this loop nest.
template <typename Visit>
void ForEachProduct(const ConvGeometry& g, Visit visit) {
  const int64_t in_vol = Volume(g.in), out_vol = Volume(g.out), f_vol = Volume(g.filter);
  for (int64_t n = 0; n < g.n; ++n) {
    for (int64_t k = 0; k < g.k; ++k) {
      const int64_t grp = k / g.k_per_group;
      for (int64_t cg = 0; cg < g.c_per_group; ++cg) {
        const int64_t c = grp * g.c_per_group + cg;
        const int64_t x_base = (n * g.c + c) * in_vol;
        const int64_t w_base = (k * g.c_per_group + cg) * f_vol;
        const int64_t y_base = (n * g.k + k) * out_vol;
        for (int64_t od = 0; od < g.out[0]; ++od) {
          for (int64_t oh = 0; oh < g.out[1]; ++oh) {
            for (int64_t ow = 0; ow < g.out[2]; ++ow) {
              const int64_t y_at = y_base + (od * g.out[1] + oh) * g.out[2] + ow;
              for (int64_t rd = 0; rd < g.filter[0]; ++rd) {
                const int64_t id = od * g.stride[0] - g.pad[0] + rd * g.dilation[0];
                if (id < 0 || id >= g.in[0]) continue;
                for (int64_t rh = 0; rh < g.filter[1]; ++rh) {
                  const int64_t ih = oh * g.stride[1] - g.pad[1] + rh * g.dilation[1];
                  if (ih < 0 || ih >= g.in[1]) continue;
                  for (int64_t rw = 0; rw < g.filter[2]; ++rw) {
                    const int64_t iw = ow * g.stride[2] - g.pad[2] + rw * g.dilation[2];
                    if (iw < 0 || iw >= g.in[2]) continue;
                    const int64_t tap = (Tap(rd, g.filter[0], g.flip) * g.filter[1] +
                                         Tap(rh, g.filter[1], g.flip)) *
                                            g.filter[2] +
                                        Tap(rw, g.filter[2], g.flip);
                    visit(x_base + (id * g.in[1] + ih) * g.in[2] + iw, w_base + tap, y_at);
                  }
                }
              }
            }
          }
        }
      }
    }
  }
}

absl::Status ConvBackwardData(const Node& node, const DenseArgs& a) {
  // in: dy, filter; out: dx.
  KILN_ASSIGN_OR_RETURN(ConvGeometry g, Geometry(node, a.out_types[0].dims(), a.in_types[1].dims(),
                                                 a.in_types[0].dims()));
  std::vector<double> dx(static_cast<size_t>(a.out_types[0].num_elements()), 0.0);
  const float* dy = a.in[0];
  const float* w = a.in[1];
  ForEachProduct(g, [&](int64_t xi, int64_t wi, int64_t yi) { dx[xi] += double{dy[yi]} * w[wi]; });
  for (size_t i = 0; i < dx.size(); ++i) a.out[0][i] = static_cast<float>(dx[i]);
  return absl::OkStatus();
}

absl::Status ConvBackwardFilter(const Node& node, const DenseArgs& a) {
  // in: x, dy; out: dfilter.
  KILN_ASSIGN_OR_RETURN(ConvGeometry g, Geometry(node, a.in_types[0].dims(), a.out_types[0].dims(),
                                                 a.in_types[1].dims()));
  std::vector<double> dw(static_cast<size_t>(a.out_types[0].num_elements()), 0.0);
  const float* x = a.in[0];
  const float* dy = a.in[1];
  ForEachProduct(g, [&](int64_t xi, int64_t wi, int64_t yi) { dw[wi] += double{x[xi]} * dy[yi]; });
  for (size_t i = 0; i < dw.size(); ++i) a.out[0][i] = static_cast<float>(dw[i]);
  return absl::OkStatus();
}

absl::StatusOr<BroadcastParams> ParamView(const Node& node, const TensorType& x,
                                          const TensorType& param) {
  return BroadcastParams::Create(x, param, node.GetInt("axis"), node.GetInt("num_axes"));
}

// dparam[c] = Σ_{outer, inner} dy (times x for a scale).
absl::Status SumToParam(const Node& node, const DenseArgs& a, const float* x, const float* dy,
                        const TensorType& dy_type) {
  KILN_ASSIGN_OR_RETURN(BroadcastParams b, ParamView(node, dy_type, a.out_types[0]));
  for (int64_t c = 0; c < b.channels; ++c) {
    double sum = 0.0;
    for (int64_t o = 0; o < b.outer; ++o) {
      const int64_t base = (o * b.channels + c) * b.inner;
      for (int64_t i = 0; i < b.inner; ++i) {
        sum += x != nullptr ? double{x[base + i]} * dy[base + i] : double{dy[base + i]};
      }
    }
    a.out[0][c] = static_cast<float>(sum);
  }
  return absl::OkStatus();
}

absl::Status BiasGradient(const Node& node, const DenseArgs& a) {
  return SumToParam(node, a, nullptr, a.in[0], a.in_types[0]);
}

absl::Status ScaleParamGradient(const Node& node, const DenseArgs& a) {
  return SumToParam(node, a, a.in[0], a.in[1], a.in_types[1]);
}

// x viewed as [M, K] (flattened from axis), weight [N, K] ([K, N] transposed), dy [M, N].
struct IpDims {
  int64_t m, k, n;
  bool transpose;
};

absl::StatusOr<IpDims> IpOf(const Node& node, const std::vector<int64_t>& x, int64_t n) {
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(node.GetInt("axis"), x.size(), "axis"));
  return IpDims{ProductOfDims(x, 0, axis), ProductOfDims(x, axis, x.size()), n,
                node.GetBool("transpose")};
}

inline int64_t WeightAt(const IpDims& d, int64_t n, int64_t k) {
  return d.transpose ? k * d.n + n : n * d.k + k;
}

absl::Status IpBackwardData(const Node& node, const DenseArgs& a) {
  const TensorType& dy_t = a.in_types[0];
  KILN_ASSIGN_OR_RETURN(IpDims d, IpOf(node, a.out_types[0].dims(), dy_t.dim(dy_t.rank() - 1)));
  for (int64_t m = 0; m < d.m; ++m) {
    for (int64_t k = 0; k < d.k; ++k) {
      double sum = 0.0;
      for (int64_t n = 0; n < d.n; ++n)
        sum += double{a.in[0][m * d.n + n]} * a.in[1][WeightAt(d, n, k)];
      a.out[0][m * d.k + k] = static_cast<float>(sum);
    }
  }
  return absl::OkStatus();
}

absl::Status IpBackwardFilter(const Node& node, const DenseArgs& a) {
  const TensorType& dy_t = a.in_types[1];
  KILN_ASSIGN_OR_RETURN(IpDims d, IpOf(node, a.in_types[0].dims(), dy_t.dim(dy_t.rank() - 1)));
  for (int64_t n = 0; n < d.n; ++n) {
    for (int64_t k = 0; k < d.k; ++k) {
      double sum = 0.0;
      for (int64_t m = 0; m < d.m; ++m) sum += double{a.in[1][m * d.n + n]} * a.in[0][m * d.k + k];
      a.out[0][WeightAt(d, n, k)] = static_cast<float>(sum);
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterReferenceConvGradients(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(
      RegisterReference(registry, "ConvolutionBackwardData", ConvBackwardData, "direct"));
  KILN_RETURN_IF_ERROR(
      RegisterReference(registry, "ConvolutionBackwardFilter", ConvBackwardFilter, "direct"));
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "BiasGradient", BiasGradient));
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "ScaleParamGradient", ScaleParamGradient));
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "InnerProductBackwardData", IpBackwardData));
  return RegisterReference(registry, "InnerProductBackwardFilter", IpBackwardFilter);
}

}  // namespace kiln
