// `kiln train` and `kiln test`: Caffe's `caffe train` and `caffe test` on Kiln's trainer
// (engine/training/trainer.h).
#ifndef KILN_TOOLS_TRAIN_COMMAND_H_
#define KILN_TOOLS_TRAIN_COMMAND_H_

#include "absl/status/status.h"

namespace kiln {

// kiln train --solver F [--weights W | --snapshot S.solverstate] [--iterations N] [--curve C.svg]
//            [--data-seed N] [--loss-scale S] [--allow-missing-weights] [plan flags]
// Trains as the solver says, with a live progress line (iteration, loss, lr, images/s, ETA) on
// stderr, Caffe's display/test/snapshot schedule on stdout, and a loss/accuracy curve as SVG at
// the end. Ctrl-C writes a snapshot, then stops. Exit 0 on success, 1 on error, 2 on usage.
// Before training it checks that the snapshot folder is writable and has room for one snapshot,
// that no snapshot or curve it may write is an input (--solver, its nets, --weights, --snapshot;
// by device and inode), and that --weights loads at least one blob (unless
// --allow-missing-weights). Snapshots and the curve replace earlier ones of the same names (a
// rerun writes them anew).
int TrainCommand(int argc, char** argv);

// kiln test --model F --weights W [--iterations N] [--allow-missing-weights] [plan flags]
// The TEST phase of F for N batches (default 50): the mean of each scalar output.
int TestCommand(int argc, char** argv);

class CommandLine;

// kiln time --train --model F --input-shape TOP=N,C,H,W ... [--solver S] [--iterations K]
// [--json] [plan flags]: the median device time of one whole training step (forward, backward,
// update; SGD lr 0.01, momentum 0.9, weight decay 5e-4 unless --solver gives another) on
// synthetic data of the given shapes, and the device memory by role. Called by `kiln time`.
absl::Status TimeTrainingStep(const CommandLine& line);

}  // namespace kiln

#endif  // KILN_TOOLS_TRAIN_COMMAND_H_
