// A Convolution whose only reader is a Pooling, at the top of the network's activation sizes,
// run in slices of its output channels: each slice's convolution is pooled straight away and
// the pooled slices are concatenated along the channels. Pooling works channel by channel, so
// the result is the same, but the convolution's full output never exists: the plan's peak
// drops from (input + conv output + pooled output) to (input + one slice + pooled output).
// This is where the stems of AlexNet-style nets and of FCN peak (conv1 is the largest tensor,
// the pooling after it shrinks it 4x).
//
// It costs speed (S narrower convolutions instead of one wide one), so it runs only when the
// caller asks for the smaller plan (CompileOptions::split_for_memory, `--optimize memory`).
// With placed Concat inputs (CUDA plans) the pooled slices are written straight into the
// Concat's output; elsewhere the Concat copies them.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/status_macros.h"
#include "passes/inference_passes.h"
#include "passes/rewrite_util.h"

namespace kiln {
namespace {

// Slices keep a multiple of this many channels: channels-last kernels vectorize over 8.
constexpr int64_t kChannelQuantum = 8;

// Rows [begin, end) of dim 0 of `t`, same dtype (copied by logical index, so any strides).
absl::StatusOr<HostTensor> SliceDim0(const HostTensor& t, int64_t begin, int64_t end) {
  std::vector<int64_t> dims = t.type().dims();
  const int64_t per_row = t.type().num_elements() / dims[0];
  dims[0] = end - begin;
  KILN_ASSIGN_OR_RETURN(TensorType type, TensorType::Create(t.type().dtype(), dims));
  HostTensor out(type);
  for (int64_t i = 0; i < type.num_elements(); ++i) {
    out.SetFloat(i, t.GetFloat(begin * per_row + i));
  }
  return out;
}

class SplitForMemoryPass : public Pass {
 public:
  absl::string_view name() const override { return "split_for_memory"; }

  absl::StatusOr<bool> Run(Graph& graph, const PassContext& context) override {
    if (!context.inference) return false;
    // The largest activation: only convolutions near it are worth the slower plan.
    int64_t largest = 0;
    for (const Node* n : graph.nodes()) {
      if (n->op() == "Constant") continue;
      for (const TensorType& t : n->output_types()) largest = std::max(largest, t.span_bytes());
    }
    bool changed = false;
    for (const std::string& node_name : NodeNames(graph)) {
      Node* conv = graph.FindNode(node_name);
      if (conv == nullptr || conv->op() != "Convolution") continue;
      if (conv->output_types()[0].span_bytes() * 2 < largest) continue;
      Node* pool = SoleConsumer(graph, conv->output(0));
      int64_t width = 0;
      const std::string reason = Legality(*conv, pool, &width);
      if (!reason.empty()) {
        if (pool != nullptr) context.Explain(name(), *conv, *pool, reason);
        continue;
      }
      KILN_RETURN_IF_ERROR(Split(graph, conv, pool, width));
      changed = true;
    }
    return changed;
  }

 private:
  // Why the pair cannot be split, or "" with the channels per slice.
  static std::string Legality(const Node& conv, const Node* pool, int64_t* width) {
    if (pool == nullptr) return "the convolution's output has several readers or is an output";
    if (pool->op() != "Pooling") return absl::StrCat("its reader is ", pool->op(), ", not Pooling");
    if (conv.num_inputs() > 3) return "the convolution adds a residual";
    if (conv.GetInt("group") != 1) return "grouped convolution";
    for (int i = 1; i < conv.num_inputs(); ++i) {
      if (ConstantData(conv.input(i)) == nullptr) return "weights are not constants";
    }
    const TensorType& y = conv.output_types()[0];
    const TensorType& pooled = pool->output_types()[0];
    if (pooled.span_bytes() * 2 > y.span_bytes()) return "the pooling does not halve the bytes";
    // Slices no larger than the pooled output: the convolution then never holds more than it.
    const int64_t channels = y.dim(1);
    const int64_t want = (y.span_bytes() + pooled.span_bytes() - 1) / pooled.span_bytes();
    int64_t slice = (channels + want - 1) / want;
    slice = (slice + kChannelQuantum - 1) / kChannelQuantum * kChannelQuantum;
    if (slice >= channels) return absl::StrCat("only ", channels, " output channels");
    *width = slice;
    return "";
  }

  static absl::Status Split(Graph& graph, Node* conv, Node* pool, int64_t width) {
    const int64_t channels = conv->output_types()[0].dim(1);
    std::vector<Value> pooled;
    for (int64_t begin = 0; begin < channels; begin += width) {
      const int64_t end = std::min(channels, begin + width);
      const std::string suffix = absl::StrCat("/ch", begin, "-", end);
      std::vector<Value> inputs = {conv->input(0)};
      for (int i = 1; i < conv->num_inputs(); ++i) {
        KILN_ASSIGN_OR_RETURN(HostTensor part,
                              SliceDim0(*ConstantData(conv->input(i)), begin, end));
        const std::string what = i == 1 ? "/filter" : "/bias";
        KILN_ASSIGN_OR_RETURN(
            Value c, graph.AddConstant(UniqueName(graph, conv->name() + suffix + what), part));
        inputs.push_back(c);
      }
      KILN_ASSIGN_OR_RETURN(Node * part_conv,
                            graph.AddNode("Convolution", UniqueName(graph, conv->name() + suffix),
                                          inputs, conv->attrs()));
      graph.SetOrigins(part_conv, conv->origins());
      KILN_ASSIGN_OR_RETURN(Node * part_pool,
                            graph.AddNode("Pooling", UniqueName(graph, pool->name() + suffix),
                                          {part_conv->output(0)}, pool->attrs()));
      graph.SetOrigins(part_pool, pool->origins());
      pooled.push_back(part_pool->output(0));
    }
    KILN_ASSIGN_OR_RETURN(
        Node * concat, graph.AddNode("Concat", UniqueName(graph, pool->name() + "/concat"), pooled,
                                     {{"axis", AttrValue(int64_t{1})}}));
    // The Concat takes the pooling's place and name, so its output keeps the layer's blob name.
    return FinishFusion(graph, pool->output(0), concat, pool->name(), {pool});
  }
};

}  // namespace

std::unique_ptr<Pass> MakeSplitForMemoryPass() { return std::make_unique<SplitForMemoryPass>(); }

}  // namespace kiln
