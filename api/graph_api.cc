// Graphs built op by op through the C API (include/kiln/kiln.h, "Graphs built op by op"): a
// GraphBuilder behind a handle, values handed out as indices, attributes parsed from Kiln's text
// IR syntax.
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "api/api_state.h"
#include "ir/attribute.h"
#include "ir/text_format.h"
#include "ops/all_ops.h"

namespace kiln::c_api {
namespace {

absl::StatusOr<TensorType> TypeOf(kiln_dtype dtype, int rank, const int64_t* dims,
                                  const std::string& where) {
  KILN_ASSIGN_OR_RETURN(DataType d, ToDataType(dtype));
  if (rank < 0 || rank > KILN_MAX_RANK) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": rank ", rank, " (0 to ", KILN_MAX_RANK, ")"));
  }
  if (rank > 0 && dims == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": dims is NULL"));
  }
  absl::StatusOr<TensorType> type = TensorType::Create(d, absl::MakeConstSpan(dims, rank));
  if (!type.ok())
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", type.status().message()));
  return type;
}

absl::StatusOr<Value> ValueAt(const kiln_graph* graph, kiln_value v, const std::string& where) {
  if (v < 0 || static_cast<size_t>(v) >= graph->values.size()) {
    return absl::OutOfRangeError(absl::StrCat(where, ": value ", v, " is not one of this graph's (",
                                              graph->values.size(), " so far)"));
  }
  return graph->values[v];
}

kiln_value Remember(kiln_graph* graph, Value v) {
  graph->values.push_back(v);
  return static_cast<kiln_value>(graph->values.size() - 1);
}

}  // namespace

// "name=value, name=value" (Kiln's text IR attribute list, without the braces).
absl::StatusOr<AttrMap> ParseAttributes(absl::string_view text, const std::string& where) {
  AttrMap attrs;
  for (;;) {
    text = absl::StripLeadingAsciiWhitespace(text);
    if (!text.empty() && text.front() == ',') {
      text.remove_prefix(1);
      continue;
    }
    if (text.empty()) return attrs;
    const size_t eq = text.find('=');
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": attributes: expected name=value at '", text, "'"));
    }
    const std::string name(absl::StripAsciiWhitespace(text.substr(0, eq)));
    text.remove_prefix(eq + 1);
    text = absl::StripLeadingAsciiWhitespace(text);
    absl::StatusOr<AttrValue> value = ConsumeAttrValue(&text);
    if (!value.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": attribute '", name, "': ", value.status().message()));
    }
    if (name.empty() || !attrs.emplace(name, *value).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": attribute '", name, "' ", name.empty() ? "has no name" : "is given twice"));
    }
  }
}

}  // namespace kiln::c_api

using kiln::c_api::Guarded;
using kiln::c_api::NotNull;

extern "C" {

kiln_status kiln_graph_create(kiln_graph** graph) {
  return Guarded("kiln_graph_create", [&]() -> absl::Status {
    KILN_RETURN_IF_ERROR(NotNull(graph, "kiln_graph_create", "graph"));
    auto made = std::make_unique<kiln_graph>();
    made->builder = std::make_unique<kiln::GraphBuilder>(&kiln::DefaultOpRegistry());
    *graph = made.release();
    return absl::OkStatus();
  });
}

void kiln_graph_destroy(kiln_graph* graph) { delete graph; }

kiln_status kiln_graph_input(kiln_graph* graph, const char* name, kiln_dtype dtype, int rank,
                             const int64_t* dims, kiln_value* value) {
  return Guarded("kiln_graph_input", [&]() -> absl::Status {
    const char* where = "kiln_graph_input";
    KILN_RETURN_IF_ERROR(NotNull(graph, where, "graph"));
    KILN_RETURN_IF_ERROR(NotNull(name, where, "name"));
    KILN_RETURN_IF_ERROR(NotNull(value, where, "value"));
    const std::string at = absl::StrCat(where, " '", name, "'");
    KILN_ASSIGN_OR_RETURN(kiln::TensorType type, kiln::c_api::TypeOf(dtype, rank, dims, at));
    absl::StatusOr<kiln::Value> v = graph->builder->Input(name, type);
    if (!v.ok())
      return absl::Status(v.status().code(), absl::StrCat(at, ": ", v.status().message()));
    *value = kiln::c_api::Remember(graph, *v);
    return absl::OkStatus();
  });
}

kiln_status kiln_graph_constant(kiln_graph* graph, const char* name, kiln_dtype dtype, int rank,
                                const int64_t* dims, const void* data, kiln_value* value) {
  return Guarded("kiln_graph_constant", [&]() -> absl::Status {
    const char* where = "kiln_graph_constant";
    KILN_RETURN_IF_ERROR(NotNull(graph, where, "graph"));
    KILN_RETURN_IF_ERROR(NotNull(name, where, "name"));
    KILN_RETURN_IF_ERROR(NotNull(data, where, "data"));
    KILN_RETURN_IF_ERROR(NotNull(value, where, "value"));
    const std::string at = absl::StrCat(where, " '", name, "'");
    KILN_ASSIGN_OR_RETURN(kiln::TensorType type, kiln::c_api::TypeOf(dtype, rank, dims, at));
    kiln::HostTensor tensor(type);
    std::memcpy(tensor.data(), data, static_cast<size_t>(type.span_bytes()));
    absl::StatusOr<kiln::Value> v = graph->builder->Constant(name, std::move(tensor));
    if (!v.ok())
      return absl::Status(v.status().code(), absl::StrCat(at, ": ", v.status().message()));
    *value = kiln::c_api::Remember(graph, *v);
    return absl::OkStatus();
  });
}

kiln_status kiln_graph_op(kiln_graph* graph, const char* op, const char* name, int num_inputs,
                          const kiln_value* inputs, const char* attributes, int max_outputs,
                          kiln_value* outputs, int* num_outputs) {
  return Guarded("kiln_graph_op", [&]() -> absl::Status {
    const char* where = "kiln_graph_op";
    KILN_RETURN_IF_ERROR(NotNull(graph, where, "graph"));
    KILN_RETURN_IF_ERROR(NotNull(op, where, "op"));
    if (num_inputs < 0 || (num_inputs > 0 && inputs == nullptr)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, " ", op, ": ", num_inputs, " inputs but the inputs array is NULL"));
    }
    if (max_outputs < 1 || outputs == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, " ", op, ": room for at least one output is needed"));
    }
    const std::string at = absl::StrCat(
        where, " ", op, (name != nullptr && *name) ? absl::StrCat(" '", name, "'") : "");
    std::vector<kiln::Value> args;
    for (int i = 0; i < num_inputs; ++i) {
      KILN_ASSIGN_OR_RETURN(kiln::Value v, kiln::c_api::ValueAt(graph, inputs[i], at));
      args.push_back(v);
    }
    KILN_ASSIGN_OR_RETURN(kiln::AttrMap attrs,
                          kiln::c_api::ParseAttributes(attributes ? attributes : "", at));
    absl::StatusOr<std::vector<kiln::Value>> made =
        graph->builder->Op(op, std::move(args), attrs, name ? name : "");
    if (!made.ok()) {
      return absl::Status(made.status().code(), absl::StrCat(at, ": ", made.status().message()));
    }
    if (static_cast<int>(made->size()) > max_outputs) {
      return absl::InvalidArgumentError(absl::StrCat(at, ": the op has ", made->size(),
                                                     " outputs, room was given for ", max_outputs));
    }
    for (size_t i = 0; i < made->size(); ++i) {
      outputs[i] = kiln::c_api::Remember(graph, (*made)[i]);
    }
    if (num_outputs != nullptr) *num_outputs = static_cast<int>(made->size());
    return absl::OkStatus();
  });
}

kiln_status kiln_graph_output(kiln_graph* graph, const char* name, kiln_value value) {
  return Guarded("kiln_graph_output", [&]() -> absl::Status {
    const char* where = "kiln_graph_output";
    KILN_RETURN_IF_ERROR(NotNull(graph, where, "graph"));
    KILN_RETURN_IF_ERROR(NotNull(name, where, "name"));
    const std::string at = absl::StrCat(where, " '", name, "'");
    KILN_ASSIGN_OR_RETURN(kiln::Value v, kiln::c_api::ValueAt(graph, value, at));
    absl::Status s = graph->builder->Output(name, v);
    if (!s.ok()) return absl::Status(s.code(), absl::StrCat(at, ": ", s.message()));
    return absl::OkStatus();
  });
}

const char* kiln_graph_text(kiln_graph* graph) {
  if (graph == nullptr) return "";
  graph->text = kiln::PrintGraph(graph->builder->graph());
  return graph->text.c_str();
}

}  // extern "C"
