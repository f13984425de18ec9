// `kiln time`: per-layer and whole-forward timing of a Caffe model's plan, as `caffe time`.
#ifndef KILN_TOOLS_TIME_COMMAND_H_
#define KILN_TOOLS_TIME_COMMAND_H_

namespace kiln {

// kiln time --model F [--weights W | --fill-seed S] [--batch N] [--iterations K] [--json]
//           [plan flags: --device --precision --layout --algo --tuning-file --workspace-limit]
int TimeCommand(int argc, char** argv);

}  // namespace kiln

#endif  // KILN_TOOLS_TIME_COMMAND_H_
