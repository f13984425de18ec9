// The CLI over saved plans (runtime/plan_file.h): `kiln run --plan F` and `kiln time --plan F`.
// A saved plan holds the model and how it was compiled, so these take no --model, --weights or
// plan flags; --device cuda:N picks another GPU of the kind the plan is for.
#ifndef KILN_TOOLS_PLAN_FILE_COMMANDS_H_
#define KILN_TOOLS_PLAN_FILE_COMMANDS_H_

#include "absl/status/status.h"
#include "tools/command_line.h"

namespace kiln {

// `kiln run --plan F --input NAME=X.npy ... [--output NAME=Y.npy ...] [--overwrite]`.
absl::Status RunPlanFile(const CommandLine& line);

// `kiln time --plan F [--iterations N]`: the load time (nothing measured) and the forward's.
absl::Status TimePlanFile(const CommandLine& line);

}  // namespace kiln

#endif  // KILN_TOOLS_PLAN_FILE_COMMANDS_H_
