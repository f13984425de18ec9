// A compiled Caffe model's plan in terms of its prototxt: which layers each step stands for
// (runtime/plan_report.h's LayerIndex), and the activation bytes Caffe itself would allocate,
// the "naive" number a plan's memory is compared with (`kiln compile`, kiln_engine_report_json).
#ifndef KILN_FRONTENDS_CAFFE_PLAN_LAYERS_H_
#define KILN_FRONTENDS_CAFFE_PLAN_LAYERS_H_

#include <cstdint>

#include "frontends/caffe/caffe_model.h"
#include "runtime/plan_report.h"

namespace kiln {

// The model's layers by the graph nodes each made, and their Caffe types.
LayerIndex CaffeLayerIndex(const CaffeModel& model);

// What Caffe allocates for activations: every distinct top blob once, as f32 (Caffe's Dtype),
// the net's inputs included (in-place tops share their bottom's blob).
int64_t CaffeActivationBytes(const CaffeModel& model);

}  // namespace kiln

#endif  // KILN_FRONTENDS_CAFFE_PLAN_LAYERS_H_
