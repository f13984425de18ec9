// Writes an imported model's weights as a .caffemodel: the model's (upgraded, V2) net definition
// with every parameter layer's blobs filled in, BlobShape dims and packed floats, exactly what
// Caffe writes and reads. The bytes are a pure function of the model, so write -> read -> write
// is bit-identical.
#ifndef KILN_FRONTENDS_CAFFE_CAFFEMODEL_WRITER_H_
#define KILN_FRONTENDS_CAFFE_CAFFEMODEL_WRITER_H_

#include <string>

#include "absl/status/statusor.h"
#include "frontends/caffe/caffe_model.h"

namespace kiln {

// The NetParameter a .caffemodel of `model` holds.
absl::StatusOr<caffe::NetParameter> ModelToNetParameter(const CaffeModel& model);

// Serialized .caffemodel bytes (over 2 GiB is ResourceExhausted: protobuf's message limit).
absl::StatusOr<std::string> SerializeCaffemodel(const CaffeModel& model);

// Writes the .caffemodel to `path` (through a temporary file renamed into place).
absl::Status WriteCaffemodel(const CaffeModel& model, const std::string& path);

}  // namespace kiln

#endif  // KILN_FRONTENDS_CAFFE_CAFFEMODEL_WRITER_H_
