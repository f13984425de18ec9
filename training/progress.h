// Where a training run stands beyond its parameters and the optimizer's histories: the pass
// count of each net (which seeds the dropout masks), the position of each batch source and the
// recurrent state it carries. A snapshot that keeps it lets a resumed run go on exactly as one
// that never stopped.
#ifndef KILN_TRAINING_PROGRESS_H_
#define KILN_TRAINING_PROGRESS_H_

#include <cstdint>
#include <vector>

namespace kiln {

struct NetProgress {
  int64_t passes = 0;  // forward passes run (TrainingNet::passes)
  // Per feed of the net, in order: BatchSource::BatchesServed(), or -1 where the feed keeps no
  // count (a synthetic feed, or a source that cannot say).
  std::vector<int64_t> batches_served;
  // The values of its carried states (TrainableGraph::carried, in order): recurrent layers'
  // state at the end of the last pass, which the next pass starts from.
  std::vector<std::vector<float>> carried_state;
};

struct TrainingProgress {
  std::vector<NetProgress> nets;  // the trained net, then each evaluation net
};

}  // namespace kiln

#endif  // KILN_TRAINING_PROGRESS_H_
