// cuDNN 9's legacy convolution API, loaded at run time with dlopen so that Kiln never needs
// cuDNN to build or run: the benchmarks use it, when present, as the competitor on the same
// buffers. The enum values and struct layout below are cuDNN's documented ABI.
#ifndef KILN_BENCH_CUDNN_LOADER_H_
#define KILN_BENCH_CUDNN_LOADER_H_

#include <cstddef>
#include <string>

namespace kiln {
namespace bench {

using cudnnHandle = void*;
using cudnnDesc = void*;

enum CudnnDataType { kCudnnFloat = 0, kCudnnHalf = 2, kCudnnBFloat16 = 9 };
enum CudnnFormat { kCudnnNchw = 0, kCudnnNhwc = 1 };
enum CudnnConvMode { kCudnnConvolution = 0, kCudnnCrossCorrelation = 1 };
enum CudnnMath { kCudnnDefaultMath = 0, kCudnnTensorOpMath = 1, kCudnnFmaMath = 3 };

// cudnnConvolution{Fwd,BwdData,BwdFilter}AlgoPerf_t share this layout.
struct CudnnAlgoPerf {
  int algo;
  int status;
  float time;
  size_t memory;
  int determinism;
  int math_type;
  int reserved[3];
};

struct Cudnn {
  bool loaded = false;
  std::string error;  // why it is not loaded
  std::string path;
  size_t (*GetVersion)() = nullptr;
  int (*Create)(cudnnHandle*) = nullptr;
  int (*SetStream)(cudnnHandle, void*) = nullptr;
  int (*CreateTensorDescriptor)(cudnnDesc*) = nullptr;
  int (*SetTensorNdDescriptor)(cudnnDesc, int, int, const int*, const int*) = nullptr;
  int (*CreateFilterDescriptor)(cudnnDesc*) = nullptr;
  int (*SetFilterNdDescriptor)(cudnnDesc, int, int, int, const int*) = nullptr;
  int (*CreateConvolutionDescriptor)(cudnnDesc*) = nullptr;
  int (*SetConvolutionNdDescriptor)(cudnnDesc, int, const int*, const int*, const int*, int,
                                    int) = nullptr;
  int (*SetConvolutionMathType)(cudnnDesc, int) = nullptr;
  int (*SetConvolutionGroupCount)(cudnnDesc, int) = nullptr;
  int (*FindForwardEx)(cudnnHandle, cudnnDesc, const void*, cudnnDesc, const void*, cudnnDesc,
                       cudnnDesc, void*, int, int*, CudnnAlgoPerf*, void*, size_t) = nullptr;
  int (*FindBackwardDataEx)(cudnnHandle, cudnnDesc, const void*, cudnnDesc, const void*, cudnnDesc,
                            cudnnDesc, void*, int, int*, CudnnAlgoPerf*, void*, size_t) = nullptr;
  int (*FindBackwardFilterEx)(cudnnHandle, cudnnDesc, const void*, cudnnDesc, const void*,
                              cudnnDesc, cudnnDesc, void*, int, int*, CudnnAlgoPerf*, void*,
                              size_t) = nullptr;
  int (*Forward)(cudnnHandle, const void*, cudnnDesc, const void*, cudnnDesc, const void*,
                 cudnnDesc, int, void*, size_t, const void*, cudnnDesc, void*) = nullptr;
  int (*BackwardData)(cudnnHandle, const void*, cudnnDesc, const void*, cudnnDesc, const void*,
                      cudnnDesc, int, void*, size_t, const void*, cudnnDesc, void*) = nullptr;
  int (*BackwardFilter)(cudnnHandle, const void*, cudnnDesc, const void*, cudnnDesc, const void*,
                        cudnnDesc, int, void*, size_t, const void*, cudnnDesc, void*) = nullptr;
  const char* (*GetErrorString)(int) = nullptr;

  // The legacy ops API (activation, pooling, LRN, batch norm, softmax), for the primitives
  // benchmark; `ops_loaded` says whether every one of these was found.
  bool ops_loaded = false;
  int (*CreateActivationDescriptor)(cudnnDesc*) = nullptr;
  int (*SetActivationDescriptor)(cudnnDesc, int mode, int nan_opt, double coef) = nullptr;
  int (*ActivationForward)(cudnnHandle, cudnnDesc, const void*, cudnnDesc, const void*, const void*,
                           cudnnDesc, void*) = nullptr;
  int (*ActivationBackward)(cudnnHandle, cudnnDesc, const void*, cudnnDesc, const void*, cudnnDesc,
                            const void*, cudnnDesc, const void*, const void*, cudnnDesc,
                            void*) = nullptr;
  int (*CreatePoolingDescriptor)(cudnnDesc*) = nullptr;
  int (*SetPooling2dDescriptor)(cudnnDesc, int mode, int nan_opt, int wh, int ww, int ph, int pw,
                                int sh, int sw) = nullptr;
  int (*PoolingForward)(cudnnHandle, cudnnDesc, const void*, cudnnDesc, const void*, const void*,
                        cudnnDesc, void*) = nullptr;
  int (*PoolingBackward)(cudnnHandle, cudnnDesc, const void*, cudnnDesc, const void*, cudnnDesc,
                         const void*, cudnnDesc, const void*, const void*, cudnnDesc,
                         void*) = nullptr;
  int (*CreateLRNDescriptor)(cudnnDesc*) = nullptr;
  int (*SetLRNDescriptor)(cudnnDesc, unsigned n, double alpha, double beta, double k) = nullptr;
  int (*LRNCrossChannelForward)(cudnnHandle, cudnnDesc, int mode, const void*, cudnnDesc,
                                const void*, const void*, cudnnDesc, void*) = nullptr;
  int (*LRNCrossChannelBackward)(cudnnHandle, cudnnDesc, int mode, const void*, cudnnDesc,
                                 const void*, cudnnDesc, const void*, cudnnDesc, const void*,
                                 const void*, cudnnDesc, void*) = nullptr;
  int (*BatchNormForwardTraining)(cudnnHandle, int mode, const void*, const void*, cudnnDesc,
                                  const void*, cudnnDesc, void*, cudnnDesc, const void*,
                                  const void*, double, void*, void*, double, void*,
                                  void*) = nullptr;
  int (*BatchNormBackward)(cudnnHandle, int mode, const void*, const void*, const void*,
                           const void*, cudnnDesc, const void*, cudnnDesc, const void*, cudnnDesc,
                           void*, cudnnDesc, const void*, void*, void*, double, const void*,
                           const void*) = nullptr;
  int (*SoftmaxForward)(cudnnHandle, int algo, int mode, const void*, cudnnDesc, const void*,
                        const void*, cudnnDesc, void*) = nullptr;
  int (*SoftmaxBackward)(cudnnHandle, int algo, int mode, const void*, cudnnDesc, const void*,
                         cudnnDesc, const void*, const void*, cudnnDesc, void*) = nullptr;
};

// Loads libcudnn.so.9 (or $KILN_CUDNN_PATH). Never fails hard: `loaded` says whether it worked.
Cudnn LoadCudnn();

}  // namespace bench
}  // namespace kiln

#endif  // KILN_BENCH_CUDNN_LOADER_H_
