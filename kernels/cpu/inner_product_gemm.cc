// CPU InnerProduct: one sgemm, y[M,N] = x[M,K] * W^T (or W when transposed) + b. Its backward
// ops are the same GEMM transposed:
//   InnerProductBackwardData  dx[M,K] = dy[M,N] · W[N,K] (Wᵀ when transposed)
//   InnerProductBackwardFilter dW[N,K] = dyᵀ · x (or xᵀ · dy when transposed)
#include <cblas.h>

#include <vector>

#include "base/status_macros.h"
#include "kernels/cpu/cpu_kernel.h"
#include "kernels/cpu/cpu_kernels.h"
#include "ops/shape_util.h"

namespace kiln {

namespace {

class GemmInnerProduct : public Kernel {
 public:
  explicit GemmInnerProduct(const Node& node) {
    const TensorType& x = node.input(0).type();
    const int axis = *NormalizeAxis(node.GetInt("axis"), x.rank(), "axis");
    m_ = ProductOfDims(x.dims(), 0, axis);
    k_ = ProductOfDims(x.dims(), axis, x.rank());
    transpose_ = node.GetBool("transpose");
    n_ = node.output_types()[0].dims().back();
    has_bias_ = node.num_inputs() > 2;
  }

  absl::Status Run(const KernelArgs& args) const override {
    const float* x = static_cast<const float*>(args.inputs[0].data);
    const float* w = static_cast<const float*>(args.inputs[1].data);
    float* y = static_cast<float*>(args.outputs[0].data);
    float beta = 0.0f;
    if (has_bias_) {
      const float* b = static_cast<const float*>(args.inputs[2].data);
      for (int64_t i = 0; i < m_; ++i) {
        for (int64_t j = 0; j < n_; ++j) y[i * n_ + j] = b[j];
      }
      beta = 1.0f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, transpose_ ? CblasNoTrans : CblasTrans,
                static_cast<int>(m_), static_cast<int>(n_), static_cast<int>(k_), 1.0f, x,
                static_cast<int>(k_), w, static_cast<int>(transpose_ ? n_ : k_), beta, y,
                static_cast<int>(n_));
    return absl::OkStatus();
  }

 private:
  int64_t m_, k_, n_;
  bool transpose_, has_bias_;
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

}  // namespace

absl::Status RegisterCpuInnerProduct(KernelRegistry& registry) {
  KernelFactory f;
  f.key = {"InnerProduct", Backend::kCpu, "f32", "any", "gemm"};
  f.priority = 10;
  f.can_implement = RequireDenseF32;
  f.choose = [](const Node&, const KernelOptions&) -> absl::StatusOr<KernelChoice> {
    return FixedChoice();
  };
  f.build = [](const Node& node, const KernelChoice&) -> absl::StatusOr<std::unique_ptr<Kernel>> {
    return std::unique_ptr<Kernel>(new GemmInnerProduct(node));
  };
  KILN_RETURN_IF_ERROR(registry.Register(std::move(f)));
  KILN_RETURN_IF_ERROR(RegisterCpuKernel(registry, "InnerProductBackwardData", "any", "gemm",
                                         RequireDenseF32, [](const Node& node) -> Kernel* {
                                           return new IpBackwardData(
                                               IpShape::Of(node, node.output_types()[0].dims(),
                                                           node.input(0).type().dims().back()));
                                         }));
  return RegisterCpuKernel(
      registry, "InnerProductBackwardFilter", "any", "gemm", RequireDenseF32,
      [](const Node& node) -> Kernel* {
        return new IpBackwardFilter(
            IpShape::Of(node, node.input(0).type().dims(), node.input(1).type().dims().back()));
      });
}

}  // namespace kiln
