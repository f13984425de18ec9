// Caffe's weight fillers (constant, uniform, gaussian with optional sparsity, positive_unitball,
// xavier, msra, bilinear), deterministic: element i of a blob depends only on (seed, i), through
// our own counter-based generator, so results do not depend on the C++ library or on fill order.
#ifndef KILN_FRONTENDS_CAFFE_FILLER_H_
#define KILN_FRONTENDS_CAFFE_FILLER_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "ir/host_tensor.h"
#include "frontends/caffe/caffe.pb.h"

namespace kiln {

// Fills the dense f32 `blob` (its shape is the Caffe blob shape, which decides fan-in/fan-out)
// according to `filler`. Unknown types and parameters a type cannot use are errors prefixed with
// `where`.
absl::Status FillBlob(const caffe::FillerParameter& filler, uint64_t seed, absl::string_view where,
                      HostTensor& blob);

// A seed for one blob, mixed from the user's seed, the layer name and the blob index, so that
// adding or removing a layer leaves every other layer's initial weights unchanged.
uint64_t BlobSeed(uint64_t seed, absl::string_view layer, int blob_index);

}  // namespace kiln

#endif  // KILN_FRONTENDS_CAFFE_FILLER_H_
