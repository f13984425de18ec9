// `kiln info` and `kiln run`: inspecting and running Caffe models from the command line.
#ifndef KILN_TOOLS_CAFFE_COMMANDS_H_
#define KILN_TOOLS_CAFFE_COMMANDS_H_

namespace kiln {

// kiln info --model F [--weights W] [--phase train|test] [--stage S]... [--level N]
//           [--input-shape NAME=D0,D1,...]... [--json]
int InfoCommand(int argc, char** argv);

// kiln run --model F [--weights W | --fill-seed S] [--save-weights OUT.caffemodel]
//          --input NAME=X.npy ... [--output NAME=Y.npy ...] [--device cpu|cuda|reference]
//          [--phase train|test] [--stage S]... [--input-shape NAME=D0,...]...
int RunCommand(int argc, char** argv);

}  // namespace kiln

#endif  // KILN_TOOLS_CAFFE_COMMANDS_H_
