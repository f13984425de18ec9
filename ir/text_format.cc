#include "ir/text_format.h"

#include <cstdio>
#include <limits>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/status_macros.h"

namespace kiln {

namespace {

std::string ValueRef(const std::map<const Node*, int>& number, const Value& v) {
  std::string s = absl::StrCat("%", number.at(v.node));
  if (v.index != 0) absl::StrAppend(&s, ".", v.index);
  return s;
}

std::string ConstantValues(const HostTensor& t) {
  std::vector<std::string> parts;
  const int64_t n = t.type().num_elements();
  parts.reserve(static_cast<size_t>(n));
  const bool integral = !IsFloatingPoint(t.type().dtype());
  for (int64_t i = 0; i < n; ++i) {
    if (integral && t.type().dtype() == DataType::kI32) {
      // Exact for every int32, unlike the float path.
      std::vector<int64_t> index(t.type().rank());
      int64_t rest = i;
      for (int d = t.type().rank() - 1; d >= 0; --d) {
        index[d] = rest % t.type().dim(d);
        rest /= t.type().dim(d);
      }
      parts.push_back(absl::StrCat(t.data_as<int32_t>()[t.type().Offset(index)]));
    } else if (integral) {
      parts.push_back(absl::StrCat(static_cast<int64_t>(t.GetFloat(i))));
    } else {
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%.9g", t.GetFloat(i));
      parts.push_back(buf);
    }
  }
  return absl::StrCat("[", absl::StrJoin(parts, ","), "]");
}

}  // namespace

std::string PrintGraph(const Graph& graph, const PrintOptions& options) {
  auto order = graph.TopologicalOrder();
  if (!order.ok()) return absl::StrCat("# cannot print: ", order.status().message(), "\n");
  std::map<const Node*, int> number;
  std::string out;
  for (const Node* node : *order) {
    const int n = static_cast<int>(number.size());
    number[node] = n;
    std::vector<std::string> inputs, attrs, types;
    for (const Value& v : node->inputs()) inputs.push_back(ValueRef(number, v));
    for (const auto& [name, value] : node->attrs()) {
      attrs.push_back(absl::StrCat(name, "=", AttrValueToString(value)));
    }
    for (const TensorType& t : node->output_types()) types.push_back(t.ToString());
    absl::StrAppend(&out, "%", n, " = ", node->op(), " ", AttrValueToString(node->name()), " (",
                    absl::StrJoin(inputs, ", "), ") {", absl::StrJoin(attrs, ", "),
                    "} : ", absl::StrJoin(types, ", "));
    if (node->constant() != nullptr) {
      if (options.external_constants) {
        absl::StrAppend(&out, " = external");
      } else if (options.print_constant_values) {
        absl::StrAppend(&out, " = ", ConstantValues(*node->constant()));
      } else {
        absl::StrAppend(&out, " = <", node->constant()->type().num_elements(), " values elided>");
      }
    }
    out += "\n";
  }
  for (const GraphOutput& o : graph.outputs()) {
    absl::StrAppend(&out, "output ", AttrValueToString(o.name), " = ", ValueRef(number, o.value),
                    "\n");
  }
  return out;
}

namespace {

// Reads one line; every error says where in the text it happened.
class LineParser {
 public:
  LineParser(absl::string_view line, int line_number)
      : line_(line), rest_(line), line_number_(line_number) {}

  absl::Status Error(absl::string_view message) const {
    return absl::InvalidArgumentError(absl::StrCat("graph text: line ", line_number_, ", column ",
                                                   line_.size() - rest_.size() + 1, ": ", message));
  }
  void SkipSpace() { rest_ = absl::StripLeadingAsciiWhitespace(rest_); }
  bool Consume(absl::string_view token) {
    SkipSpace();
    return absl::ConsumePrefix(&rest_, token);
  }
  absl::Status Expect(absl::string_view token) {
    if (Consume(token)) return absl::OkStatus();
    return Error(absl::StrCat("expected '", token, "'"));
  }
  bool AtEnd() {
    SkipSpace();
    return rest_.empty();
  }
  absl::StatusOr<std::string> Identifier() {
    SkipSpace();
    size_t n = 0;
    while (n < rest_.size() && (absl::ascii_isalnum(rest_[n]) || rest_[n] == '_')) ++n;
    if (n == 0) return Error("expected an identifier");
    std::string id(rest_.substr(0, n));
    rest_.remove_prefix(n);
    return id;
  }
  absl::StatusOr<int64_t> Integer() {
    SkipSpace();
    size_t n = 0;
    while (n < rest_.size() && (absl::ascii_isdigit(rest_[n]) || (n == 0 && rest_[n] == '-'))) ++n;
    int64_t v;
    if (n == 0 || !absl::SimpleAtoi(rest_.substr(0, n), &v)) return Error("expected an integer");
    rest_.remove_prefix(n);
    return v;
  }
  absl::StatusOr<AttrValue> Attr() {
    SkipSpace();
    auto v = ConsumeAttrValue(&rest_);
    if (!v.ok()) return Error(v.status().message());
    return v;
  }
  absl::StatusOr<std::string> QuotedString() {
    SkipSpace();
    if (rest_.empty() || rest_.front() != '"') return Error("expected a quoted string");
    KILN_ASSIGN_OR_RETURN(AttrValue v, Attr());
    return std::get<std::string>(v);
  }
  // Text up to (not including) an '=' outside brackets, or to the end of the line.
  absl::string_view UntilTopLevelEquals() {
    SkipSpace();
    int depth = 0;
    size_t n = 0;
    for (; n < rest_.size(); ++n) {
      const char c = rest_[n];
      if (c == '[' || c == '{') ++depth;
      if (c == ']' || c == '}') --depth;
      if (c == '=' && depth == 0) break;
    }
    absl::string_view taken = absl::StripTrailingAsciiWhitespace(rest_.substr(0, n));
    rest_.remove_prefix(n);
    return taken;
  }

 private:
  absl::string_view line_;
  absl::string_view rest_;
  int line_number_;
};

// Splits "f32[1,2], f32[3]{1,3}" at the commas outside brackets.
std::vector<std::string> SplitTypes(absl::string_view text) {
  std::vector<std::string> out;
  int depth = 0;
  std::string current;
  for (char c : text) {
    if (c == '[' || c == '{') ++depth;
    if (c == ']' || c == '}') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(std::string(absl::StripAsciiWhitespace(current)));
      current.clear();
    } else {
      current += c;
    }
  }
  if (!absl::StripAsciiWhitespace(current).empty()) {
    out.push_back(std::string(absl::StripAsciiWhitespace(current)));
  }
  return out;
}

class GraphParser {
 public:
  GraphParser(const OpRegistry* registry, ExternalConstantFn external)
      : graph_(std::make_unique<Graph>(registry)), external_(std::move(external)) {}

  absl::Status ParseLine(absl::string_view line, int line_number) {
    LineParser p(line, line_number);
    if (p.AtEnd() || p.Consume("#")) return absl::OkStatus();
    if (p.Consume("output")) {
      KILN_ASSIGN_OR_RETURN(std::string name, p.QuotedString());
      KILN_RETURN_IF_ERROR(p.Expect("="));
      KILN_ASSIGN_OR_RETURN(Value v, ValueRef(p));
      if (!p.AtEnd()) return p.Error("unexpected text after the output");
      absl::Status s = graph_->AddOutput(name, v);
      return s.ok() ? s : p.Error(s.message());
    }
    KILN_RETURN_IF_ERROR(p.Expect("%"));
    KILN_ASSIGN_OR_RETURN(int64_t label, p.Integer());
    if (nodes_.count(label)) return p.Error(absl::StrCat("%", label, " is defined twice"));
    KILN_RETURN_IF_ERROR(p.Expect("="));
    KILN_ASSIGN_OR_RETURN(std::string op, p.Identifier());
    KILN_ASSIGN_OR_RETURN(std::string name, p.QuotedString());
    KILN_RETURN_IF_ERROR(p.Expect("("));
    std::vector<Value> inputs;
    while (!p.Consume(")")) {
      if (!inputs.empty()) KILN_RETURN_IF_ERROR(p.Expect(","));
      KILN_ASSIGN_OR_RETURN(Value v, ValueRef(p));
      inputs.push_back(v);
    }
    KILN_RETURN_IF_ERROR(p.Expect("{"));
    AttrMap attrs;
    while (!p.Consume("}")) {
      if (!attrs.empty()) KILN_RETURN_IF_ERROR(p.Expect(","));
      KILN_ASSIGN_OR_RETURN(std::string attr_name, p.Identifier());
      KILN_RETURN_IF_ERROR(p.Expect("="));
      KILN_ASSIGN_OR_RETURN(AttrValue value, p.Attr());
      if (!attrs.emplace(attr_name, value).second) {
        return p.Error(absl::StrCat("attribute '", attr_name, "' given twice"));
      }
    }
    KILN_RETURN_IF_ERROR(p.Expect(":"));
    std::vector<TensorType> types;
    for (const std::string& t : SplitTypes(p.UntilTopLevelEquals())) {
      auto type = TensorType::Parse(t);
      if (!type.ok()) return p.Error(type.status().message());
      types.push_back(*type);
    }
    Node* node = nullptr;
    if (OpKindFromName(op) == OpKind::kConstant) {
      if (types.size() != 1) return p.Error("a Constant has exactly one type");
      KILN_RETURN_IF_ERROR(p.Expect("="));
      HostTensor data;
      if (p.Consume("external")) {
        if (!external_) return p.Error("an external constant, but no constants were given");
        absl::StatusOr<HostTensor> given = external_(name, types[0]);
        if (!given.ok()) return p.Error(given.status().message());
        data = *std::move(given);
      } else {
        KILN_ASSIGN_OR_RETURN(AttrValue values, p.Attr());
        KILN_ASSIGN_OR_RETURN(data, ConstantData(p, types[0], values));
      }
      auto v = graph_->AddConstant(name, std::move(data));
      if (!v.ok()) return p.Error(v.status().message());
      node = v->node;
    } else {
      auto added = graph_->AddNode(op, name, inputs, attrs);
      if (!added.ok()) return p.Error(added.status().message());
      node = *added;
    }
    if (!p.AtEnd()) return p.Error("unexpected text at the end of the node");
    // A written type that differs from the inferred one only in strides is an output a pass
    // placed in a sub-region of a larger buffer (Graph::SetOutputStrides).
    for (size_t i = 0; i < types.size() && i < node->output_types().size(); ++i) {
      const TensorType& inferred = node->output_types()[i];
      if (node->kind() != OpKind::kConstant && types[i] != inferred &&
          types[i].dtype() == inferred.dtype() && types[i].dims() == inferred.dims()) {
        absl::Status s = graph_->SetOutputStrides(node, static_cast<int>(i), types[i].strides());
        if (!s.ok()) return p.Error(s.message());
      }
    }
    if (types != node->output_types()) {
      std::vector<std::string> inferred;
      for (const auto& t : node->output_types()) inferred.push_back(t.ToString());
      return p.Error(absl::StrCat("written output types differ from the inferred ",
                                  absl::StrJoin(inferred, ", ")));
    }
    nodes_[label] = node;
    return absl::OkStatus();
  }

  std::unique_ptr<Graph> Finish() { return std::move(graph_); }

 private:
  absl::StatusOr<Value> ValueRef(LineParser& p) {
    KILN_RETURN_IF_ERROR(p.Expect("%"));
    KILN_ASSIGN_OR_RETURN(int64_t label, p.Integer());
    int64_t index = 0;
    if (p.Consume(".")) {
      KILN_ASSIGN_OR_RETURN(index, p.Integer());
    }
    auto it = nodes_.find(label);
    if (it == nodes_.end()) return p.Error(absl::StrCat("%", label, " is not defined above"));
    if (index < 0 || index >= it->second->num_outputs()) {
      return p.Error(absl::StrCat("%", label, " has no output ", index));
    }
    return Value{it->second, static_cast<int>(index)};
  }

  absl::StatusOr<HostTensor> ConstantData(LineParser& p, const TensorType& type,
                                          const AttrValue& values) {
    std::vector<double> numbers;
    if (auto* ints = std::get_if<std::vector<int64_t>>(&values)) {
      numbers.assign(ints->begin(), ints->end());
    } else if (auto* floats = std::get_if<std::vector<double>>(&values)) {
      numbers = *floats;
    } else {
      return p.Error("constant values must be a list");
    }
    if (static_cast<int64_t>(numbers.size()) != type.num_elements()) {
      return p.Error(absl::StrCat("constant of type ", type.ToString(), " needs ",
                                  type.num_elements(), " values, got ", numbers.size()));
    }
    HostTensor data(type);
    for (size_t i = 0; i < numbers.size(); ++i) {
      if (type.dtype() == DataType::kI32) {
        // Converting a double outside int32's range (or NaN) to int32 is undefined.
        if (!(numbers[i] >= std::numeric_limits<int32_t>::min() &&
              numbers[i] <= std::numeric_limits<int32_t>::max())) {
          return p.Error(absl::StrCat("constant value ", numbers[i], " does not fit i32"));
        }
        std::vector<int64_t> index(type.rank());
        int64_t rest = static_cast<int64_t>(i);
        for (int d = type.rank() - 1; d >= 0; --d) {
          index[d] = rest % type.dim(d);
          rest /= type.dim(d);
        }
        data.data_as<int32_t>()[type.Offset(index)] = static_cast<int32_t>(numbers[i]);
      } else {
        data.SetFloat(static_cast<int64_t>(i), static_cast<float>(numbers[i]));
      }
    }
    return data;
  }

  std::unique_ptr<Graph> graph_;
  ExternalConstantFn external_;
  std::map<int64_t, Node*> nodes_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Graph>> ParseGraph(absl::string_view text,
                                                  const OpRegistry* registry) {
  return ParseGraph(text, registry, nullptr);
}

absl::StatusOr<std::unique_ptr<Graph>> ParseGraph(absl::string_view text,
                                                  const OpRegistry* registry,
                                                  const ExternalConstantFn& external_constant) {
  GraphParser parser(registry, external_constant);
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    KILN_RETURN_IF_ERROR(parser.ParseLine(line, line_number));
  }
  return parser.Finish();
}

}  // namespace kiln
