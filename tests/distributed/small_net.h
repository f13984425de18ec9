// The small data-parallel training setup the distributed tests share: a database of 96
// pseudo-random 8x8 images with labels 0..2, a LeNet-like net over it (optionally with
// BatchNorm), its SGD solver, the CPU backend, fake communicator groups, and ways to read and
// compare a Trainer's parameters.
#ifndef KILN_TESTS_DISTRIBUTED_SMALL_NET_H_
#define KILN_TESTS_DISTRIBUTED_SMALL_NET_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "distributed/communicator.h"
#include "distributed/fake_communicator.h"
#include "frontends/caffe/solver.h"
#include "frontends/caffe/training/solver_trainer.h"

namespace kiln {
namespace testing_dp {

constexpr int kRecords = 96;

// The database's path (written once per process).
std::string Db();
// conv -> (BatchNorm) -> ReLU -> max pool -> ip 16 -> ReLU -> ip 3 -> softmax loss, with TRAIN
// batch `batch` (and a TEST phase of batch 8 with an accuracy).
std::string Net(int batch, bool batch_norm = false);
// SGD (rate 0.05, momentum 0.9, weight decay 0.0005, seed 3) over Net(batch), written to
// scratch files named after `name`, plus `extra` solver lines.
SolverConfig Solver(const std::string& name, int batch, const std::string& extra = "",
                    bool batch_norm = false);
TrainerOptions CpuOptions();

// Every blob of every layer with parameters, flattened, in order; or those of one layer.
std::vector<float> Parameters(SolverTrainer& trainer);
std::vector<float> LayerBlobs(SolverTrainer& trainer, const std::string& name);
double MaxAbsDifference(const std::vector<float>& a, const std::vector<float>& b);

// A fake group of n ranks and its communicators.
struct Group {
  std::shared_ptr<FakeCommunicatorGroup> group;
  std::vector<std::unique_ptr<Communicator>> comms;
  std::vector<Communicator*> pointers;
};
Group MakeGroup(int n, absl::Duration timeout = absl::Seconds(60));

}  // namespace testing_dp
}  // namespace kiln

#endif  // KILN_TESTS_DISTRIBUTED_SMALL_NET_H_
