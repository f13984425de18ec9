// The `kiln` command-line program.
//   kiln version   versions of Kiln, CUDA runtime/driver, and the devices found
//   kiln ops       every registered op and, per backend, the kernels (dtype/layout/algorithm)
//   kiln info      a Caffe model's layers, shapes and parameter counts (text or --json)
//   kiln run       a forward pass of a Caffe model on .npy inputs
//   kiln convert   IDX files or an image list into a Caffe LMDB/LevelDB of Datum records
//   kiln train     a Caffe solver's training (caffe train)
//   kiln test      a trained net's TEST phase over its data layers (caffe test)
#include <cstdio>
#include <map>
#include <set>
#include <string>

#include "absl/strings/str_join.h"
#include "base/version.h"
#include "kernels/all_kernels.h"
#include "ops/all_ops.h"
#include "runtime/device.h"
#include "tools/caffe_commands.h"
#include "tools/compile_command.h"
#include "tools/convert_command.h"
#include "tools/diff_weights_command.h"
#include "tools/dump_command.h"
#include "tools/plan_flags.h"
#include "tools/time_command.h"
#include "tools/train_command.h"

namespace {

int Version() {
  std::printf("kiln %s\n", kiln::kVersion);
  const kiln::CudaProbe probe = kiln::ProbeCuda();
  std::printf("cuda runtime %d.%d, driver %d.%d\n", probe.runtime_version / 1000,
              probe.runtime_version % 1000 / 10, probe.driver_version / 1000,
              probe.driver_version % 1000 / 10);
  std::printf("devices:\n  %s\n", kiln::CreateHostDevice()->Describe().c_str());
  if (!probe.usable) {
    std::printf("  no usable CUDA device: %s\n", probe.reason.c_str());
    return 0;
  }
  for (const auto& d : probe.devices) {
    std::printf("  cuda:%d %s (sm_%d%d, %d SMs, %.1f GiB)\n", d.ordinal, d.name.c_str(), d.major,
                d.minor, d.multiprocessors, d.total_memory / 1073741824.0);
  }
  return 0;
}

int Ops() {
  const kiln::KernelRegistry& kernels = kiln::DefaultKernelRegistry();
  for (const kiln::OpDef* def : kiln::DefaultOpRegistry().All()) {
    std::printf("%s  (%s)%s\n  %s\n", def->name.c_str(), def->family.c_str(),
                def->differentiable ? " differentiable" : "", def->summary.c_str());
    std::map<std::string, std::set<std::string>> by_backend;
    for (const kiln::KernelFactory* f : kernels.ForOp(def->name)) {
      by_backend[std::string(kiln::BackendName(f->key.backend))].insert(
          f->key.dtype + "/" + f->key.layout + "/" + f->key.algorithm);
    }
    if (def->name == "Parameter" || def->name == "Constant") {
      std::printf("    (bound or uploaded by the executor; no kernel)\n");
    }
    for (const auto& [backend, kinds] : by_backend) {
      std::printf("    %-9s %s\n", backend.c_str(), absl::StrJoin(kinds, ", ").c_str());
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string command = argc > 1 ? argv[1] : "";
  if (command == "version" && argc == 2) return Version();
  if (command == "ops" && argc == 2) return Ops();
  if (command == "info") return kiln::InfoCommand(argc, argv);
  if (command == "run") return kiln::RunCommand(argc, argv);
  if (command == "time") return kiln::TimeCommand(argc, argv);
  if (command == "compile") return kiln::CompileCommand(argc, argv);
  if (command == "dump") return kiln::DumpCommand(argc, argv);
  if (command == "convert") return kiln::ConvertCommand(argc, argv);
  if (command == "train") return kiln::TrainCommand(argc, argv);
  if (command == "test") return kiln::TestCommand(argc, argv);
  if (command == "diff-weights") return kiln::DiffWeightsCommand(argc, argv);
  std::fprintf(
      stderr,
      "usage: kiln <command>\n"
      "  version   Kiln and CUDA versions, devices found\n"
      "  ops       registered ops and the kernels each backend has\n"
      "  info      --model F [--weights W] [--phase train|test] [--stage S] [--level N]\n"
      "            [--input-shape NAME=D0,D1,...] [--json]\n"
      "  run       --model F (--weights W | --fill-seed S) --input NAME=X.npy ...\n"
      "            [--output NAME=Y.npy ...] [--save-weights OUT.caffemodel] [--overwrite]\n"
      "            [--debug no-reuse,no-in-place,poison,check-finite]\n"
      "            [--phase ...] [--input-shape ...] [plan flags]\n"
      "  run       --plan P --input NAME=X.npy ... [--output NAME=Y.npy ...] [--device cuda:N]:\n"
      "            a saved plan (compile --save-plan), no algorithm measured again\n"
      "  time      --model F [--weights W | --fill-seed S] [--batch N] [--iterations K]\n"
      "            [--json] [--compare-unfused] [plan flags]; --train --input-shape ...\n"
      "            times training steps (with --gpus L or --rank/--world-size/--rendezvous:\n"
      "            data-parallel steps, images/s of all GPUs); --plan P [--iterations K]:\n"
      "            a saved plan's load and forward times\n"
      "  compile   --model F [--weights W | --fill-seed S] [--batch N] [--json]\n"
      "            [--why-not-fused] [--cuda-target sm_80|sm_90] [--save-plan P [--overwrite]]\n"
      "            [plan flags]: the steps, fused layers, memory (--cuda-target: of a CUDA\n"
      "            plan, without the GPU); --save-plan writes the plan for run/time --plan\n"
      "  dump      --model F [--svg G.svg] [--dot G.dot] [--memory M.svg] [--why-not-fused]\n"
      "            [--batch N] [--cuda-target sm_80|sm_90] [--overwrite] [plan flags]: the\n"
      "            fused graph and the arena over time\n"
      "  convert   --images I --labels L --out DIR [--backend lmdb|leveldb] [--overwrite]:\n"
      "            IDX files (MNIST, Fashion-MNIST; .gz too) into a Caffe Datum database\n"
      "  convert   --list L [--root_folder R] --out DIR [--backend ...] [--overwrite]\n"
      "            [--resize_height H --resize_width W] [--gray] [--shuffle [--seed S]]\n"
      "            [--encoded] [--check_size] [--skip_bad]: JPEG/PNG images of a\n"
      "            \"path label\" list into a Caffe Datum database (convert_imageset)\n"
      "  train     --solver F [--weights W | --snapshot S.solverstate] [--iterations N]\n"
      "            [--curve C.svg] [--data-seed N] [--loss-scale S] [plan flags]: Caffe's\n"
      "            solvers; several GPUs: [--gpus all|0,1,...] [--sync-bn] [--no-overlap]\n"
      "            [--dist-timeout S],\n"
      "            or one rank of a job: --rank R --world-size W --rendezvous HOST:PORT|file:P;\n"
      "            snapshots and the curve replace those of a former run, never an input\n"
      "            (checked before training, with the snapshot folder's write access)\n"
      "  test      --model F --weights W [--iterations N] [plan flags]: mean test outputs\n"
      "  diff-weights --weights A.caffemodel --against B.caffemodel [--tolerance T] [--quiet]:\n"
      "            largest differences blob by blob (exit 1 over T)\n"
      "files: no output may be an input or another output (compared by device and inode);\n"
      "  an existing output is replaced only with --overwrite (run, dump, time --profile-steps,\n"
      "  convert); --weights that load no blob are refused unless --allow-missing-weights\n"
      "  (info, run, time, compile, dump, train, test)\n"
      "plan flags (run, time, compile, dump, train, test):\n%s",
      kiln::PlanFlagsUsage());
  return 2;
}
