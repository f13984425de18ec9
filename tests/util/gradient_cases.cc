#include "tests/util/gradient_cases.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ir/graph_builder.h"
#include "ops/all_ops.h"
#include "ops/gradients/gradient_request.h"

namespace kiln {
namespace testing {

namespace gradient_cases {

AttrValue I(int64_t v) { return AttrValue(v); }
AttrValue Is(Ints v) { return AttrValue(std::move(v)); }
AttrValue F(double v) { return AttrValue(v); }
AttrValue S(const char* v) { return AttrValue(std::string(v)); }
AttrValue B(bool v) { return AttrValue(v); }

std::function<void(HostTensor&)> Labels(int64_t classes, int ignore_every, int ignore) {
  return [=](HostTensor& t) {
    for (int64_t i = 0; i < t.type().num_elements(); ++i) {
      const bool ignored = ignore_every > 0 && i % ignore_every == 1;
      t.SetFloat(i, static_cast<float>(ignored ? ignore : (i * 7 + 3) % classes));
    }
  };
}

std::function<void(HostTensor&)> Constant(float value) {
  return [=](HostTensor& t) {
    for (int64_t i = 0; i < t.type().num_elements(); ++i) t.SetFloat(i, value);
  };
}

std::function<void(HostTensor&)> Uniform(float lo, float hi) {
  return [=](HostTensor& t) {
    std::mt19937 rng(static_cast<uint32_t>(t.type().num_elements()));
    std::uniform_real_distribution<float> d(lo, hi);
    for (int64_t i = 0; i < t.type().num_elements(); ++i) t.SetFloat(i, d(rng));
  };
}

GradientCase Case(std::string name, std::string op, std::vector<Ints> dims, AttrMap attrs) {
  GradientCase c;
  c.name = std::move(name);
  c.op = std::move(op);
  c.input_dims = std::move(dims);
  c.attrs = std::move(attrs);
  return c;
}

}  // namespace gradient_cases

absl::StatusOr<GradientInputs> MakeGradientInputs(const GradientCase& c, uint32_t seed) {
  GradientInputs in;
  std::mt19937 rng(seed);
  for (size_t i = 0; i < c.input_dims.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(TensorType t, TensorType::Create(DataType::kF32, c.input_dims[i]));
    HostTensor x(t);
    auto fixed = c.fixed_inputs.find(static_cast<int>(i));
    if (fixed != c.fixed_inputs.end()) {
      fixed->second(x);
    } else {
      // Distinct values (-1 + (k + offset) 2/n), shuffled: no two elements closer than 2/n, none
      // on a kink (0, ties) within the finite-difference step; each input offset differently so
      // inputs never tie with each other either.
      const int64_t n = t.num_elements();
      std::vector<int64_t> order(n);
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), rng);
      const double offset = 0.5 + 0.3 * static_cast<double>(i % 2) - 0.15 * (i >= 2);
      for (int64_t k = 0; k < n; ++k) {
        x.SetFloat(order[k], static_cast<float>(-1.0 + (k + offset) * 2.0 / n));
      }
    }
    in.inputs.push_back(x);
  }
  if (c.loss_weight != 0) return in;
  // Forward output types come from shape inference: build the node once to learn them.
  GraphBuilder b(&DefaultOpRegistry());
  std::vector<Value> values;
  for (size_t i = 0; i < in.inputs.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(Value v, b.Input(absl::StrCat("x", i), in.inputs[i].type()));
    values.push_back(v);
  }
  KILN_ASSIGN_OR_RETURN(std::vector<Value> outs, b.Op(c.op, values, c.attrs, "op"));
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  if (c.gradient_outputs >= 0) outs.resize(std::min<size_t>(outs.size(), c.gradient_outputs));
  for (const Value& y : outs) {
    HostTensor dy(y.type().Contiguous());
    for (int64_t i = 0; i < dy.type().num_elements(); ++i) dy.SetFloat(i, d(rng));
    in.output_grads.push_back(dy);
  }
  return in;
}

absl::StatusOr<std::unique_ptr<Graph>> BuildGradientGraph(const GradientCase& c,
                                                          const GradientInputs& in,
                                                          std::vector<int>* grads) {
  GraphBuilder b(&DefaultOpRegistry());
  std::vector<Value> values;
  for (size_t i = 0; i < in.inputs.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(Value v, b.Input(absl::StrCat("x", i), in.inputs[i].type()));
    values.push_back(v);
  }
  KILN_ASSIGN_OR_RETURN(std::vector<Value> outs, b.Op(c.op, values, c.attrs, "op"));
  GradientRequest request;
  request.node = outs[0].node;
  for (size_t j = 0; j < outs.size(); ++j) {
    KILN_RETURN_IF_ERROR(b.Output(absl::StrCat("y", j), outs[j]));
    if (c.loss_weight != 0) {
      request.output_grads.push_back(Value{});
      request.loss_weights.push_back(c.loss_weight);
    } else if (j >= in.output_grads.size()) {  // a saved value: no gradient flows into it
      request.output_grads.push_back(Value{});
      request.loss_weights.push_back(0.0);
    } else {
      KILN_ASSIGN_OR_RETURN(Value dy, b.Input(absl::StrCat("dy", j), in.output_grads[j].type()));
      request.output_grads.push_back(dy);
      request.loss_weights.push_back(0.0);
    }
  }
  for (size_t i = 0; i < in.inputs.size(); ++i) {
    request.needs_grad.push_back(c.fixed_inputs.count(static_cast<int>(i)) == 0);
  }
  const OpDef& def = request.node->def();
  if (!def.gradient) return absl::UnimplementedError(c.op + " has no gradient builder");
  KILN_ASSIGN_OR_RETURN(std::vector<Value> g, def.gradient(b, request));
  grads->clear();
  for (size_t i = 0; i < g.size(); ++i) {
    if (g[i].node == nullptr) continue;
    grads->push_back(static_cast<int>(i));
    KILN_RETURN_IF_ERROR(b.Output(absl::StrCat("grad", i), g[i]));
  }
  return b.Finish();
}

std::map<std::string, HostTensor> GradientBindings(const GradientInputs& in) {
  std::map<std::string, HostTensor> out;
  for (size_t i = 0; i < in.inputs.size(); ++i) out[absl::StrCat("x", i)] = in.inputs[i];
  for (size_t j = 0; j < in.output_grads.size(); ++j) {
    out[absl::StrCat("dy", j)] = in.output_grads[j];
  }
  return out;
}

}  // namespace testing
}  // namespace kiln
