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
  return c;
}

}  // namespace bench
}  // namespace kiln
