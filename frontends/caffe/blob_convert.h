// BlobProto <-> HostTensor, with Caffe's shape rules: a blob with `shape` must match exactly; a
// legacy blob (num/channels/height/width) matches when the expected shape, padded with 1s on
// the left to 4 dims, equals its 4 dims.
#ifndef KILN_FRONTENDS_CAFFE_BLOB_CONVERT_H_
#define KILN_FRONTENDS_CAFFE_BLOB_CONVERT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "ir/host_tensor.h"
#include "frontends/caffe/caffe.pb.h"

namespace kiln {

// The shape `blob` declares (its 4 legacy dims if it has no `shape`).
std::vector<int64_t> BlobShapeOf(const caffe::BlobProto& blob);

// Copies `blob`'s values (double_data when present, else data) into the dense f32 `tensor`,
// after checking the blob against `expected` (the Caffe shape). Errors start with `where` and
// give both shapes.
absl::Status BlobToTensor(const caffe::BlobProto& blob, const std::vector<int64_t>& expected,
                          absl::string_view where, HostTensor& tensor);

// Writes `tensor`'s values into `blob` with `shape` (current format: BlobShape, packed floats).
void TensorToBlob(const HostTensor& tensor, const std::vector<int64_t>& shape,
                  caffe::BlobProto& blob);

}  // namespace kiln

#endif  // KILN_FRONTENDS_CAFFE_BLOB_CONVERT_H_
