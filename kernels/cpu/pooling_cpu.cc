// CPU Pooling forward and backward (2-d, dense f32 NCHW, max and both averages), written for
// speed: one plane at a time, windows clipped once per output row and column, no
// double-precision detour. The reference kernels stay the oracle (the CPU tests compare against
// them); these are what CPU training runs, where the reference's generality cost half of a LeNet
// step.
#include <algorithm>
#include <cfloat>
#include <cstring>

#include "base/status_macros.h"
#include "kernels/cpu/cpu_kernel.h"
#include "kernels/cpu/cpu_kernels.h"
#include "ops/pooling_params.h"

namespace kiln {

namespace {

struct Pool2d {
  PoolingMode mode;
  int64_t planes, h, w, p, q, kh, kw, sh, sw, ph, pw;

  static absl::StatusOr<Pool2d> Of(const Node& node) {
    const TensorType& x = node.input(0).type();
    KILN_ASSIGN_OR_RETURN(PoolingParams params, PoolingParams::Create(node.attrs(), x));
    Pool2d g;
    g.mode = params.mode;
    g.planes = x.dim(0) * x.dim(1);
    g.h = x.dim(2);
    g.w = x.dim(3);
    g.p = params.output[0];
    g.q = params.output[1];
    g.kh = params.kernel[0];
    g.kw = params.kernel[1];
    g.sh = params.stride[0];
    g.sw = params.stride[1];
    g.ph = params.pad[0];
    g.pw = params.pad[1];
    return g;
  }

  // The window of output (i, j) clipped to the image, and its divisor.
  struct Window {
    int64_t h0, h1, w0, w1;
    float divisor;
  };
  Window At(int64_t i, int64_t j) const {
    const int64_t hs = i * sh - ph, ws = j * sw - pw;
    const int64_t he = std::min(hs + kh, h + ph), we = std::min(ws + kw, w + pw);
    Window win{std::max<int64_t>(hs, 0), std::min(he, h), std::max<int64_t>(ws, 0), std::min(we, w),
               1.0f};
    const int64_t padded = (he - hs) * (we - ws);
    const int64_t inside =
        std::max<int64_t>(win.h1 - win.h0, 0) * std::max<int64_t>(win.w1 - win.w0, 0);
    win.divisor = static_cast<float>(mode == PoolingMode::kAverageIncludePad ? padded : inside);
    return win;
  }
};

class PoolingForward : public Kernel {
 public:
  explicit PoolingForward(Pool2d g) : g_(g) {}
  absl::Status Run(const KernelArgs& args) const override {
    const float* x = static_cast<const float*>(args.inputs[0].data);
    float* y = static_cast<float*>(args.outputs[0].data);
    for (int64_t c = 0; c < g_.planes; ++c) {
      const float* xp = x + c * g_.h * g_.w;
      float* yp = y + c * g_.p * g_.q;
      for (int64_t i = 0; i < g_.p; ++i) {
        for (int64_t j = 0; j < g_.q; ++j) {
          const Pool2d::Window win = g_.At(i, j);
          float acc = g_.mode == PoolingMode::kMax ? -FLT_MAX : 0.0f;
          for (int64_t u = win.h0; u < win.h1; ++u) {
            const float* row = xp + u * g_.w;
            for (int64_t v = win.w0; v < win.w1; ++v) {
              acc = g_.mode == PoolingMode::kMax ? std::max(acc, row[v]) : acc + row[v];
            }
          }
          if (g_.mode != PoolingMode::kMax) acc = win.divisor > 0 ? acc / win.divisor : 0.0f;
          yp[i * g_.q + j] = acc;
        }
      }
    }
    return absl::OkStatus();
  }

 private:
  Pool2d g_;
};

// Max: dy to the first maximum of the window in row-major order (as the forward pass and the
// reference decide); average: dy / divisor to every element of the window.
class PoolingBackward : public Kernel {
 public:
  explicit PoolingBackward(Pool2d g) : g_(g) {}
  absl::Status Run(const KernelArgs& args) const override {
    const float* x = static_cast<const float*>(args.inputs[0].data);
    const float* dy = static_cast<const float*>(args.inputs[2].data);
    float* dx = static_cast<float*>(args.outputs[0].data);
    std::memset(dx, 0, sizeof(float) * g_.planes * g_.h * g_.w);
    for (int64_t c = 0; c < g_.planes; ++c) {
      const float* xp = x + c * g_.h * g_.w;
      const float* dyp = dy + c * g_.p * g_.q;
      float* dxp = dx + c * g_.h * g_.w;
      for (int64_t i = 0; i < g_.p; ++i) {
        for (int64_t j = 0; j < g_.q; ++j) {
          const Pool2d::Window win = g_.At(i, j);
          const float g = dyp[i * g_.q + j];
          if (g_.mode == PoolingMode::kMax) {
            int64_t best = -1;
            float max = -FLT_MAX;
            for (int64_t u = win.h0; u < win.h1; ++u) {
              for (int64_t v = win.w0; v < win.w1; ++v) {
                if (best < 0 || xp[u * g_.w + v] > max) {
                  max = xp[u * g_.w + v];
                  best = u * g_.w + v;
                }
              }
            }
            if (best >= 0) dxp[best] += g;
            continue;
          }
          if (win.divisor <= 0) continue;
          const float share = g / win.divisor;
          for (int64_t u = win.h0; u < win.h1; ++u) {
            for (int64_t v = win.w0; v < win.w1; ++v) dxp[u * g_.w + v] += share;
          }
        }
      }
    }
    return absl::OkStatus();
  }

 private:
  Pool2d g_;
};

absl::Status CheckPool2d(const Node& node) {
  if (node.input(0).type().rank() != 4) {
    return absl::UnimplementedError("only 2-d pooling (4-d tensors)");
  }
  return RequireDenseF32(node);
}

}  // namespace

absl::Status RegisterCpuPooling(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(RegisterCpuKernel(registry, "Pooling", "nchw", "direct", CheckPool2d,
                                         [](const Node& n) -> absl::StatusOr<Kernel*> {
                                           KILN_ASSIGN_OR_RETURN(Pool2d g, Pool2d::Of(n));
                                           return new PoolingForward(g);
                                         }));
  return RegisterCpuKernel(registry, "PoolingGradient", "nchw", "direct", CheckPool2d,
                           [](const Node& n) -> absl::StatusOr<Kernel*> {
                             KILN_ASSIGN_OR_RETURN(Pool2d g, Pool2d::Of(n));
                             return new PoolingBackward(g);
                           });
}

}  // namespace kiln
