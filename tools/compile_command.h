// `kiln compile`: what the compiler made of a Caffe model: the steps that run, the prototxt
// layers each covers (several when fused), and activation memory against what Caffe allocates.
#ifndef KILN_TOOLS_COMPILE_COMMAND_H_
#define KILN_TOOLS_COMPILE_COMMAND_H_

namespace kiln {

// kiln compile --model F [--weights W | --fill-seed S] [--batch N] [--json] [plan flags]
int CompileCommand(int argc, char** argv);

}  // namespace kiln

#endif  // KILN_TOOLS_COMPILE_COMMAND_H_
