// Fuzz target: binary NetParameter (.caffemodel) bytes, parsed, upgraded and loaded as the
// weights of a small fixed net (so blob matching, legacy dims and value counts are exercised).
#include <string>

#include "ops/all_ops.h"
#include "frontends/caffe/caffe_io.h"
#include "frontends/caffe/caffe_model.h"
#include "tests/fuzz/fuzz_targets.h"

namespace {

const caffe::NetParameter& TargetNet() {
  static const caffe::NetParameter* const net = [] {
    auto* n = new caffe::NetParameter;
    const char kNet[] =
        "input: 'data' input_shape { dim: 1 dim: 1 dim: 8 dim: 8 }\n"
        "layer { name: 'conv1' type: 'Convolution' bottom: 'data' top: 'conv1'\n"
        "        convolution_param { num_output: 2 kernel_size: 3 } }\n"
        "layer { name: 'bn' type: 'BatchNorm' bottom: 'conv1' top: 'conv1' }\n"
        "layer { name: 'scale' type: 'Scale' bottom: 'conv1' top: 'conv1'\n"
        "        scale_param { bias_term: true } }\n"
        "layer { name: 'prelu' type: 'PReLU' bottom: 'conv1' top: 'conv1' }\n"
        "layer { name: 'ip1' type: 'InnerProduct' bottom: 'conv1' top: 'ip1'\n"
        "        inner_product_param { num_output: 3 } }\n";
    if (!kiln::ParseTextMessage(kNet, "target", *n).ok()) __builtin_trap();
    return n;
  }();
  return *net;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  caffe::NetParameter weights;
  if (!kiln::ParseBinaryMessage(bytes, "fuzz", weights).ok()) return 0;
  kiln::CaffeImportOptions options;
  options.weights = &weights;
  options.max_param_elements = int64_t{1} << 20;
  (void)kiln::ImportCaffeNet(TargetNet(), options, kiln::DefaultOpRegistry());
  // The same bytes as a net of their own.
  options.weights = nullptr;
  options.init = kiln::ParamInit::kZeros;
  (void)kiln::ImportCaffeNet(weights, options, kiln::DefaultOpRegistry());
  return 0;
}
