#include "kernels/reference/reference_kernel.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ir/host_tensor.h"

namespace kiln {

namespace {

constexpr size_t kAlign = 256;
size_t AlignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
size_t DenseBytes(const TensorType& t) {
  return AlignUp(static_cast<size_t>(t.num_elements()) * 4);
}

// Visits every element of `type` in logical row-major order with its physical offset.
template <typename Fn>
void ForEachOffset(const TensorType& type, Fn fn) {
  const int64_t n = type.num_elements();
  std::vector<int64_t> index(type.rank(), 0);
  int64_t offset = 0;
  for (int64_t i = 0; i < n; ++i) {
    fn(i, offset);
    for (int d = type.rank() - 1; d >= 0; --d) {
      if (++index[d] < type.dim(d)) {
        offset += type.stride(d);
        break;
      }
      offset -= (type.dim(d) - 1) * type.stride(d);
      index[d] = 0;
    }
  }
}

// Every input and output as dense f32, one after another: the reference kernel's workspace.
size_t DenseWorkspaceBytes(const Node& node) {
  size_t bytes = 0;
  for (const Value& v : node.inputs()) bytes += DenseBytes(v.type());
  for (const TensorType& t : node.output_types()) bytes += DenseBytes(t);
  return bytes;
}

// Inputs are copied into the workspace before anything is computed, so a single output of
// input 0's dims may take input 0's bytes.
int InPlaceInputOf(const Node& node) {
  return node.num_inputs() > 0 && node.num_outputs() == 1 &&
                 node.input(0).type().dims() == node.output_types()[0].dims()
             ? 0
             : -1;
}

class ReferenceKernel : public Kernel {
 public:
  ReferenceKernel(const Node& node, DenseComputeFn compute)
      : node_(node),
        compute_(compute),
        workspace_(DenseWorkspaceBytes(node)),
        in_place_input_(InPlaceInputOf(node)) {
    for (const Value& v : node.inputs()) {
      in_types_.push_back(*TensorType::Create(DataType::kF32, v.type().dims()));
    }
    for (const TensorType& t : node.output_types()) {
      out_types_.push_back(*TensorType::Create(DataType::kF32, t.dims()));
    }
  }

  size_t WorkspaceBytes() const override { return workspace_; }
  int InPlaceInput() const override { return in_place_input_; }

  absl::Status Run(const KernelArgs& args) const override {
    if (args.inputs.size() != in_types_.size() || args.outputs.size() != out_types_.size() ||
        args.workspace_bytes < workspace_ || (workspace_ > 0 && args.workspace == nullptr)) {
      return absl::InternalError(absl::StrCat("reference kernel for '", node_.name(),
                                              "': arguments do not match the prepared node"));
    }
    char* cursor = static_cast<char*>(args.workspace);
    DenseArgs dense;
    dense.in_types = in_types_;
    dense.out_types = out_types_;
    for (size_t i = 0; i < args.inputs.size(); ++i) {
      float* buf = reinterpret_cast<float*>(cursor);
      const TensorView& v = args.inputs[i];
      ForEachOffset(v.type, [&](int64_t logical, int64_t physical) {
        buf[logical] = LoadAsFloat(v.data, v.type.dtype(), physical);
      });
      dense.in.push_back(buf);
      cursor += DenseBytes(v.type);
    }
    for (size_t i = 0; i < args.outputs.size(); ++i) {
      dense.out.push_back(reinterpret_cast<float*>(cursor));
      cursor += DenseBytes(args.outputs[i].type);
    }
    KILN_RETURN_IF_ERROR(compute_(node_, dense));
    for (size_t i = 0; i < args.outputs.size(); ++i) {
      const TensorView& v = args.outputs[i];
      const float* buf = dense.out[i];
      ForEachOffset(v.type, [&](int64_t logical, int64_t physical) {
        StoreFromFloat(v.data, v.type.dtype(), physical, buf[logical]);
      });
    }
    return absl::OkStatus();
  }

 private:
  const Node& node_;
  DenseComputeFn compute_;
  std::vector<TensorType> in_types_, out_types_;
  size_t workspace_;
  int in_place_input_;
};

}  // namespace

absl::Status RegisterReference(KernelRegistry& registry, const std::string& op,
                               DenseComputeFn compute, const std::string& algorithm) {
  KernelFactory f;
  f.key = {op, Backend::kReference, "any", "any", algorithm};
  f.can_implement = [](const Node& node) {
    for (const Value& v : node.inputs()) {
      if (v.type().dtype() == DataType::kU8) {
        return absl::UnimplementedError("u8 inputs are not supported by the reference kernels");
      }
    }
    return absl::OkStatus();
  };
  f.choose = [](const Node& node, const KernelOptions&) -> absl::StatusOr<KernelChoice> {
    return FixedChoice(DenseWorkspaceBytes(node), InPlaceInputOf(node));
  };
  f.build = [compute](const Node& node,
                      const KernelChoice&) -> absl::StatusOr<std::unique_ptr<Kernel>> {
    return std::unique_ptr<Kernel>(new ReferenceKernel(node, compute));
  };
  return registry.Register(std::move(f));
}

absl::Status RegisterReferenceKernels(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(RegisterReferenceConvolution(registry));
  KILN_RETURN_IF_ERROR(RegisterReferencePooling(registry));
  KILN_RETURN_IF_ERROR(RegisterReferenceLrn(registry));
  KILN_RETURN_IF_ERROR(RegisterReferenceBatchNorm(registry));
  KILN_RETURN_IF_ERROR(RegisterReferenceActivation(registry));
  KILN_RETURN_IF_ERROR(RegisterReferenceDropout(registry));
  KILN_RETURN_IF_ERROR(RegisterReferenceScale(registry));
  KILN_RETURN_IF_ERROR(RegisterReferenceSoftmax(registry));
  KILN_RETURN_IF_ERROR(RegisterReferenceInnerProduct(registry));
  KILN_RETURN_IF_ERROR(RegisterReferenceTensor(registry));
  KILN_RETURN_IF_ERROR(RegisterReferenceEltwise(registry));
  KILN_RETURN_IF_ERROR(RegisterReferenceRecurrent(registry));
  KILN_RETURN_IF_ERROR(RegisterReferenceEmbed(registry));
  KILN_RETURN_IF_ERROR(RegisterReferenceTile(registry));
  KILN_RETURN_IF_ERROR(RegisterReferenceChannelShuffle(registry));
  KILN_RETURN_IF_ERROR(RegisterReferenceReduction(registry));
  KILN_RETURN_IF_ERROR(RegisterReferenceArgMax(registry));
  KILN_RETURN_IF_ERROR(RegisterReferenceLstmUnit(registry));
  KILN_RETURN_IF_ERROR(RegisterReferenceCtc(registry));
  return RegisterReferenceLoss(registry);
}

}  // namespace kiln
