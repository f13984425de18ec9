// CPU backward of convolution and inner product through OpenBLAS, the same GEMMs as the forward
// kernels transposed:
//   ConvolutionBackwardData   col = W_gᵀ · dy_g ([C/g·R·S, P·Q]), then col2im adds it into dx
//   ConvolutionBackwardFilter dW_g += dy_g · im2col(x_g)ᵀ, summed over the images
//   InnerProductBackwardData  dx[M,K] = dy[M,N] · W[N,K] (Wᵀ when transposed)
//   InnerProductBackwardFilter dW[N,K] = dyᵀ · x (or xᵀ · dy when transposed)
// 2-d cross-correlation, dense f32 NCHW, as the forward CPU kernels.
#include <cblas.h>

#include <algorithm>

#include "base/status_macros.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/im2col.h"
#include "ops/convolution_params.h"
#include "ops/shape_util.h"

namespace kiln {

namespace {

// The convolution between x [N,C,H,W], filter [K,C/g,R,S] and y [N,K,P,Q].
struct ConvShape {
  ConvolutionParams params;
  int64_t n, c, h, w, k, p, q, r, s;

  static ConvShape Of(const Node& node, const std::vector<int64_t>& x,
                      const std::vector<int64_t>& f, const std::vector<int64_t>& y) {
    ConvShape g;
    g.params = *ConvolutionParams::FromAttrs(node.attrs(), 2);
    g.n = x[0];
    g.c = x[1];
    g.h = x[2];
    g.w = x[3];
    g.k = y[1];
    g.p = y[2];
    g.q = y[3];
    g.r = f[2];
    g.s = f[3];
    return g;
  }
  int64_t group() const { return params.group; }
  int64_t rows() const { return c / group() * r * s; }  // of the patch matrix
  int64_t cols() const { return p * q; }
  Im2colShape patches() const { return Im2colShape::Of(params, c / group(), h, w, r, s, p, q); }
  // The patch matrix of one image's group: both convolution gradients' workspace.
  size_t patch_bytes() const { return static_cast<size_t>(rows() * cols()) * sizeof(float); }
};

// dx [N,C,H,W] from dy [N,K,P,Q] (input 0) and the filter (input 1).
ConvShape DataGradientShape(const Node& node) {
  return ConvShape::Of(node, node.output_types()[0].dims(), node.input(1).type().dims(),
                       node.input(0).type().dims());
}
// dW from x (input 0) and dy (input 1).
ConvShape FilterGradientShape(const Node& node) {
  return ConvShape::Of(node, node.input(0).type().dims(), node.output_types()[0].dims(),
                       node.input(1).type().dims());
}

class ConvBackwardData : public Kernel {
 public:
  explicit ConvBackwardData(const ConvShape& g) : g_(g) {}
  size_t WorkspaceBytes() const override { return g_.patch_bytes(); }
  absl::Status Run(const KernelArgs& args) const override {
    const float* dy = static_cast<const float*>(args.inputs[0].data);
    const float* w = static_cast<const float*>(args.inputs[1].data);
    float* dx = static_cast<float*>(args.outputs[0].data);
    float* col = static_cast<float*>(args.workspace);
    const int64_t grp = g_.group(), cg = g_.c / grp, kg = g_.k / grp;
    std::fill(dx, dx + g_.n * g_.c * g_.h * g_.w, 0.0f);
    for (int64_t n = 0; n < g_.n; ++n) {
      for (int64_t i = 0; i < grp; ++i) {
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(g_.rows()),
                    static_cast<int>(g_.cols()), static_cast<int>(kg), 1.0f, w + i * kg * g_.rows(),
                    static_cast<int>(g_.rows()), dy + (n * g_.k + i * kg) * g_.cols(),
                    static_cast<int>(g_.cols()), 0.0f, col, static_cast<int>(g_.cols()));
        Col2imAdd(g_.patches(), col, dx + (n * g_.c + i * cg) * g_.h * g_.w);
      }
    }
    return absl::OkStatus();
  }

 private:
  ConvShape g_;
};

class ConvBackwardFilter : public Kernel {
 public:
  explicit ConvBackwardFilter(const ConvShape& g) : g_(g) {}
  size_t WorkspaceBytes() const override { return g_.patch_bytes(); }
  absl::Status Run(const KernelArgs& args) const override {
    const float* x = static_cast<const float*>(args.inputs[0].data);
    const float* dy = static_cast<const float*>(args.inputs[1].data);
    float* dw = static_cast<float*>(args.outputs[0].data);
    float* col = static_cast<float*>(args.workspace);
    const int64_t grp = g_.group(), cg = g_.c / grp, kg = g_.k / grp;
    for (int64_t n = 0; n < g_.n; ++n) {
      for (int64_t i = 0; i < grp; ++i) {
        Im2col(g_.patches(), x + (n * g_.c + i * cg) * g_.h * g_.w, col);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(kg),
                    static_cast<int>(g_.rows()), static_cast<int>(g_.cols()), 1.0f,
                    dy + (n * g_.k + i * kg) * g_.cols(), static_cast<int>(g_.cols()), col,
                    static_cast<int>(g_.cols()), n == 0 ? 0.0f : 1.0f, dw + i * kg * g_.rows(),
                    static_cast<int>(g_.rows()));
      }
    }
    return absl::OkStatus();
  }

 private:
  ConvShape g_;
};

struct IpShape {
  int64_t m, k, n;
  bool transpose;

  static IpShape Of(const Node& node, const std::vector<int64_t>& x, int64_t n) {
    const int axis = *NormalizeAxis(node.GetInt("axis"), x.size(), "axis");
    return {ProductOfDims(x, 0, axis), ProductOfDims(x, axis, x.size()), n,
            node.GetBool("transpose")};
  }
};

class IpBackwardData : public Kernel {
 public:
  explicit IpBackwardData(const IpShape& s) : s_(s) {}
  absl::Status Run(const KernelArgs& args) const override {
    const float* dy = static_cast<const float*>(args.inputs[0].data);
    const float* w = static_cast<const float*>(args.inputs[1].data);
    float* dx = static_cast<float*>(args.outputs[0].data);
    // dx[M,K] = dy[M,N] · W[N,K], or dy · W[K,N]ᵀ when transposed.
    cblas_sgemm(CblasRowMajor, CblasNoTrans, s_.transpose ? CblasTrans : CblasNoTrans,
                static_cast<int>(s_.m), static_cast<int>(s_.k), static_cast<int>(s_.n), 1.0f, dy,
                static_cast<int>(s_.n), w, static_cast<int>(s_.transpose ? s_.n : s_.k), 0.0f, dx,
                static_cast<int>(s_.k));
    return absl::OkStatus();
  }

 private:
  IpShape s_;
};

class IpBackwardFilter : public Kernel {
 public:
  explicit IpBackwardFilter(const IpShape& s) : s_(s) {}
  absl::Status Run(const KernelArgs& args) const override {
    const float* x = static_cast<const float*>(args.inputs[0].data);
    const float* dy = static_cast<const float*>(args.inputs[1].data);
    float* dw = static_cast<float*>(args.outputs[0].data);
    if (s_.transpose) {  // dW[K,N] = xᵀ · dy
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(s_.k),
                  static_cast<int>(s_.n), static_cast<int>(s_.m), 1.0f, x, static_cast<int>(s_.k),
                  dy, static_cast<int>(s_.n), 0.0f, dw, static_cast<int>(s_.n));
    } else {  // dW[N,K] = dyᵀ · x
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(s_.n),
                  static_cast<int>(s_.k), static_cast<int>(s_.m), 1.0f, dy, static_cast<int>(s_.n),
                  x, static_cast<int>(s_.k), 0.0f, dw, static_cast<int>(s_.k));
    }
    return absl::OkStatus();
  }

 private:
  IpShape s_;
};

absl::Status Conv2dCrossCorrelation(const Node& node) {
  if (node.input(0).type().rank() != 4) {
    return absl::UnimplementedError("only 2-d convolution (4-d tensors)");
  }
  if (node.GetString("mode") != "cross_correlation") {
    return absl::UnimplementedError("only cross-correlation mode");
  }
  return RequireDenseF32(node);
}

// `workspace` (null: none) says what `make`'s kernel will need, before it is made.
absl::Status Register(KernelRegistry& registry, const char* op, const char* layout,
                      const char* algorithm, std::function<absl::Status(const Node&)> check,
                      std::function<Kernel*(const Node&)> make,
                      std::function<size_t(const Node&)> workspace = nullptr) {
  KernelFactory f;
  f.key = {op, Backend::kCpu, "f32", layout, algorithm};
  f.priority = 10;
  f.can_implement = std::move(check);
  f.choose = [workspace](const Node& node, const KernelOptions&) -> absl::StatusOr<KernelChoice> {
    return FixedChoice(workspace ? workspace(node) : 0);
  };
  f.build = [make](const Node& node,
                   const KernelChoice&) -> absl::StatusOr<std::unique_ptr<Kernel>> {
    return std::unique_ptr<Kernel>(make(node));
  };
  return registry.Register(std::move(f));
}

}  // namespace

absl::Status RegisterCpuGradients(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(Register(
      registry, "ConvolutionBackwardData", "nchw", "col2im_gemm", Conv2dCrossCorrelation,
      [](const Node& node) -> Kernel* { return new ConvBackwardData(DataGradientShape(node)); },
      [](const Node& node) { return DataGradientShape(node).patch_bytes(); }));
  KILN_RETURN_IF_ERROR(Register(
      registry, "ConvolutionBackwardFilter", "nchw", "im2col_gemm", Conv2dCrossCorrelation,
      [](const Node& node) -> Kernel* { return new ConvBackwardFilter(FilterGradientShape(node)); },
      [](const Node& node) { return FilterGradientShape(node).patch_bytes(); }));
  KILN_RETURN_IF_ERROR(Register(registry, "InnerProductBackwardData", "any", "gemm",
                                RequireDenseF32, [](const Node& node) -> Kernel* {
                                  return new IpBackwardData(
                                      IpShape::Of(node, node.output_types()[0].dims(),
                                                  node.input(0).type().dims().back()));
                                }));
  return Register(registry, "InnerProductBackwardFilter", "any", "gemm", RequireDenseF32,
                  [](const Node& node) -> Kernel* {
                    return new IpBackwardFilter(IpShape::Of(node, node.input(0).type().dims(),
                                                            node.input(1).type().dims().back()));
                  });
}

}  // namespace kiln
