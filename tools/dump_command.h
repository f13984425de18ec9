// `kiln dump`: pictures of a compiled plan. The fused graph as graphviz (each fused kernel a
// cluster labelled with the prototxt layers inside it), the activation arena over time (which
// value holds which bytes at each step) as an SVG, and the list of rewrites the compiler declined;
// the pictures are runtime/plan_report.h's, which the C API gives too.
#ifndef KILN_TOOLS_DUMP_COMMAND_H_
#define KILN_TOOLS_DUMP_COMMAND_H_

namespace kiln {

// kiln dump --model F [--weights W | --fill-seed S] [--batch N] [--svg G.svg] [--dot G.dot]
//           [--memory M.svg] [--why-not-fused] [--overwrite] [plan flags]
// The outputs may be no input and no other output; an existing one is replaced only with
// --overwrite.
int DumpCommand(int argc, char** argv);

}  // namespace kiln

#endif  // KILN_TOOLS_DUMP_COMMAND_H_
