#include "tests/util/caffe_net_runner.h"

#include "absl/strings/str_cat.h"
#include "frontends/caffe/caffe_io.h"
#include "kernels/all_kernels.h"
#include "ops/all_ops.h"
#include "runtime/executor.h"

namespace kiln {
namespace testing {

absl::StatusOr<CaffeModel> ImportNetText(const std::string& text, uint64_t fill_seed,
                                         const caffe::NetParameter* weights) {
  caffe::NetParameter net;
  if (absl::Status s = ParseTextMessage(text, "net", net); !s.ok()) return s;
  CaffeImportOptions options;
  options.fill_seed = fill_seed;
  options.weights = weights;
  return ImportCaffeNet(net, options, DefaultOpRegistry());
}

absl::StatusOr<std::map<std::string, std::vector<float>>> RunNet(
    const CaffeModel& model, const std::map<std::string, std::vector<float>>& inputs,
    BackendChoice backend) {
  CompileOptions options;
  options.backend = backend;
  absl::StatusOr<std::unique_ptr<ExecutionPlan>> plan =
      Compile(*model.graph, DefaultKernelRegistry(), options);
  if (!plan.ok()) return plan.status();
  absl::StatusOr<std::unique_ptr<ExecutionContext>> context =
      ExecutionContext::Create(**plan, {/*poison_buffers=*/true});
  if (!context.ok()) return context.status();
  std::map<std::string, HostTensor> bindings;
  for (const CaffeInput& input : model.inputs) {
    auto values = inputs.find(input.name);
    if (values == inputs.end()) {
      return absl::InvalidArgumentError(absl::StrCat("no values for input ", input.name));
    }
    absl::StatusOr<TensorType> type = TensorType::Create(DataType::kF32, input.dims);
    if (!type.ok()) return type.status();
    absl::StatusOr<HostTensor> tensor = HostTensor::FromF32(*type, values->second);
    if (!tensor.ok()) return tensor.status();
    bindings[input.node] = *tensor;
  }
  absl::StatusOr<std::map<std::string, HostTensor>> out = (*context)->Run(bindings);
  if (!out.ok()) return out.status();
  std::map<std::string, std::vector<float>> result;
  for (const auto& [name, tensor] : *out) result[name] = tensor.ToF32Vector();
  return result;
}

}  // namespace testing
}  // namespace kiln
