#include "tools/caffe_commands.h"

#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/file_identity.h"
#include "base/status_macros.h"
#include "frontends/caffe/caffe_io.h"
#include "frontends/caffe/caffe_model.h"
#include "frontends/caffe/caffemodel_writer.h"
#include "frontends/caffe/upgrade.h"
#include "kernels/all_kernels.h"
#include "ops/all_ops.h"
#include "runtime/compiler.h"
#include "runtime/executor.h"
#include "tools/command_line.h"
#include "tools/npy.h"
#include "tools/plan_file_commands.h"
#include "tools/plan_flags.h"

namespace kiln {

std::string JsonDims(const std::vector<int64_t>& dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ", "), "]");
}

// NAME=VALUE pairs of a repeated flag.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> Pairs(const CommandLine& line,
                                                                       const std::string& flag) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string& v : line.GetAll(flag)) {
    const size_t eq = v.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == v.size()) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, " ", v, ": expected NAME=VALUE"));
    }
    out.emplace_back(v.substr(0, eq), v.substr(eq + 1));
  }
  return out;
}

absl::Status ParseCommonOptions(const CommandLine& line, CaffeImportOptions& options) {
  const std::string phase = line.Get("phase", "test");
  if (phase == "train") {
    options.phase = caffe::TRAIN;
  } else if (phase == "test") {
    options.phase = caffe::TEST;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("--phase ", phase, ": use train or test"));
  }
  options.stages = line.GetAll("stage");
  if (line.Has("level") && !absl::SimpleAtoi(line.Get("level"), &options.level)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--level ", line.Get("level"), ": not a number"));
  }
  KILN_ASSIGN_OR_RETURN(auto shapes, Pairs(line, "input-shape"));
  for (const auto& [name, text] : shapes) {
    std::vector<int64_t> dims;
    for (absl::string_view part : absl::StrSplit(text, ',')) {
      int64_t d;
      if (!absl::SimpleAtoi(part, &d) || d <= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("--input-shape ", name, "=", text, ": dims must be positive integers"));
      }
      dims.push_back(d);
    }
    options.input_shapes[name] = dims;
  }
  return absl::OkStatus();
}

absl::Status CheckWeightsMatch(const CommandLine& line, const std::string& weights_path,
                               caffe::NetParameter net, caffe::NetParameter weights) {
  if (line.Has("allow-missing-weights")) return absl::OkStatus();
  // Both as the importer sees them (V1 'layers' upgraded); an upgrade error is the importer's.
  if (!UpgradeNet(net).ok() || !UpgradeNet(weights).ok()) return absl::OkStatus();
  std::set<std::string> names;
  for (const caffe::LayerParameter& layer : net.layer()) names.insert(layer.name());
  int with_blobs = 0;
  for (const caffe::LayerParameter& layer : weights.layer()) {
    if (layer.blobs_size() == 0) continue;
    if (names.count(layer.name())) return absl::OkStatus();
    ++with_blobs;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--weights ", weights_path, ": loads no blob into this net (",
      with_blobs == 0 ? "the file holds no blob at all"
                      : absl::StrCat("none of its ", with_blobs,
                                     " layers with blobs is named like a layer of the net"),
      "); give the weights trained for this net, or --allow-missing-weights to start the "
      "unmatched layers from their fillers"));
}

absl::Status CheckCommandFiles(const CommandLine& line, std::vector<FlagPath> inputs,
                               const std::vector<FlagPath>& outputs) {
  for (const char* flag : {"model", "weights", "solver", "snapshot"}) {
    if (line.Has(flag)) inputs.push_back({absl::StrCat("--", flag), line.Get(flag)});
  }
  std::vector<FlagPath> all = outputs;
  // A cache the command reads and updates: it may exist, but must be no other file.
  if (line.Has("tuning-file")) all.push_back({"--tuning-file", line.Get("tuning-file"), true});
  return CheckOutputFiles(
      inputs, all, line.Has("overwrite") ? ExistingOutput::kReplace : ExistingOutput::kRefuse);
}

absl::Status WriteRunOutputs(const std::map<std::string, HostTensor>& results,
                             const std::vector<std::pair<std::string, std::string>>& outputs) {
  for (const auto& [name, path] : outputs) {
    KILN_ASSIGN_OR_RETURN(std::string bytes, SerializeNpy(results.at(name)));
    KILN_RETURN_IF_ERROR(WriteFileBytes(path, bytes));
    std::printf("%s %s -> %s\n", name.c_str(), results.at(name).type().ToString().c_str(),
                path.c_str());
  }
  if (!outputs.empty()) return absl::OkStatus();
  for (const auto& [name, tensor] : results) {
    std::string head;
    for (int64_t i = 0; i < std::min<int64_t>(8, tensor.type().num_elements()); ++i) {
      absl::StrAppend(&head, i ? " " : "", tensor.GetFloat(i));
    }
    std::printf("%s %s: %s%s\n", name.c_str(), tensor.type().ToString().c_str(), head.c_str(),
                tensor.type().num_elements() > 8 ? " ..." : "");
  }
  return absl::OkStatus();
}

const std::set<std::string>& CommonModelSwitches() {
  static const std::set<std::string>* switches =
      new std::set<std::string>{"allow-missing-weights", "overwrite"};
  return *switches;
}

absl::Status LoadModel(const CommandLine& line, CaffeImportOptions options, LoadedModel& out) {
  if (!line.Has("model")) return absl::InvalidArgumentError("--model is required");
  KILN_ASSIGN_OR_RETURN(caffe::NetParameter net, ReadNetParameter(line.Get("model")));
  if (line.Has("weights")) {
    KILN_ASSIGN_OR_RETURN(out.weights, ReadNetParameter(line.Get("weights")));
    KILN_RETURN_IF_ERROR(CheckWeightsMatch(line, line.Get("weights"), net, out.weights));
    out.has_weights = true;
    options.weights = &out.weights;
  }
  KILN_ASSIGN_OR_RETURN(out.model, ImportCaffeNet(net, options, DefaultOpRegistry()));
  return absl::OkStatus();
}

absl::Status ApplyFillSeedFlag(const CommandLine& line, CaffeImportOptions& options) {
  if (!line.Has("fill-seed")) return absl::OkStatus();
  if (line.Has("weights")) {
    return absl::InvalidArgumentError("give --weights or --fill-seed, not both");
  }
  int64_t seed = 0;
  if (!absl::SimpleAtoi(line.Get("fill-seed"), &seed) || seed < 1) {
    return absl::InvalidArgumentError("--fill-seed: expected a positive integer");
  }
  options.fill_seed = static_cast<uint64_t>(seed);
  return absl::OkStatus();
}

absl::Status ApplyBatchFlag(const CommandLine& line, CaffeImportOptions& options) {
  if (!line.Has("batch")) return absl::OkStatus();
  int64_t batch = 0;
  if (!absl::SimpleAtoi(line.Get("batch"), &batch) || batch < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--batch ", line.Get("batch"), ": expected a positive integer"));
  }
  CaffeImportOptions shapes_only = options;
  shapes_only.init = ParamInit::kZeros;
  LoadedModel probe;
  KILN_RETURN_IF_ERROR(LoadModel(line, shapes_only, probe));
  for (const CaffeInput& input : probe.model.inputs) {
    std::vector<int64_t> dims = input.dims;
    if (!dims.empty()) dims[0] = batch;
    options.input_shapes[input.name] = dims;
  }
  return absl::OkStatus();
}

const std::set<std::string>& CommonModelFlags() {
  static const std::set<std::string>* flags =
      new std::set<std::string>{"model", "weights", "phase", "stage", "level", "input-shape"};
  return *flags;
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "kiln: %s\n", status.ToString().c_str());
  return 1;
}

namespace {

absl::Status Info(int argc, char** argv) {
  std::set<std::string> flags = CommonModelFlags();
  std::set<std::string> switches = CommonModelSwitches();
  switches.insert("json");
  KILN_ASSIGN_OR_RETURN(CommandLine line, CommandLine::Parse(argc, argv, 2, flags, switches));
  CaffeImportOptions options;
  KILN_RETURN_IF_ERROR(ParseCommonOptions(line, options));
  options.init = ParamInit::kZeros;  // Structure only: no fillers run.
  LoadedModel loaded;
  KILN_RETURN_IF_ERROR(LoadModel(line, options, loaded));
  const CaffeModel& model = loaded.model;
  std::map<std::string, std::vector<int64_t>> output_dims;
  for (const GraphOutput& o : model.graph->outputs()) output_dims[o.name] = o.value.type().dims();

  if (line.Has("json")) {
    std::string json = "{\n  \"inputs\": {";
    for (size_t i = 0; i < model.inputs.size(); ++i) {
      absl::StrAppend(&json, i ? ", " : "", JsonString(model.inputs[i].name), ": ",
                      JsonDims(model.inputs[i].dims));
    }
    json += "},\n  \"outputs\": {";
    for (size_t i = 0; i < model.outputs.size(); ++i) {
      absl::StrAppend(&json, i ? ", " : "", JsonString(model.outputs[i]), ": ",
                      JsonDims(output_dims[model.outputs[i]]));
    }
    json += "},\n  \"layers\": [";
    for (size_t i = 0; i < model.layers.size(); ++i) {
      const CaffeLayer& layer = model.layers[i];
      std::string tops;
      for (size_t t = 0; t < layer.tops.size(); ++t) {
        absl::StrAppend(&tops, t ? ", " : "", JsonString(layer.tops[t].blob), ": ",
                        JsonDims(layer.tops[t].value.type().dims()));
      }
      absl::StrAppend(&json, i ? "," : "", "\n    {\"name\": ", JsonString(layer.name),
                      ", \"type\": ", JsonString(layer.type), ", \"tops\": {", tops,
                      "}, \"params\": ", layer.learnable_count, "}");
    }
    absl::StrAppend(&json, "\n  ],\n  \"learnable_params\": ", model.LearnableParams(), "\n}\n");
    std::fputs(json.c_str(), stdout);
    return absl::OkStatus();
  }
  std::printf("net \"%s\": %zu layers, phase %s\n", model.net.name().c_str(), model.layers.size(),
              options.phase == caffe::TRAIN ? "TRAIN" : "TEST");
  for (const CaffeInput& input : model.inputs) {
    std::printf("input %-12s %-18s from layer '%s' (%s), shape from %s\n", input.name.c_str(),
                JsonDims(input.dims).c_str(), input.layer.c_str(), input.layer_type.c_str(),
                input.shape_from.c_str());
  }
  int64_t stats = 0;
  for (const CaffeLayer& layer : model.layers) {
    std::string tops;
    for (const CaffeTop& top : layer.tops) {
      absl::StrAppend(
          &tops, tops.empty() ? "" : " ", top.blob, JsonDims(top.value.type().dims()),
          top.loss_weight != 0 ? absl::StrCat(" (loss weight ", top.loss_weight, ")") : "");
    }
    std::printf("%-24s %-16s -> %-32s params %-10lld nodes %s\n", layer.name.c_str(),
                layer.type.c_str(), tops.c_str(), static_cast<long long>(layer.learnable_count),
                layer.nodes.empty() ? "-" : absl::StrJoin(layer.nodes, ",").c_str());
    for (int index : layer.params) {
      const CaffeParam& p = model.params[index];
      if (!p.learnable) {
        int64_t n = 1;
        for (int64_t d : p.shape) n *= d;
        stats += n;
      }
    }
  }
  for (const std::string& name : model.outputs) {
    std::printf("output %-12s %s\n", name.c_str(), JsonDims(output_dims[name]).c_str());
  }
  std::printf("learnable parameters: %lld", static_cast<long long>(model.LearnableParams()));
  if (stats > 0) std::printf(" (+%lld BatchNorm statistics)", static_cast<long long>(stats));
  std::printf("\n");
  if (loaded.has_weights) {
    int missing = 0;
    for (const CaffeParam& p : model.params)
      missing += p.source != "weights" && p.source != "shared";
    std::printf("weights: %d of %zu parameter blobs loaded from %s\n",
                static_cast<int>(model.params.size()) - missing, model.params.size(),
                line.Get("weights").c_str());
  }
  return absl::OkStatus();
}

absl::Status Run(int argc, char** argv) {
  std::set<std::string> flags = CommonModelFlags();
  flags.insert({"fill-seed", "save-weights", "input", "output", "debug", "plan"});
  flags.insert(PlanFlagNames().begin(), PlanFlagNames().end());
  KILN_ASSIGN_OR_RETURN(CommandLine line,
                        CommandLine::Parse(argc, argv, 2, flags, CommonModelSwitches()));
  if (line.Has("plan")) return RunPlanFile(line);
  CaffeImportOptions options;
  KILN_RETURN_IF_ERROR(ParseCommonOptions(line, options));
  if (line.Has("weights") == line.Has("fill-seed")) {
    return absl::InvalidArgumentError(
        "give exactly one of --weights (trained weights) and --fill-seed (the layers' fillers)");
  }
  if (line.Has("fill-seed") && !absl::SimpleAtoi(line.Get("fill-seed"), &options.fill_seed)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--fill-seed ", line.Get("fill-seed"), ": not a non-negative integer"));
  }
  CompileOptions compile;
  KILN_RETURN_IF_ERROR(ParsePlanFlags(line, compile));
  ContextOptions context_options;
  KILN_RETURN_IF_ERROR(ParseDebugFlag(line, compile, context_options));
  // No output replaces a file the user gave, or another output; an existing output only with
  // --overwrite. Checked by identity (device and inode), before anything is read or computed.
  KILN_ASSIGN_OR_RETURN(auto inputs, Pairs(line, "input"));
  KILN_ASSIGN_OR_RETURN(auto outputs, Pairs(line, "output"));
  std::vector<FlagPath> input_files, output_files;
  for (const auto& [name, path] : inputs) input_files.push_back({"--input " + name + "=", path});
  for (const auto& [name, path] : outputs) {
    output_files.push_back({"--output " + name + "=", path});
  }
  if (line.Has("save-weights"))
    output_files.push_back({"--save-weights", line.Get("save-weights")});
  KILN_RETURN_IF_ERROR(CheckCommandFiles(line, input_files, output_files));
  std::map<std::string, HostTensor> arrays;
  for (const auto& [name, path] : inputs) {
    KILN_ASSIGN_OR_RETURN(std::string bytes, ReadFileBytes(path));
    KILN_ASSIGN_OR_RETURN(HostTensor array, ParseNpy(bytes, path));
    options.fallback_input_shapes[name] = array.type().dims();
    arrays[name] = array;
  }
  LoadedModel loaded;
  KILN_RETURN_IF_ERROR(LoadModel(line, options, loaded));
  CaffeModel& model = loaded.model;
  for (const auto& [name, array] : arrays) {
    bool used = false;
    for (const CaffeInput& input : model.inputs) used = used || input.name == name;
    if (!used)
      return absl::InvalidArgumentError(
          absl::StrCat("--input ", name, ": the net has no such input"));
  }
  std::map<std::string, HostTensor> bindings;
  for (const CaffeInput& input : model.inputs) {
    auto it = arrays.find(input.name);
    if (it == arrays.end()) {
      return absl::InvalidArgumentError(absl::StrCat("input '", input.name, "' ",
                                                     JsonDims(input.dims), " needs --input ",
                                                     input.name, "=FILE.npy"));
    }
    if (it->second.type().dims() != input.dims) {
      return absl::InvalidArgumentError(absl::StrCat("input '", input.name, "': the array is ",
                                                     JsonDims(it->second.type().dims()),
                                                     ", the net takes ", JsonDims(input.dims)));
    }
    bindings[input.node] = it->second;
  }
  // Requested blobs become graph outputs (their latest value, as Caffe shows it after forward).
  std::set<std::string> existing;
  for (const GraphOutput& o : model.graph->outputs()) existing.insert(o.name);
  for (const auto& [blob, path] : outputs) {
    if (existing.count(blob)) continue;
    const Value* latest = nullptr;
    for (const CaffeLayer& layer : model.layers) {
      for (const CaffeTop& top : layer.tops) {
        if (top.blob == blob) latest = &top.value;
      }
    }
    if (latest == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("--output ", blob, ": the net has no such blob"));
    }
    KILN_RETURN_IF_ERROR(model.graph->AddOutput(blob, *latest));
    existing.insert(blob);
  }
  if (line.Has("save-weights")) {
    KILN_RETURN_IF_ERROR(WriteCaffemodel(model, line.Get("save-weights")));
  }
  KILN_ASSIGN_OR_RETURN(auto plan, Compile(*model.graph, DefaultKernelRegistry(), compile));
  KILN_ASSIGN_OR_RETURN(auto context, ExecutionContext::Create(*plan, context_options));
  std::fprintf(
      stderr, "kiln run: backend %s (%s)%s\n", std::string(BackendName(plan->backend())).c_str(),
      plan->backend_reason().c_str(),
      plan->backend() == Backend::kCuda
          ? absl::StrCat(", precision ", plan->precision(), ", layout ", plan->layout()).c_str()
          : "");
  KILN_ASSIGN_OR_RETURN(auto results, context->Run(bindings));
  return WriteRunOutputs(results, outputs);
}

}  // namespace

int InfoCommand(int argc, char** argv) {
  absl::Status status = Info(argc, argv);
  return status.ok() ? 0 : Fail(status);
}

int RunCommand(int argc, char** argv) {
  absl::Status status = Run(argc, argv);
  return status.ok() ? 0 : Fail(status);
}

}  // namespace kiln
