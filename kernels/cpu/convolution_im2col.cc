// CPU Convolution: for each image and group, unfold the input patches into a [C/g*R*S, P*Q]
// matrix (im2col, in the workspace) and multiply by the group's [K/g, C/g*R*S] filter with
// sgemm. Handles stride, padding, dilation and groups; 2-d, cross-correlation, NCHW f32.
#include <cblas.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
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

}  // namespace

absl::Status RegisterCpuConvolution(KernelRegistry& registry) {
  KernelFactory f;
  f.key = {"Convolution", Backend::kCpu, "f32", "nchw", "im2col_gemm"};
  f.priority = 10;
  f.can_implement = [](const Node& node) -> absl::Status {
    if (node.input(0).type().rank() != 4) {
      return absl::UnimplementedError("only 2-d convolution (4-d tensors)");
    }
    if (node.GetString("mode") != "cross_correlation") {
      return absl::UnimplementedError("only cross-correlation mode");
    }
    return RequireDenseF32(node);
  };
  f.choose = [](const Node& node, const KernelOptions&) -> absl::StatusOr<KernelChoice> {
    return FixedChoice(WorkspaceOf(node));
  };
  f.build = [](const Node& node, const KernelChoice&) -> absl::StatusOr<std::unique_ptr<Kernel>> {
    return std::unique_ptr<Kernel>(new Im2colConvolution(node));
  };
  return registry.Register(std::move(f));
}

}  // namespace kiln
