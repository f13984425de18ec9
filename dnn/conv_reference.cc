#include "dnn/conv_reference.h"

#include <vector>

namespace kiln {
namespace dnn {

namespace {

// Visits every (output element, input element, filter tap) triple of the convolution once, in a
// fixed order; the three directions are three ways of accumulating the same products.
template <typename Visit>
void ForEachProduct(const ConvProblem& p, Visit visit) {
  const int64_t cg = p.cg(), kg = p.kg();
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t g = 0; g < p.groups; ++g)
      for (int64_t kk = 0; kk < kg; ++kk) {
        const int64_t k = g * kg + kk;
        for (int64_t o = 0; o < p.out[0]; ++o)
          for (int64_t pp = 0; pp < p.out[1]; ++pp)
            for (int64_t q = 0; q < p.out[2]; ++q) {
              const int64_t yi = n * p.y_stride[0] + k * p.y_stride[1] + o * p.y_stride[2] +
                                 pp * p.y_stride[3] + q * p.y_stride[4];
              for (int64_t cc = 0; cc < cg; ++cc) {
                const int64_t c = g * cg + cc;
                for (int64_t t = 0; t < p.filter[0]; ++t) {
                  const int64_t d = o * p.stride[0] - p.pad[0] + t * p.dilation[0];
                  if (d < 0 || d >= p.in[0]) continue;
                  for (int64_t r = 0; r < p.filter[1]; ++r) {
                    const int64_t h = pp * p.stride[1] - p.pad[1] + r * p.dilation[1];
                    if (h < 0 || h >= p.in[1]) continue;
                    for (int64_t s = 0; s < p.filter[2]; ++s) {
                      const int64_t w = q * p.stride[2] - p.pad[2] + s * p.dilation[2];
                      if (w < 0 || w >= p.in[2]) continue;
                      const int64_t xi = n * p.x_stride[0] + c * p.x_stride[1] + d * p.x_stride[2] +
                                         h * p.x_stride[3] + w * p.x_stride[4];
                      // True convolution reads the filter flipped in every spatial dim.
                      const bool flip = p.mode == ConvolutionMode::kConvolution;
                      const int64_t ft = flip ? p.filter[0] - 1 - t : t;
                      const int64_t fr = flip ? p.filter[1] - 1 - r : r;
                      const int64_t fs = flip ? p.filter[2] - 1 - s : s;
                      const int64_t wi = k * p.w_stride[0] + cc * p.w_stride[1] +
                                         ft * p.w_stride[2] + fr * p.w_stride[3] +
                                         fs * p.w_stride[4];
                      visit(yi, xi, wi);
                    }
                  }
                }
              }
            }
      }
}

// out[e] = alpha sum[e] + beta out[e] for every logical element e of a 5-d strided tensor, where
// `sum` is indexed by element offset; out is not read when beta == 0.
void BlendInto(const std::vector<double>& sum, const int64_t* dims, const int64_t* strides,
               float* out, double alpha, double beta) {
  for (int64_t a = 0; a < dims[0]; ++a)
    for (int64_t b = 0; b < dims[1]; ++b)
      for (int64_t c = 0; c < dims[2]; ++c)
        for (int64_t d = 0; d < dims[3]; ++d)
          for (int64_t e = 0; e < dims[4]; ++e) {
            const int64_t i =
                a * strides[0] + b * strides[1] + c * strides[2] + d * strides[3] + e * strides[4];
            out[i] = static_cast<float>(alpha * sum[i] + (beta == 0 ? 0.0 : beta * out[i]));
          }
}

}  // namespace

void ReferenceConvolutionForward(const ConvProblem& p, const float* x, const float* w, float* y,
                                 double alpha, double beta) {
  std::vector<double> sum(p.y_span, 0.0);
  ForEachProduct(p, [&](int64_t yi, int64_t xi, int64_t wi) {
    sum[yi] += static_cast<double>(x[xi]) * w[wi];
  });
  const int64_t dims[5] = {p.n, p.k, p.out[0], p.out[1], p.out[2]};
  BlendInto(sum, dims, p.y_stride, y, alpha, beta);
}

void ReferenceConvolutionBackwardData(const ConvProblem& p, const float* dy, const float* w,
                                      float* dx, double alpha, double beta) {
  std::vector<double> sum(p.x_span, 0.0);
  ForEachProduct(p, [&](int64_t yi, int64_t xi, int64_t wi) {
    sum[xi] += static_cast<double>(dy[yi]) * w[wi];
  });
  const int64_t dims[5] = {p.n, p.c, p.in[0], p.in[1], p.in[2]};
  BlendInto(sum, dims, p.x_stride, dx, alpha, beta);
}

void ReferenceConvolutionBackwardFilter(const ConvProblem& p, const float* x, const float* dy,
                                        float* dw, double alpha, double beta) {
  std::vector<double> sum(p.w_count, 0.0);
  ForEachProduct(p, [&](int64_t yi, int64_t xi, int64_t wi) {
    sum[wi] += static_cast<double>(x[xi]) * dy[yi];
  });
  const int64_t dims[5] = {p.k, p.cg(), p.filter[0], p.filter[1], p.filter[2]};
  BlendInto(sum, dims, p.w_stride, dw, alpha, beta);
}

void ReferenceConvolutionBackwardBias(const ConvProblem& p, const float* dy, float* db,
                                      double alpha, double beta) {
  for (int64_t k = 0; k < p.k; ++k) {
    double sum = 0;
    for (int64_t n = 0; n < p.n; ++n)
      for (int64_t o = 0; o < p.out[0]; ++o)
        for (int64_t pp = 0; pp < p.out[1]; ++pp)
          for (int64_t q = 0; q < p.out[2]; ++q)
            sum += dy[n * p.y_stride[0] + k * p.y_stride[1] + o * p.y_stride[2] +
                      pp * p.y_stride[3] + q * p.y_stride[4]];
    db[k] = static_cast<float>(alpha * sum + (beta == 0 ? 0.0 : beta * db[k]));
  }
}

}  // namespace dnn
}  // namespace kiln
