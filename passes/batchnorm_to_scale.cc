// A BatchNorm with stored statistics that no Convolution or InnerProduct absorbed (DenseNet's
// BatchNorm-Scale-ReLU-Convolution order puts it before the convolution), together with the
// Scale after it, becomes one per-channel Scale: one pass over the tensor instead of two.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "passes/batchnorm_affine.h"
#include "passes/inference_passes.h"
#include "passes/rewrite_util.h"

namespace kiln {
namespace {

class BatchNormToScalePass : public Pass {
 public:
  absl::string_view name() const override { return "batchnorm_to_scale"; }

  absl::StatusOr<bool> Run(Graph& graph, const PassContext& context) override {
    if (!context.inference) return false;
    bool changed = false;
    // By name: a rewrite removes nodes, so pointers taken before it may dangle.
    for (const std::string& node_name : NodeNames(graph)) {
      Node* bn = graph.FindNode(node_name);
      if (bn == nullptr || bn->kind() != OpKind::kBatchNorm) continue;
      ChannelAffine affine;
      std::string reason;
      if (!BatchNormAsAffine(graph, *bn, &affine, &reason)) {
        context.Explain(name(), *bn->input(0).node, *bn, reason);
        continue;
      }
      const TensorType& x = bn->input(0).type();
      if (x.dtype() != DataType::kF32) {
        context.Explain(name(), *bn->input(0).node, *bn, "BatchNorm input is not f32");
        continue;
      }
      const int64_t c = x.dim(1);
      std::vector<float> a(affine.a.begin(), affine.a.end()), b(affine.b.begin(), affine.b.end());
      KILN_ASSIGN_OR_RETURN(TensorType t, TensorType::Create(DataType::kF32, {c}));
      KILN_ASSIGN_OR_RETURN(HostTensor at, HostTensor::FromF32(t, a));
      KILN_ASSIGN_OR_RETURN(HostTensor bt, HostTensor::FromF32(t, b));
      KILN_ASSIGN_OR_RETURN(Value ac, graph.AddConstant(UniqueName(graph, bn->name() + "/a"), at));
      KILN_ASSIGN_OR_RETURN(Value bc, graph.AddConstant(UniqueName(graph, bn->name() + "/b"), bt));
      AttrMap attrs = {{"axis", int64_t{1}}, {"num_axes", int64_t{1}}};
      KILN_ASSIGN_OR_RETURN(Node * scale,
                            graph.AddNode("Scale", UniqueName(graph, bn->name() + "/s"),
                                          {bn->input(0), ac, bc}, attrs));
      std::vector<const Node*> absorbed = {bn};
      if (affine.scale != nullptr) absorbed.push_back(affine.scale);
      const std::string final_name = bn->name();
      KILN_RETURN_IF_ERROR(FinishFusion(graph, affine.output, scale, final_name, absorbed));
      changed = true;
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> MakeBatchNormToScalePass() {
  return std::make_unique<BatchNormToScalePass>();
}

}  // namespace kiln
