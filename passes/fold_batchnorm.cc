// BatchNorm (+ Scale) folded into the Convolution or InnerProduct before it: with stored
// statistics the pair is a per-output-channel affine map, so it becomes new filter and bias
// constants, W'[k] = a[k] W[k] and b'[k] = a[k] b[k] + c[k], and the normalization costs nothing.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "passes/batchnorm_affine.h"
#include "passes/inference_passes.h"
#include "passes/rewrite_util.h"

namespace kiln {
namespace {

class FoldBatchNormPass : public Pass {
 public:
  absl::string_view name() const override { return "fold_batchnorm"; }

  absl::StatusOr<bool> Run(Graph& graph, const PassContext& context) override {
    if (!context.inference) return false;
    bool changed = false;
    // By name: a fold removes nodes, so pointers taken before it may dangle.
    for (const std::string& node_name : NodeNames(graph)) {
      Node* bn = graph.FindNode(node_name);
      if (bn == nullptr || bn->kind() != OpKind::kBatchNorm) continue;
      Node* producer = bn->input(0).node;
      std::string reason = Legality(graph, *producer, *bn);
      ChannelAffine affine;
      if (reason.empty()) BatchNormAsAffine(graph, *bn, &affine, &reason);
      if (!reason.empty()) {
        context.Explain(name(), *producer, *bn, reason);
        continue;
      }
      KILN_RETURN_IF_ERROR(Fold(graph, producer, affine));
      changed = true;
    }
    return changed;
  }

 private:
  // Why `bn` cannot fold into `producer`, or "" when it can (statistics checked separately).
  static std::string Legality(const Graph& graph, const Node& producer, const Node& bn) {
    const bool conv = producer.kind() == OpKind::kConvolution;
    if (!conv && producer.kind() != OpKind::kInnerProduct) {
      return absl::StrCat("producer is ", producer.op(), ", not Convolution or InnerProduct");
    }
    if (SoleConsumer(graph, bn.input(0)) != &bn) {
      return "the producer's output has other readers, which need it unnormalized";
    }
    if (conv && (producer.GetString("activation") != "none" || producer.num_inputs() > 3)) {
      return "the convolution already has a fused epilogue";
    }
    if (!conv && (producer.GetInt("axis") != 1 || producer.output_types()[0].rank() != 2)) {
      return "InnerProduct output channels are not dim 1 of a 2-d output";
    }
    for (int i = 1; i < producer.num_inputs(); ++i) {
      const HostTensor* t = ConstantData(producer.input(i));
      if (t == nullptr) return "weights are not constants";
      if (t->type().dtype() != DataType::kF32) return "weights are not f32";
    }
    return "";
  }

  static absl::Status Fold(Graph& graph, Node* producer, const ChannelAffine& affine) {
    const bool conv = producer->kind() == OpKind::kConvolution;
    const HostTensor& w = *ConstantData(producer->input(1));
    const int64_t channels = static_cast<int64_t>(affine.a.size());
    const int64_t count = w.type().num_elements();
    const bool transposed = !conv && producer->GetBool("transpose");
    std::vector<float> wv = w.ToF32Vector();
    for (int64_t i = 0; i < count; ++i) {
      const int64_t k = transposed ? i % channels : i / (count / channels);
      wv[i] = static_cast<float>(wv[i] * affine.a[k]);
    }
    std::vector<float> bv(channels, 0.0f);
    const HostTensor* b = producer->num_inputs() > 2 ? ConstantData(producer->input(2)) : nullptr;
    const std::vector<float> old_bias = b ? b->ToF32Vector() : std::vector<float>(channels, 0.0f);
    for (int64_t k = 0; k < channels; ++k) {
      bv[k] = static_cast<float>(old_bias[k] * affine.a[k] + affine.b[k]);
    }
    KILN_ASSIGN_OR_RETURN(TensorType w_type, TensorType::Create(DataType::kF32, w.type().dims()));
    KILN_ASSIGN_OR_RETURN(TensorType b_type, TensorType::Create(DataType::kF32, {channels}));
    KILN_ASSIGN_OR_RETURN(HostTensor wt, HostTensor::FromF32(w_type, wv));
    KILN_ASSIGN_OR_RETURN(HostTensor bt, HostTensor::FromF32(b_type, bv));
    KILN_ASSIGN_OR_RETURN(
        Value wc, graph.AddConstant(UniqueName(graph, producer->name() + "/folded_filter"), wt));
    KILN_ASSIGN_OR_RETURN(
        Value bc, graph.AddConstant(UniqueName(graph, producer->name() + "/folded_bias"), bt));
    KILN_ASSIGN_OR_RETURN(Node * folded,
                          graph.AddNode(producer->op(), UniqueName(graph, producer->name() + "/f"),
                                        {producer->input(0), wc, bc}, producer->attrs()));
    std::vector<const Node*> absorbed = {producer, affine.batchnorm};
    if (affine.scale != nullptr) absorbed.push_back(affine.scale);
    const std::string final_name = producer->name();
    return FinishFusion(graph, affine.output, folded, final_name, absorbed);
  }
};

}  // namespace

std::unique_ptr<Pass> MakeFoldBatchNormPass() { return std::make_unique<FoldBatchNormPass>(); }

}  // namespace kiln
