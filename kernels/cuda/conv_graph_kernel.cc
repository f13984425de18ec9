#include "kernels/cuda/conv_graph_kernel.h"

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "engine/status_macros.h"
#include "kernels/cuda/conv_gemm_launch.h"
#include "kernels/cuda/convolution.h"
#include "ops/convolution_params.h"

namespace kiln {

namespace {

// Plans keep convolution workspace under this; the heuristic skips algorithms that need more.
constexpr size_t kWorkspaceCap = size_t{256} << 20;

absl::StatusOr<dnn::ConvProblem> ProblemOf(const Node& node) {
  const TensorType& x = node.input(0).type();
  const TensorType& w = node.input(1).type();
  const TensorType& y = node.output_types()[0];
  const int nd = x.rank() - 2;
  KILN_ASSIGN_OR_RETURN(ConvolutionParams params, ConvolutionParams::FromAttrs(node.attrs(), nd));
  KILN_ASSIGN_OR_RETURN(
      dnn::TensorDescriptor xd,
      dnn::TensorDescriptor::CreatePacked(DataType::kF32, dnn::TensorFormat::kNCHW, x.dims()));
  KILN_ASSIGN_OR_RETURN(
      dnn::FilterDescriptor wd,
      dnn::FilterDescriptor::Create(DataType::kF32, dnn::TensorFormat::kNCHW, w.dims()));
  KILN_ASSIGN_OR_RETURN(
      dnn::TensorDescriptor yd,
      dnn::TensorDescriptor::CreatePacked(DataType::kF32, dnn::TensorFormat::kNCHW, y.dims()));
  KILN_ASSIGN_OR_RETURN(dnn::ConvolutionDescriptor conv,
                        dnn::ConvolutionDescriptor::Create(
                            params.pad, params.stride, params.dilation, params.group,
                            params.flip_filter ? dnn::ConvolutionMode::kConvolution
                                               : dnn::ConvolutionMode::kCrossCorrelation));
  return dnn::MakeConvProblem(xd, wd, conv, yd, "cuda Convolution");
}

class ConvGraphKernel : public Kernel {
 public:
  ConvGraphKernel(dnn::ConvProblem p, dnn::ConvAlgo algo, size_t workspace, bool bias,
                  int multiprocessors)
      : p_(p), algo_(algo), workspace_(workspace), bias_(bias), sms_(multiprocessors) {}
  size_t WorkspaceBytes() const override { return workspace_; }
  absl::Status Run(const KernelArgs& a) const override {
    dnn::Handle handle(a.stream, a.blas_handle, sms_);
    KILN_RETURN_IF_ERROR(dnn::RunConvolution(handle, dnn::ConvDirection::kForward, p_, algo_, 1.0f,
                                             0.0f, a.inputs[0].data, a.inputs[1].data,
                                             a.outputs[0].data, a.workspace, a.workspace_bytes));
    if (!bias_) return absl::OkStatus();
    const int e = cuda::LaunchAddChannelBias(p_, cuda::ElementType::kF32, a.inputs[2].data,
                                             a.outputs[0].data, a.stream);
    if (e == 0) return absl::OkStatus();
    return absl::InternalError(absl::StrCat("cuda Convolution bias launch failed: ",
                                            cudaGetErrorString(static_cast<cudaError_t>(e))));
  }

 private:
  dnn::ConvProblem p_;
  dnn::ConvAlgo algo_;
  size_t workspace_;
  bool bias_;
  int sms_;
};

}  // namespace

absl::Status RegisterCudaConvolutionKernel(KernelRegistry& registry) {
  KernelFactory f;
  f.key = {"Convolution", Backend::kCuda, "f32", "nchw", "dnn_heuristic"};
  f.can_implement = [](const Node& node) -> absl::Status {
    for (const Value& v : node.inputs())
      if (v.type().dtype() != DataType::kF32) return absl::UnimplementedError("f32 only");
    const int rank = node.input(0).type().rank();
    if (rank != 4 && rank != 5) return absl::UnimplementedError("2-d and 3-d only");
    return ProblemOf(node).status();
  };
  f.create = [](const Node& node) -> absl::StatusOr<std::unique_ptr<Kernel>> {
    KILN_ASSIGN_OR_RETURN(dnn::ConvProblem p, ProblemOf(node));
    int device = 0, sms = 1;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
      cudaGetLastError();
      sms = 1;
    }
    dnn::Handle probe(nullptr, nullptr, sms);  // the heuristic needs no stream or cuBLAS
    KILN_ASSIGN_OR_RETURN(std::vector<dnn::ConvAlgoPerf> algos,
                          dnn::GetConvolutionAlgorithms(
                              probe, dnn::ConvDirection::kForward, p,
                              dnn::ConvAlgoPreference::kSpecifyWorkspaceLimit, kWorkspaceCap));
    return std::unique_ptr<Kernel>(new ConvGraphKernel(
        p, algos.front().algo, algos.front().workspace_bytes, node.num_inputs() > 2, sms));
  };
  return registry.Register(std::move(f));
}

}  // namespace kiln
