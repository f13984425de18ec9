// Wraps the CUDA launchers of cuda_launch.h as Kernels, and InnerProduct as a cuBLAS SGEMM.
#include "kernels/cuda/cuda_kernels.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "engine/status_macros.h"
#include "kernels/cuda/conv_graph_kernel.h"
#include "kernels/cuda/cuda_launch.h"
#include "kernels/cuda/primitive_launch.h"
#include "ops/convolution_params.h"
#include "ops/pooling_params.h"
#include "ops/shape_util.h"

namespace kiln {

namespace {

const float* In(const KernelArgs& a, int i) { return static_cast<const float*>(a.inputs[i].data); }
float* Out(const KernelArgs& a, int i = 0) { return static_cast<float*>(a.outputs[i].data); }

// ElementwiseCreator's kind for Dropout (the activation kinds are dnn::ActivationKind, >= 0).
constexpr int kDropout = -1;

// A Kernel whose Run is one launcher call captured at plan time.
class LaunchKernel : public Kernel {
 public:
  using Fn = std::function<int(const KernelArgs&)>;
  LaunchKernel(std::string what, Fn fn) : what_(std::move(what)), fn_(std::move(fn)) {}
  absl::Status Run(const KernelArgs& args) const override {
    const int error = fn_(args);
    if (error == 0) return absl::OkStatus();
    return absl::InternalError(absl::StrCat(
        what_, " launch failed: ", cudaGetErrorString(static_cast<cudaError_t>(error))));
  }

 private:
  std::string what_;
  Fn fn_;
};

using CreateFn = std::function<absl::StatusOr<LaunchKernel::Fn>(const Node&)>;
using CheckFn = std::function<absl::Status(const Node&)>;

absl::Status Add(KernelRegistry& registry, const std::string& op, const std::string& layout,
                 const std::string& algorithm, CheckFn check, CreateFn create) {
  KernelFactory f;
  f.key = {op, Backend::kCuda, "f32", layout, algorithm};
  f.can_implement = [check](const Node& node) -> absl::Status {
    KILN_RETURN_IF_ERROR(RequireDenseF32(node));
    return check ? check(node) : absl::OkStatus();
  };
  const std::string name = f.key.Name();
  f.create = [create, name](const Node& node) -> absl::StatusOr<std::unique_ptr<Kernel>> {
    KILN_ASSIGN_OR_RETURN(LaunchKernel::Fn fn, create(node));
    return std::unique_ptr<Kernel>(new LaunchKernel(name, std::move(fn)));
  };
  return registry.Register(std::move(f));
}

absl::Status Require2d(const Node& node) {
  if (node.input(0).type().rank() != 4) {
    return absl::UnimplementedError("only 2-d (4-d NCHW tensors)");
  }
  return absl::OkStatus();
}

// Packed (N, C, D, H, W) strides of a dense [n, c, d, h, w] tensor.
void PackedStrides5(const int64_t* dims, int64_t* strides) {
  int64_t step = 1;
  for (int d = 4; d >= 0; --d) {
    strides[d] = step;
    step *= dims[d];
  }
}

// The graph's pooling runs on the primitive layer's kernels (row-tiled for NCHW).
absl::StatusOr<LaunchKernel::Fn> CreatePool(const Node& node) {
  KILN_ASSIGN_OR_RETURN(PoolingParams p, PoolingParams::Create(node.attrs(), node.input(0).type()));
  const TensorType& x = node.input(0).type();
  cuda::PoolingCall c;
  c.mode = static_cast<int>(p.mode);  // both: 0 max, 1 average over the padded window, 2 without
  c.n = x.dim(0);
  c.c = x.dim(1);
  for (int i = 0; i < 2; ++i) {
    c.in[1 + i] = x.dim(2 + i);
    c.out[1 + i] = p.output[i];
    c.window[1 + i] = p.kernel[i];
    c.stride[1 + i] = p.stride[i];
    c.pad[1 + i] = p.pad[i];
  }
  const int64_t x_dims[5] = {c.n, c.c, 1, c.in[1], c.in[2]};
  const int64_t y_dims[5] = {c.n, c.c, 1, c.out[1], c.out[2]};
  PackedStrides5(x_dims, c.x_strides);
  PackedStrides5(y_dims, c.y_strides);
  return [c](const KernelArgs& a) mutable {
    c.x = In(a, 0);
    c.result = Out(a);
    return cuda::LaunchPoolingForward(c, a.stream);
  };
}

// LRN across channels on the primitive layer's kernels: x as [n, c, positions], since the
// window runs over channels only.
absl::StatusOr<LaunchKernel::Fn> CreateLrn(const Node& node) {
  const TensorType& x = node.input(0).type();
  cuda::LrnCall c;
  c.across = true;
  c.size = node.GetInt("local_size");
  c.alpha = static_cast<float>(node.GetFloat("alpha"));
  c.beta = static_cast<float>(node.GetFloat("beta"));
  c.k = static_cast<float>(node.GetFloat("k"));
  c.n = x.dim(0);
  c.c = x.dim(1);
  c.sp[2] = ProductOfDims(x.dims(), 2, x.rank());
  c.spatial_rank = 1;
  const int64_t dims[5] = {c.n, c.c, 1, 1, c.sp[2]};
  PackedStrides5(dims, c.x_strides);
  PackedStrides5(dims, c.y_strides);
  return [c](const KernelArgs& a) mutable {
    c.x = In(a, 0);
    c.out = Out(a);
    return cuda::LaunchLrnForward(c, a.stream);
  };
}

// Softmax over `axis` on the primitive layer's kernels: x as [outer, c, inner], rows indexed by
// (outer, inner), each row c elements `inner` apart.
absl::StatusOr<LaunchKernel::Fn> CreateSoftmax(const Node& node) {
  const TensorType& x = node.input(0).type();
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(node.GetInt("axis"), x.rank(), "axis"));
  const int64_t outer = ProductOfDims(x.dims(), 0, axis), c = x.dim(axis),
                inner = ProductOfDims(x.dims(), axis + 1, x.rank());
  cuda::SoftmaxCall call;
  call.log = node.GetBool("log");
  call.outer_rank = inner == 1 ? 1 : 2;  // a classifier's [N, classes]: rows are just N
  call.outer_dims[0] = outer;
  call.outer_dims[1] = inner;
  call.row_rank = 1;
  call.row_dims[0] = c;
  for (int k : {0, 2}) {  // x and y; operand 1 (dy) is unused forward
    call.outer_strides[k][0] = c * inner;
    call.outer_strides[k][1] = 1;
    call.row_strides[k][0] = inner;
  }
  call.rows = outer * inner;
  call.row_length = c;
  return [call](const KernelArgs& a) mutable {
    call.x = In(a, 0);
    call.out = Out(a);
    return call.rows == 0 ? 0 : cuda::LaunchSoftmaxForward(call, a.stream);
  };
}

// Element-wise graph ops on the primitive layer's element-wise kernel (16-byte accesses on dense
// f32): an activation of `kind`, or Dropout (kind < 0).
CreateFn ElementwiseCreator(int kind) {
  return [kind](const Node& node) -> absl::StatusOr<LaunchKernel::Fn> {
    const AttrMap& at = node.attrs();
    auto f = [&](const char* name) { return static_cast<float>(std::get<double>(at.at(name))); };
    cuda::ElementwiseCall call;
    call.op = cuda::ElementwiseOp::kActivation;
    call.act.kind = kind;
    switch (kind) {
      case dnn::kActRelu:
        call.act.coef = f("negative_slope");
        break;
      case dnn::kActElu:
        call.act.coef = f("alpha");
        break;
      case dnn::kActClippedRelu:
        call.act.coef = f("ceiling");
        break;
      case dnn::kActPower:
        call.act.power = f("power");
        call.act.scale = f("scale");
        call.act.shift = f("shift");
        break;
      case kDropout:
        // Caffe's train-time scaling; at test time Dropout passes x through.
        call.op =
            node.GetBool("training") ? cuda::ElementwiseOp::kDropout : cuda::ElementwiseOp::kCopy;
        call.ratio = f("ratio");
        call.coef[0] = 1.0f / (1.0f - call.ratio);
        call.seed = static_cast<uint64_t>(node.GetInt("seed"));
        break;
      default:
        break;
    }
    call.rank = 1;
    call.dims[0] = node.input(0).type().num_elements();
    call.num_inputs = 1;
    call.in[0].strides[0] = 1;
    call.out.strides[0] = 1;
    return [call](const KernelArgs& a) mutable {
      call.in[0].data = In(a, 0);
      call.out.data = Out(a);
      return call.dims[0] == 0 ? 0 : cuda::LaunchElementwise(call, a.stream);
    };
  };
}

// InnerProduct as one cuBLAS SGEMM on the row-major operands: cuBLAS is column-major, so it
// computes y^T[N,M] = W[N,K]^T' * x^T[K,M] with the roles of the operands swapped.
class CublasInnerProduct : public Kernel {
 public:
  explicit CublasInnerProduct(const Node& node) {
    const TensorType& x = node.input(0).type();
    const int axis = *NormalizeAxis(node.GetInt("axis"), x.rank(), "axis");
    m_ = static_cast<int>(ProductOfDims(x.dims(), 0, axis));
    k_ = static_cast<int>(ProductOfDims(x.dims(), axis, x.rank()));
    n_ = static_cast<int>(node.output_types()[0].dims().back());
    transpose_ = node.GetBool("transpose");
    bias_ = node.num_inputs() > 2;
  }
  absl::Status Run(const KernelArgs& a) const override {
    if (a.blas_handle == nullptr) return absl::FailedPreconditionError("no cuBLAS handle bound");
    auto handle = static_cast<cublasHandle_t>(a.blas_handle);
    float beta = 0.0f;
    if (bias_) {
      KILN_CUDA_RETURN_IF_ERROR(cuda::LaunchBroadcastRows(m_, n_, In(a, 2), Out(a), a.stream));
      beta = 1.0f;
    }
    const float alpha = 1.0f;
    cublasStatus_t s = cublasSetStream(handle, static_cast<cudaStream_t>(a.stream));
    if (s == CUBLAS_STATUS_SUCCESS) {
      s = cublasSgemm(handle, transpose_ ? CUBLAS_OP_N : CUBLAS_OP_T, CUBLAS_OP_N, n_, m_, k_,
                      &alpha, In(a, 1), transpose_ ? n_ : k_, In(a, 0), k_, &beta, Out(a), n_);
    }
    if (s != CUBLAS_STATUS_SUCCESS) {
      return absl::InternalError(absl::StrCat("cublasSgemm failed: ", cublasGetStatusString(s)));
    }
    return absl::OkStatus();
  }

 private:
  int m_, k_, n_;
  bool transpose_, bias_;
};

}  // namespace

absl::Status RegisterCudaKernels(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(RegisterCudaConvolutionKernel(registry));
  KILN_RETURN_IF_ERROR(Add(registry, "Pooling", "nchw", "direct", Require2d, CreatePool));
  KILN_RETURN_IF_ERROR(Add(
      registry, "LRN", "any", "direct",
      [](const Node& node) -> absl::Status {
        if (node.GetString("region") != "across_channels") {
          return absl::UnimplementedError("only across_channels");
        }
        return absl::OkStatus();
      },
      CreateLrn));
  KILN_RETURN_IF_ERROR(Add(registry, "Softmax", "any", "direct", nullptr, CreateSoftmax));
  const std::pair<const char*, int> elementwise[] = {{"ReLU", dnn::kActRelu},
                                                     {"Sigmoid", dnn::kActSigmoid},
                                                     {"TanH", dnn::kActTanh},
                                                     {"ELU", dnn::kActElu},
                                                     {"ClippedReLU", dnn::kActClippedRelu},
                                                     {"AbsVal", dnn::kActAbs},
                                                     {"Power", dnn::kActPower},
                                                     {"Dropout", kDropout}};
  for (const auto& [op, kind] : elementwise) {
    KILN_RETURN_IF_ERROR(
        Add(registry, op, "any", "elementwise", nullptr, ElementwiseCreator(kind)));
  }
  KernelFactory ip;
  ip.key = {"InnerProduct", Backend::kCuda, "f32", "any", "cublas_gemm"};
  ip.can_implement = RequireDenseF32;
  ip.create = [](const Node& node) -> absl::StatusOr<std::unique_ptr<Kernel>> {
    return std::unique_ptr<Kernel>(new CublasInnerProduct(node));
  };
  return registry.Register(std::move(ip));
}

}  // namespace kiln
