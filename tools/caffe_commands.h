// `kiln info` and `kiln run`: inspecting and running Caffe models from the command line.
#ifndef KILN_TOOLS_CAFFE_COMMANDS_H_
#define KILN_TOOLS_CAFFE_COMMANDS_H_

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "base/file_identity.h"
#include "base/json_string.h"
#include "frontends/caffe/caffe_model.h"
#include "ir/host_tensor.h"
#include "tools/command_line.h"

namespace kiln {

// A Caffe model as the commands load it: the graph, and the weights file when one was given.
struct LoadedModel {
  caffe::NetParameter weights;
  bool has_weights = false;
  CaffeModel model;
};

// Flags every model command takes: --model, --weights, --phase, --stage, --level, --input-shape.
const std::set<std::string>& CommonModelFlags();
// Phase, stages, level and input shapes into import options.
absl::Status ParseCommonOptions(const CommandLine& line, CaffeImportOptions& options);
// Switches every model command takes: --allow-missing-weights (a --weights file that loads no
// blob into the net is otherwise refused) and --overwrite (an existing output is otherwise
// refused).
const std::set<std::string>& CommonModelSwitches();
// InvalidArgument naming `weights_path` when no layer of `weights` with blobs is named like a
// layer of `net` (an empty or unrelated .caffemodel), unless --allow-missing-weights was given.
absl::Status CheckWeightsMatch(const CommandLine& line, const std::string& weights_path,
                               caffe::NetParameter net, caffe::NetParameter weights);
// Before a command starts: `outputs` against the files it reads (--model, --weights, --solver,
// --snapshot when given, and `inputs`) and each other, by identity; an existing output is
// refused unless --overwrite; the --tuning-file (a cache the command updates) is no other file.
absl::Status CheckCommandFiles(const CommandLine& line, std::vector<FlagPath> inputs,
                               const std::vector<FlagPath>& outputs);
// Reads --model (and --weights, checked with CheckWeightsMatch) and imports the net with
// `options`.
absl::Status LoadModel(const CommandLine& line, CaffeImportOptions options, LoadedModel& out);
// --fill-seed S (when given, a positive integer) into `options`; InvalidArgument when it comes
// with --weights.
absl::Status ApplyFillSeedFlag(const CommandLine& line, CaffeImportOptions& options);
// --batch N (when given): reads the net's structure once and sets dim 0 of every input's shape
// in `options` to N.
absl::Status ApplyBatchFlag(const CommandLine& line, CaffeImportOptions& options);
// `kiln run`'s outputs: each --output NAME=PATH written as .npy (the paths already checked), or
// with none asked for, the first values of every graph output printed.
absl::Status WriteRunOutputs(const std::map<std::string, HostTensor>& results,
                             const std::vector<std::pair<std::string, std::string>>& outputs);
// NAME=VALUE pairs of a repeated flag.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> Pairs(const CommandLine& line,
                                                                       const std::string& flag);
// JSON text of a dims list (JsonString, base/json_string.h, of a string).
std::string JsonDims(const std::vector<int64_t>& dims);
// Prints "kiln: <status>" to stderr and returns 1.
int Fail(const absl::Status& status);

// kiln info --model F [--weights W] [--phase train|test] [--stage S]... [--level N]
//           [--input-shape NAME=D0,D1,...]... [--json]
int InfoCommand(int argc, char** argv);

// kiln run --model F [--weights W | --fill-seed S] [--save-weights OUT.caffemodel] [--overwrite]
//          --input NAME=X.npy ... [--output NAME=Y.npy ...] [plan flags, tools/plan_flags.h]
//          [--phase train|test] [--stage S]... [--input-shape NAME=D0,...]...
int RunCommand(int argc, char** argv);

}  // namespace kiln

#endif  // KILN_TOOLS_CAFFE_COMMANDS_H_
