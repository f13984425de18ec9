// A Caffe net as pycaffe's Net shows it: every blob kept, its data and diff readable and
// writable by name between passes, every layer's parameter blobs too, and forward and backward
// run on demand. The graph engine underneath compiles the net unfused (every blob must exist)
// with every weight a graph input, so what the caller writes into a parameter is what the next
// pass uses. Host tensors hold the blobs and parameters (pycaffe's host mirror); the plans run on
// the chosen backend. The Python package (python/) and the C API's kiln_net (api/net_api.cc)
// are built on it.
#ifndef KILN_FRONTENDS_CAFFE_TRAINING_BLOB_NET_H_
#define KILN_FRONTENDS_CAFFE_TRAINING_BLOB_NET_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "frontends/caffe/caffe_model.h"
#include "ir/host_tensor.h"
#include "runtime/compiler.h"
#include "runtime/executor.h"
#include "training/training_net.h"

namespace kiln {

struct BlobNetOptions {
  caffe::Phase phase = caffe::TEST;
  // optimize is ignored (the net runs unfused: every blob is kept); device, precision, layout
  // and algo apply.
  CompileOptions compile;
  // > 0: the first dim of every Input layer's tops (a net with Data layers takes the batch its
  // layers declare, and refuses this).
  int64_t batch = 0;
  uint64_t fill_seed = 1;  // fillers of the parameters no weights file gives
};

class BlobNet {
 public:
  struct Blob {
    std::string name;
    HostTensor data, diff;  // dense f32 of the blob's shape; their storage never moves
    double loss_weight = 0;
  };
  struct Param {
    std::string layer;
    int index = 0;               // position in the layer's blobs
    std::vector<int64_t> shape;  // Caffe's blob shape
    std::string node;            // the graph's Constant (shared parameters share it and the
    HostTensor data, diff;       // tensors)
  };
  struct Layer {
    std::string name, type;
    std::vector<int> params;  // indices into params()
  };

  // Reads `prototxt` (and `weights`, a .caffemodel, unless empty), imports it for the options'
  // phase, opens its Data/ImageData layers (sources relative to the working directory, then the
  // prototxt's folder) and compiles the forward plan. The backward plan is compiled at the first
  // Backward().
  static absl::StatusOr<std::unique_ptr<BlobNet>> Load(const std::string& prototxt,
                                                       const std::string& weights,
                                                       const BlobNetOptions& options);
  ~BlobNet();

  // Blobs in the order layers produce them (inputs first); an in-place top is one blob.
  std::vector<Blob>& blobs() { return blobs_; }
  Blob* FindBlob(const std::string& name);
  std::vector<Param>& params() { return params_; }
  const std::vector<Layer>& layers() const { return layers_; }
  // The blobs Forward reads from the caller (Input layers' tops), and the blobs fed from data
  // layers, and those no layer consumes.
  const std::vector<std::string>& inputs() const { return inputs_; }
  const std::vector<std::string>& fed_inputs() const { return fed_; }
  const std::vector<std::string>& outputs() const { return outputs_; }
  bool has_loss() const { return has_loss_; }
  const std::string& description() const { return description_; }

  // Reads the next batch of each data layer into its tops, then runs the net on the input blobs
  // and parameters as they are now; every blob's data is then the pass's (a training-mode
  // BatchNorm's statistics parameters are updated, as in Caffe). LSTM and RNN layers without
  // expose_hidden start from the state the last Forward left (zeros at first) where cont is 1,
  // as Caffe's layers keep it.
  absl::Status Forward();
  // The gradients of the losses (their loss_weight) for the last Forward's inputs: every blob's
  // and parameter's diff is set (not accumulated). Recomputes that forward pass (same dropout
  // masks); FailedPrecondition when the net has no loss.
  absl::Status Backward();
  // Writes the parameters as a .caffemodel (layers by name, Caffe's shapes); an existing file is
  // replaced only with `overwrite`.
  absl::Status Save(const std::string& path, bool overwrite) const;
  // Copies the blobs of a .caffemodel's layers with the same names (Caffe's copy_from): counts
  // and shapes must match; layers the file lacks keep their values.
  absl::Status CopyFrom(const std::string& caffemodel);

 private:
  BlobNet() = default;
  absl::StatusOr<std::map<std::string, HostTensor>> Run(ExecutionContext& context, float seed);
  absl::Status CompileBackward();
  // Imports the net and makes every blob that is not an input a graph output.
  absl::StatusOr<CaffeModel> Import(const CaffeImportOptions& import) const;

  std::string origin_;
  CompileOptions compile_;
  CaffeModel model_;  // layers, params, inputs; its graph moved out
  // What the backward graph is imported from (the weights are graph inputs: none are read).
  caffe::NetParameter file_;
  CaffeImportOptions import_;
  std::unique_ptr<ExecutionPlan> forward_plan_, backward_plan_;
  std::unique_ptr<ExecutionContext> forward_, backward_;
  std::map<std::string, std::string> input_nodes_;  // graph input -> blob name (data inputs)
  std::string dropout_seed_input_;
  // The recurrent layers' carried states (CaffeModel::carried_states), by graph input: the value
  // the next Forward starts from, and the one the last Forward started from (its Backward's).
  std::map<std::string, HostTensor> carried_next_, carried_last_;
  std::vector<NetFeed> feeds_;
  std::vector<Blob> blobs_;
  std::vector<Param> params_;
  std::vector<Layer> layers_;
  std::vector<std::string> inputs_, fed_, outputs_;
  bool has_loss_ = false;
  int64_t passes_ = 0;
  float last_seed_ = 0;
  std::string description_;
};

}  // namespace kiln

#endif  // KILN_FRONTENDS_CAFFE_TRAINING_BLOB_NET_H_
