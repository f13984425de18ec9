// CPU Convolution: for each image and group, unfold the input patches into a [C/g*R*S, P*Q]
// matrix (im2col, in the workspace) and multiply by the group's [K/g, C/g*R*S] filter with
// sgemm. Handles stride, padding, dilation and groups; 2-d, cross-correlation, NCHW f32.
// Its backward ops are the same GEMMs transposed:
//   ConvolutionBackwardData   col = W_gᵀ · dy_g ([C/g·R·S, P·Q]), then col2im adds it into dx
//   ConvolutionBackwardFilter dW_g += dy_g · im2col(x_g)ᵀ, summed over the images
#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/cpu/cpu_kernel.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/im2col.h"
#include "ops/convolution_params.h"

namespace kiln {

namespace {

// The patch matrix of one image's group: [C/g·R·S, P·Q] floats.
size_t PatchBytes(int64_t c, int64_t group, int64_t r, int64_t s, int64_t p, int64_t q) {
  return static_cast<size_t>(c / group * r * s * p * q) * sizeof(float);
}

size_t WorkspaceOf(const Node& node) {
  const TensorType& w = node.input(1).type();
  const TensorType& y = node.output_types()[0];
  return PatchBytes(node.input(0).type().dim(1), node.GetInt("group"), w.dim(2), w.dim(3), y.dim(2),
                    y.dim(3));
}

class Im2colConvolution : public Kernel {
 public:
  explicit Im2colConvolution(const Node& node) {
    const TensorType& x = node.input(0).type();
    const TensorType& w = node.input(1).type();
    const TensorType& y = node.output_types()[0];
    params_ = *ConvolutionParams::FromAttrs(node.attrs(), 2);
    n_ = x.dim(0);
    c_ = x.dim(1);
    h_ = x.dim(2);
    w_ = x.dim(3);
    k_ = y.dim(1);
    p_ = y.dim(2);
    q_ = y.dim(3);
    r_ = w.dim(2);
    s_ = w.dim(3);
    has_bias_ = node.num_inputs() > 2;
    has_residual_ = node.num_inputs() > 3;
    relu_ = node.GetString("activation") == "relu";
    slope_ = static_cast<float>(node.GetFloat("negative_slope"));
  }

  size_t WorkspaceBytes() const override { return PatchBytes(c_, params_.group, r_, s_, p_, q_); }

  absl::Status Run(const KernelArgs& args) const override {
    const float* x = static_cast<const float*>(args.inputs[0].data);
    const float* filter = static_cast<const float*>(args.inputs[1].data);
    const float* bias = has_bias_ ? static_cast<const float*>(args.inputs[2].data) : nullptr;
    float* y = static_cast<float*>(args.outputs[0].data);
    float* col = static_cast<float*>(args.workspace);
    const int64_t g = params_.group, cg = c_ / g, kg = k_ / g, rows = cg * r_ * s_, cols = p_ * q_;
    for (int64_t n = 0; n < n_; ++n) {
      for (int64_t grp = 0; grp < g; ++grp) {
        Im2col(Im2colShape::Of(params_, cg, h_, w_, r_, s_, p_, q_),
               x + (n * c_ + grp * cg) * h_ * w_, col);
        float* yg = y + (n * k_ + grp * kg) * cols;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(kg),
                    static_cast<int>(cols), static_cast<int>(rows), 1.0f, filter + grp * kg * rows,
                    static_cast<int>(rows), col, static_cast<int>(cols), 0.0f, yg,
                    static_cast<int>(cols));
        if (bias != nullptr) {
          for (int64_t k = 0; k < kg; ++k) {
            const float b = bias[grp * kg + k];
            for (int64_t i = 0; i < cols; ++i) yg[k * cols + i] += b;
          }
        }
        // The fused epilogue (passes/fuse_conv_epilogue): + residual, then the ReLU.
        if (has_residual_) {
          const float* z = static_cast<const float*>(args.inputs[3].data) + (yg - y);
          for (int64_t i = 0; i < kg * cols; ++i) yg[i] += z[i];
        }
        if (relu_) {
          for (int64_t i = 0; i < kg * cols; ++i) {
            yg[i] = std::max(yg[i], 0.0f) + slope_ * std::min(yg[i], 0.0f);
          }
        }
      }
    }
    return absl::OkStatus();
  }

 private:
  ConvolutionParams params_;
  int64_t n_, c_, h_, w_, k_, p_, q_, r_, s_;
  bool has_bias_, has_residual_, relu_;
  float slope_;
};

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

absl::Status Conv2dCrossCorrelation(const Node& node) {
  if (node.input(0).type().rank() != 4) {
    return absl::UnimplementedError("only 2-d convolution (4-d tensors)");
  }
  if (node.GetString("mode") != "cross_correlation") {
    return absl::UnimplementedError("only cross-correlation mode");
  }
  return RequireDenseF32(node);
}

}  // namespace

absl::Status RegisterCpuConvolution(KernelRegistry& registry) {
  KernelFactory f;
  f.key = {"Convolution", Backend::kCpu, "f32", "nchw", "im2col_gemm"};
  f.priority = 10;
  f.can_implement = Conv2dCrossCorrelation;
  f.choose = [](const Node& node, const KernelOptions&) -> absl::StatusOr<KernelChoice> {
    return FixedChoice(WorkspaceOf(node));
  };
  f.build = [](const Node& node, const KernelChoice&) -> absl::StatusOr<std::unique_ptr<Kernel>> {
    return std::unique_ptr<Kernel>(new Im2colConvolution(node));
  };
  KILN_RETURN_IF_ERROR(registry.Register(std::move(f)));
  KILN_RETURN_IF_ERROR(RegisterCpuKernel(
      registry, "ConvolutionBackwardData", "nchw", "col2im_gemm", Conv2dCrossCorrelation,
      [](const Node& node) -> Kernel* { return new ConvBackwardData(DataGradientShape(node)); },
      [](const Node& node) { return DataGradientShape(node).patch_bytes(); }));
  KILN_RETURN_IF_ERROR(RegisterCpuKernel(
      registry, "ConvolutionBackwardFilter", "nchw", "im2col_gemm", Conv2dCrossCorrelation,
      [](const Node& node) -> Kernel* { return new ConvBackwardFilter(FilterGradientShape(node)); },
      [](const Node& node) { return FilterGradientShape(node).patch_bytes(); }));
  return absl::OkStatus();
}

}  // namespace kiln
