// CPU InnerProduct: one sgemm, y[M,N] = x[M,K] * W^T (or W when transposed) + b.
#include <cblas.h>

#include "base/status_macros.h"
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
  return registry.Register(std::move(f));
}

}  // namespace kiln
