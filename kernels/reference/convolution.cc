// Reference Convolution and Deconvolution: direct loops with double accumulation.
#include <algorithm>
#include <vector>

#include "base/status_macros.h"
#include "kernels/reference/reference_kernel.h"
#include "kernels/reference/spatial3.h"
#include "ops/convolution_params.h"

namespace kiln {

namespace {

struct ConvGeometry {
  int64_t n, c, k, group, c_per_group, k_per_group;
  Dims3 in, out, filter, stride, pad, dilation;
  bool flip;
};

absl::StatusOr<ConvGeometry> Geometry(const Node& node, const DenseArgs& a) {
  const TensorType& x = a.in_types[0];
  const TensorType& w = a.in_types[1];
  const int ns = x.rank() - 2;
  KILN_ASSIGN_OR_RETURN(ConvolutionParams p, ConvolutionParams::FromAttrs(node.attrs(), ns));
  ConvGeometry g;
  g.n = x.dim(0);
  g.c = x.dim(1);
  g.k = a.out_types[0].dim(1);
  g.group = p.group;
  g.c_per_group = g.c / g.group;
  g.k_per_group = g.k / g.group;
  g.in = SpatialOf(x.dims());
  g.out = SpatialOf(a.out_types[0].dims());
  g.filter = SpatialOf(w.dims());
  g.stride = Promote3(p.stride, 1);
  g.pad = Promote3(p.pad, 0);
  g.dilation = Promote3(p.dilation, 1);
  g.flip = p.flip_filter;
  return g;
}

// Index of filter tap r (0..R-1) after the optional flip.
inline int64_t Tap(int64_t r, int64_t size, bool flip) { return flip ? size - 1 - r : r; }

absl::Status Convolution(const Node& node, const DenseArgs& a) {
  KILN_ASSIGN_OR_RETURN(ConvGeometry g, Geometry(node, a));
  const float* x = a.in[0];
  const float* w = a.in[1];
  const float* bias = a.in.size() > 2 ? a.in[2] : nullptr;
  // The fused epilogue (passes/): + residual, then ReLU with its negative slope.
  const float* residual = a.in.size() > 3 ? a.in[3] : nullptr;
  const bool relu = node.GetString("activation") == "relu";
  const float slope = static_cast<float>(node.GetFloat("negative_slope"));
  float* y = a.out[0];
  const int64_t in_vol = Volume(g.in), f_vol = Volume(g.filter);
  for (int64_t n = 0; n < g.n; ++n) {
    for (int64_t k = 0; k < g.k; ++k) {
      const int64_t grp = k / g.k_per_group;
      for (int64_t od = 0; od < g.out[0]; ++od) {
        for (int64_t oh = 0; oh < g.out[1]; ++oh) {
          for (int64_t ow = 0; ow < g.out[2]; ++ow) {
            double acc = bias ? bias[k] : 0.0;
            for (int64_t cg = 0; cg < g.c_per_group; ++cg) {
              const int64_t c = grp * g.c_per_group + cg;
              const float* xc = x + (n * g.c + c) * in_vol;
              const float* wk = w + (k * g.c_per_group + cg) * f_vol;
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
                    acc += static_cast<double>(xc[(id * g.in[1] + ih) * g.in[2] + iw]) * wk[tap];
                  }
                }
              }
            }
            const int64_t at =
                ((n * g.k + k) * g.out[0] + od) * g.out[1] * g.out[2] + oh * g.out[2] + ow;
            // Rounded to f32 where the unfused graph stores its intermediate values.
            float v = static_cast<float>(acc);
            if (residual != nullptr) v = static_cast<float>(double{v} + residual[at]);
            if (relu) v = std::max(v, 0.0f) + slope * std::min(v, 0.0f);
            y[at] = v;
          }
        }
      }
    }
  }
  return absl::OkStatus();
}

// Transposed convolution: every input element scatters filter-weighted copies into the output.
absl::Status Deconvolution(const Node& node, const DenseArgs& a) {
  KILN_ASSIGN_OR_RETURN(ConvGeometry g, Geometry(node, a));
  const float* x = a.in[0];
  const float* w = a.in[1];
  const float* bias = a.in.size() > 2 ? a.in[2] : nullptr;
  const int64_t in_vol = Volume(g.in), out_vol = Volume(g.out), f_vol = Volume(g.filter);
  std::vector<double> acc(static_cast<size_t>(g.n * g.k * out_vol), 0.0);
  for (int64_t n = 0; n < g.n; ++n) {
    for (int64_t c = 0; c < g.c; ++c) {
      const int64_t grp = c / g.c_per_group;
      for (int64_t kg = 0; kg < g.k_per_group; ++kg) {
        const int64_t k = grp * g.k_per_group + kg;
        const float* wck = w + (c * g.k_per_group + kg) * f_vol;
        double* yk = acc.data() + (n * g.k + k) * out_vol;
        for (int64_t id = 0; id < g.in[0]; ++id) {
          for (int64_t ih = 0; ih < g.in[1]; ++ih) {
            for (int64_t iw = 0; iw < g.in[2]; ++iw) {
              const double xv = x[(n * g.c + c) * in_vol + (id * g.in[1] + ih) * g.in[2] + iw];
              for (int64_t rd = 0; rd < g.filter[0]; ++rd) {
                const int64_t od = id * g.stride[0] - g.pad[0] + rd * g.dilation[0];
                if (od < 0 || od >= g.out[0]) continue;
                for (int64_t rh = 0; rh < g.filter[1]; ++rh) {
                  const int64_t oh = ih * g.stride[1] - g.pad[1] + rh * g.dilation[1];
                  if (oh < 0 || oh >= g.out[1]) continue;
                  for (int64_t rw = 0; rw < g.filter[2]; ++rw) {
                    const int64_t ow = iw * g.stride[2] - g.pad[2] + rw * g.dilation[2];
                    if (ow < 0 || ow >= g.out[2]) continue;
                    const int64_t tap = (Tap(rd, g.filter[0], g.flip) * g.filter[1] +
                                         Tap(rh, g.filter[1], g.flip)) *
                                            g.filter[2] +
                                        Tap(rw, g.filter[2], g.flip);
                    yk[(od * g.out[1] + oh) * g.out[2] + ow] += xv * wck[tap];
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  for (int64_t n = 0; n < g.n; ++n) {
    for (int64_t k = 0; k < g.k; ++k) {
      for (int64_t i = 0; i < out_vol; ++i) {
        const int64_t at = (n * g.k + k) * out_vol + i;
        a.out[0][at] = static_cast<float>(acc[at] + (bias ? bias[k] : 0.0));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterReferenceConvolution(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "Convolution", Convolution, "direct"));
  return RegisterReference(registry, "Deconvolution", Deconvolution, "direct");
}

}  // namespace kiln
