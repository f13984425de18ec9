// Fuzz target: a text NetParameter through the whole import (upgrade, filter, graph building).
#include <string>

#include "ops/all_ops.h"
#include "frontends/caffe/caffe_io.h"
#include "frontends/caffe/caffe_model.h"
#include "tests/fuzz/fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  caffe::NetParameter net;
  if (!kiln::ParseTextMessage(text, "fuzz", net).ok()) return 0;
  kiln::CaffeImportOptions options;
  options.init = kiln::ParamInit::kFillers;
  options.max_param_elements = int64_t{1} << 20;
  for (caffe::Phase phase : {caffe::TEST, caffe::TRAIN}) {
    options.phase = phase;
    (void)kiln::ImportCaffeNet(net, options, kiln::DefaultOpRegistry());
  }
  return 0;
}
