#include "bench/cudnn_loader.h"

#include <dlfcn.h>

#include <cstdlib>

namespace kiln {
namespace bench {

Cudnn LoadCudnn() {
  Cudnn c;
  const char* env = std::getenv("KILN_CUDNN_PATH");
  c.path = env != nullptr ? env : "libcudnn.so.9";
  void* lib = dlopen(c.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* e = dlerror();
    c.error = e != nullptr ? e : "dlopen failed";
    return c;
  }
  bool ok = true;
  auto get = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
    if (fn == nullptr) {
      ok = false;
      c.error += std::string(" missing ") + name;
    }
  };
  get(c.GetVersion, "cudnnGetVersion");
  get(c.Create, "cudnnCreate");
  get(c.SetStream, "cudnnSetStream");
  get(c.CreateTensorDescriptor, "cudnnCreateTensorDescriptor");
  get(c.SetTensorNdDescriptor, "cudnnSetTensorNdDescriptor");
  get(c.CreateFilterDescriptor, "cudnnCreateFilterDescriptor");
  get(c.SetFilterNdDescriptor, "cudnnSetFilterNdDescriptor");
  get(c.CreateConvolutionDescriptor, "cudnnCreateConvolutionDescriptor");
  get(c.SetConvolutionNdDescriptor, "cudnnSetConvolutionNdDescriptor");
  get(c.SetConvolutionMathType, "cudnnSetConvolutionMathType");
  get(c.SetConvolutionGroupCount, "cudnnSetConvolutionGroupCount");
  get(c.FindForwardEx, "cudnnFindConvolutionForwardAlgorithmEx");
  get(c.FindBackwardDataEx, "cudnnFindConvolutionBackwardDataAlgorithmEx");
  get(c.FindBackwardFilterEx, "cudnnFindConvolutionBackwardFilterAlgorithmEx");
  get(c.Forward, "cudnnConvolutionForward");
  get(c.BackwardData, "cudnnConvolutionBackwardData");
  get(c.BackwardFilter, "cudnnConvolutionBackwardFilter");
  get(c.GetErrorString, "cudnnGetErrorString");
  c.loaded = ok;
  bool ops = true;
  auto get_op = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
    if (fn == nullptr) ops = false;
  };
  get_op(c.CreateActivationDescriptor, "cudnnCreateActivationDescriptor");
  get_op(c.SetActivationDescriptor, "cudnnSetActivationDescriptor");
  get_op(c.ActivationForward, "cudnnActivationForward");
  get_op(c.ActivationBackward, "cudnnActivationBackward");
  get_op(c.CreatePoolingDescriptor, "cudnnCreatePoolingDescriptor");
  get_op(c.SetPooling2dDescriptor, "cudnnSetPooling2dDescriptor");
  get_op(c.PoolingForward, "cudnnPoolingForward");
  get_op(c.PoolingBackward, "cudnnPoolingBackward");
  get_op(c.CreateLRNDescriptor, "cudnnCreateLRNDescriptor");
  get_op(c.SetLRNDescriptor, "cudnnSetLRNDescriptor");
  get_op(c.LRNCrossChannelForward, "cudnnLRNCrossChannelForward");
  get_op(c.LRNCrossChannelBackward, "cudnnLRNCrossChannelBackward");
  get_op(c.BatchNormForwardTraining, "cudnnBatchNormalizationForwardTraining");
  get_op(c.BatchNormBackward, "cudnnBatchNormalizationBackward");
  get_op(c.SoftmaxForward, "cudnnSoftmaxForward");
  get_op(c.SoftmaxBackward, "cudnnSoftmaxBackward");
  c.ops_loaded = ok && ops;
  return c;
}

}  // namespace bench
}  // namespace kiln
