// ProducingStep: the plan step after which a graph output's value is final. The Trainer tells a
// gradient sync where each gradient is written (so a bucket's all-reduce can start as soon as its
// last gradient is), and tests check that backward writes each gradient where it should.
#ifndef KILN_TRAINING_PRODUCING_STEP_H_
#define KILN_TRAINING_PRODUCING_STEP_H_

#include <string>

#include "runtime/execution_plan.h"

namespace kiln {

// The last step of `plan` that writes the bytes of graph output `output`; -1 when `output` is
// empty, not an output of the plan, or written by no step.
int ProducingStep(const ExecutionPlan& plan, const std::string& output);

}  // namespace kiln

#endif  // KILN_TRAINING_PRODUCING_STEP_H_
