/* Kiln's C API: the stable interface of libkiln.so (docs/EMBEDDING.md walks through it).
 *
 * Plain C (C99), no C++ type crosses it, so any language with a C FFI can call it (Rust, Go, C#,
 * Python's ctypes). The rules every function follows:
 *
 *   - Objects are opaque handles made by a *_create / *_from_* function and freed by the matching
 *     *_destroy (which accepts NULL). An engine is immutable once made and may be shared by any
 *     number of threads; a context or a trainer is used by one thread at a time.
 *   - A function that can fail returns a kiln_status: KILN_OK (0), or a code naming the kind of
 *     failure. kiln_last_error() then gives the message ("where: what"), valid on the calling
 *     thread until its next Kiln call. Nothing aborts the process on bad input.
 *   - Strings passed in are UTF-8 and NUL-terminated; strings returned belong to the object that
 *     returned them and live as long as it does.
 *   - Options structs start with struct_size: set it with the *_init function, which fills the
 *     defaults, so a program built against this header keeps working with a later libkiln.so.
 */
#ifndef KILN_KILN_H_
#define KILN_KILN_H_

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define KILN_API
#else
#define KILN_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this header; kiln_version() gives the library's. The major number changes only
 * when a function or struct of this header changes incompatibly (the soname follows it). */
#define KILN_VERSION_MAJOR 0
#define KILN_VERSION_MINOR 1
#define KILN_VERSION_PATCH 0

/* The kinds of failure (the same numbers as absl::StatusCode and gRPC's codes). */
typedef enum kiln_status {
  KILN_OK = 0,
  KILN_CANCELLED = 1,
  KILN_UNKNOWN = 2,
  KILN_INVALID_ARGUMENT = 3, /* a bad file, shape, name, attribute or option */
  KILN_DEADLINE_EXCEEDED = 4,
  KILN_NOT_FOUND = 5, /* a file or a name that does not exist */
  KILN_ALREADY_EXISTS = 6,
  KILN_PERMISSION_DENIED = 7,
  KILN_RESOURCE_EXHAUSTED = 8,  /* out of device or host memory */
  KILN_FAILED_PRECONDITION = 9, /* a call that does not fit the object's state */
  KILN_ABORTED = 10,
  KILN_OUT_OF_RANGE = 11, /* an index past the end */
  KILN_UNIMPLEMENTED = 12,
  KILN_INTERNAL = 13,
  KILN_UNAVAILABLE = 14, /* no usable GPU where one was asked for */
  KILN_DATA_LOSS = 15
} kiln_status;

/* The message of the last failed call on this thread ("" when none failed). */
KILN_API const char* kiln_last_error(void);
/* The name of a status code: "OK", "INVALID_ARGUMENT", ... */
KILN_API const char* kiln_status_name(kiln_status status);
/* The library's version, "MAJOR.MINOR.PATCH". */
KILN_API const char* kiln_version(void);
/* How many CUDA devices this process can use (0 without a usable GPU; never fails). */
KILN_API int kiln_cuda_device_count(void);

/* Element types of tensors. */
typedef enum kiln_dtype {
  KILN_F32 = 0,
  KILN_F16 = 1, /* IEEE binary16 */
  KILN_BF16 = 2,
  KILN_I32 = 3,
  KILN_U8 = 4
} kiln_dtype;
/* Bytes per element of `dtype` (0 for an unknown value). */
KILN_API size_t kiln_dtype_size(kiln_dtype dtype);

#define KILN_MAX_RANK 8

/* One input or output of an engine: dense, row-major, in the engine's dtype. */
typedef struct kiln_tensor_info {
  const char* name;
  kiln_dtype dtype;
  int rank;
  int64_t dims[KILN_MAX_RANK];
  size_t bytes; /* the product of dims times the element size */
} kiln_tensor_info;

/* How an engine is compiled. */
typedef struct kiln_compile_options {
  size_t struct_size;
  /* "auto" (a GPU when one is usable and every op has a CUDA kernel, else the CPU), "cpu",
   * "reference" (the plain reference kernels), "cuda" (GPU 0) or "cuda:N". Default "auto". */
  const char* device;
  /* CUDA only: "fp32" (default), "tf32", "fp16", "bf16"; inputs and outputs keep the model's
   * dtype (f32), the engine converts at its edges. */
  const char* precision;
  /* CUDA only: "auto" (default: NHWC where the tensor cores want it), "nchw", "nhwc". */
  const char* layout;
  /* Convolution algorithms: "heuristic" (default) or "measure" (each timed once, at compile). */
  const char* algo;
  /* 1 (default): the inference rewrites (BatchNorm folding, fused epilogues, ...); 0: the
   * graph's nodes as they are. */
  int optimize;
  /* The batch size to compile a Caffe model for (the first dim of every input); 0 (default): as
   * the model says. */
  int64_t batch;
  /* Variable batch (Caffe models): > 0 compiles for every batch up to max_batch, and a run may
   * then use any batch from 1 to it without compiling again. The engine holds plans for the
   * powers of two below max_batch and for max_batch itself (sharing one copy of the weights); a
   * run uses the smallest that fits, its extra rows zero. 0 (default): one batch. */
  int64_t max_batch;
  /* The most workspace one step may use, in bytes: a step whose every algorithm needs more fails
   * the compile, naming it (KILN_RESOURCE_EXHAUSTED). 0 (default): no limit. As the CLI's
   * --workspace-limit. */
  int64_t workspace_limit;
  /* The activation arena's budget, as a factor (>= 1) over what the activations alone need: a
   * step whose workspace would lift the arena above it takes an algorithm within what is left,
   * whatever it costs in time. 0 (default): Kiln's own budget (1.125, and only while it costs at
   * most 2% of the measured time). As the CLI's --workspace-budget. */
  double workspace_budget;
  /* With algo "measure": the file measured choices are read from and written back to, so a
   * later compile measures nothing again; its folder must exist. NULL or "" (default): none. As
   * the CLI's --tuning-file. */
  const char* tuning_file;
} kiln_compile_options;

KILN_API void kiln_compile_options_init(kiln_compile_options* options);

/* ---- Graphs built op by op ------------------------------------------------------------------ */

typedef struct kiln_graph kiln_graph;
/* A value of a graph under construction: an index the graph hands out (>= 0). */
typedef int32_t kiln_value;

KILN_API kiln_status kiln_graph_create(kiln_graph** graph);
KILN_API void kiln_graph_destroy(kiln_graph* graph);
/* A graph input named `name` of `dtype` and dims[0..rank). */
KILN_API kiln_status kiln_graph_input(kiln_graph* graph, const char* name, kiln_dtype dtype,
                                      int rank, const int64_t* dims, kiln_value* value);
/* A weight tensor, copied from `data` (dense, row-major, `dtype`). */
KILN_API kiln_status kiln_graph_constant(kiln_graph* graph, const char* name, kiln_dtype dtype,
                                         int rank, const int64_t* dims, const void* data,
                                         kiln_value* value);
/* Any op Kiln has (`kiln ops` lists them; docs/EMBEDDING.md the attributes), on `inputs`, with
 * `attributes` written as in Kiln's text IR, comma separated: "kernel=[3,3], stride=[2,2],
 * mode=\"max\"" (NULL or "" for the defaults). The op's outputs are written to
 * outputs[0..*num_outputs); at most `max_outputs` of them (an op with more is an error). Shapes
 * are inferred at once: a bad shape or attribute fails here, naming the node. */
KILN_API kiln_status kiln_graph_op(kiln_graph* graph, const char* op, const char* name,
                                   int num_inputs, const kiln_value* inputs, const char* attributes,
                                   int max_outputs, kiln_value* outputs, int* num_outputs);
/* Marks `value` as a graph output named `name`. */
KILN_API kiln_status kiln_graph_output(kiln_graph* graph, const char* name, kiln_value value);
/* The graph in Kiln's text IR (owned by the graph, valid until its next change). */
KILN_API const char* kiln_graph_text(kiln_graph* graph);

/* ---- Engines: a compiled plan and its weights ----------------------------------------------- */

typedef struct kiln_engine kiln_engine;

/* Imports a Caffe deploy net (`prototxt`) with the weights of `caffemodel` and compiles it.
 * caffemodel may be NULL only for a net without learnable blobs. */
KILN_API kiln_status kiln_engine_from_caffe(const char* prototxt, const char* caffemodel,
                                            const kiln_compile_options* options,
                                            kiln_engine** engine);
/* Compiles `graph` (which is left as it was and may be destroyed afterwards). */
KILN_API kiln_status kiln_engine_from_graph(const kiln_graph* graph,
                                            const kiln_compile_options* options,
                                            kiln_engine** engine);
/* Frees the engine; contexts made from it keep what they need and stay usable. */
KILN_API void kiln_engine_destroy(kiln_engine* engine);
/* Saves the engine as a plan file: its graph and weights, compile options and every measured
 * algorithm choice, checksummed. An existing `path` is replaced only with overwrite = 1 (then
 * atomically). */
KILN_API kiln_status kiln_engine_save(const kiln_engine* engine, const char* path, int overwrite);
/* Loads a plan file kiln_engine_save (or `kiln compile --save-plan`) wrote, measuring nothing.
 * Only options->device is used (NULL or "auto": the saved GPU, cuda:0 by default); the rest is
 * the plan's. A plan from another Kiln version, for another kind of GPU or another backend, or
 * damaged, is refused (KILN_FAILED_PRECONDITION or KILN_DATA_LOSS) with the reason. */
KILN_API kiln_status kiln_engine_load(const char* path, const kiln_compile_options* options,
                                      kiln_engine** engine);

KILN_API int kiln_engine_num_inputs(const kiln_engine* engine);
KILN_API int kiln_engine_num_outputs(const kiln_engine* engine);
/* The index-th input or output (ordered by name); KILN_OUT_OF_RANGE past the end. */
KILN_API kiln_status kiln_engine_input(const kiln_engine* engine, int index,
                                       kiln_tensor_info* info);
KILN_API kiln_status kiln_engine_output(const kiln_engine* engine, int index,
                                        kiln_tensor_info* info);
/* One line: backend, device, precision, layout, steps and memory. */
KILN_API const char* kiln_engine_describe(const kiln_engine* engine);
/* The CUDA device the engine runs on, or -1 for a CPU engine. */
KILN_API int kiln_engine_cuda_device(const kiln_engine* engine);
/* Bytes of the weights, held once on the device however many contexts there are. */
KILN_API int64_t kiln_engine_weights_bytes(const kiln_engine* engine);
/* The largest batch of a variable-batch engine (kiln_compile_options.max_batch), 0 for a fixed
 * one. For a variable-batch engine, kiln_engine_input/output give dims[0] = max_batch. */
KILN_API int64_t kiln_engine_max_batch(const kiln_engine* engine);
/* Bytes each context allocates for itself (activations and workspace). */
KILN_API int64_t kiln_engine_context_bytes(const kiln_engine* engine);

/* What the compiler made of the network, as `kiln compile --json --why-not-fused` and `kiln dump`
 * show it. Each returns text owned by the engine, made at the first call and valid until the
 * engine is destroyed; "" (and kiln_last_error says why) for a NULL engine or a failure. For a
 * variable-batch engine they describe the plan of max_batch. */
/* One JSON document (docs/EMBEDDING.md "Reports" lists its fields): "backend", "device",
 * "precision", "layout"; "steps", every plan step in order with its kernel, the source layers it
 * covers (a Caffe model's prototxt layers, else the graph's node names; several when fused), its
 * algorithm and workspace; "why_not_fused", the rewrites the optimizer declined ({"pass",
 * "producer", "consumer", "reason"}); and "memory": arena, planned, naive and weights bytes, and
 * per buffer of the activation arena its name, offset, bytes, first and last step. */
KILN_API const char* kiln_engine_report_json(const kiln_engine* engine);
/* The plan as a graphviz digraph, each fused kernel a cluster labelled with its layers (what
 * `kiln dump --dot` writes; `dot -Tsvg` draws it). */
KILN_API const char* kiln_engine_graph_dot(const kiln_engine* engine);
/* The activation arena over the plan's steps as a standalone SVG document: one rectangle per
 * buffer, its bytes by its live steps (what `kiln dump --memory` writes). */
KILN_API const char* kiln_engine_memory_svg(const kiln_engine* engine);

/* ---- Contexts: one thread's activations --------------------------------------------------- */

typedef struct kiln_context kiln_context;

/* A context of `engine` with its own activations (and, for CUDA, its own stream); the weights
 * stay the engine's. Make one per thread that runs the engine. */
KILN_API kiln_status kiln_context_create(kiln_engine* engine, kiln_context** context);
KILN_API void kiln_context_destroy(kiln_context* context);

/* Host memory in and out: copies `bytes` (exactly the input's bytes) from `data`. For a
 * variable-batch engine, `bytes` is B rows of the input (B from 1 to max_batch), the same B for
 * every input. */
KILN_API kiln_status kiln_context_set_input(kiln_context* context, const char* name,
                                            const void* data, size_t bytes);
/* Runs on the inputs set, synchronously. */
KILN_API kiln_status kiln_context_run(kiln_context* context);
/* Copies the output `name` of the last run into `data` (`bytes` must be the output's bytes; for
 * a variable-batch engine, the last run's B rows of it). */
KILN_API kiln_status kiln_context_get_output(const kiln_context* context, const char* name,
                                             void* data, size_t bytes);

/* Device memory the caller owns, no copies: every input and output by name, each pointer on the
 * engine's device laid out as kiln_engine_input/output say. The run is ordered on the caller's
 * `cuda_stream` (a cudaStream_t of the engine's GPU; NULL for the context's own stream): it
 * starts after the work enqueued there so far, and the caller's later work on that stream starts
 * after it. Returns once the work is enqueued, without waiting on the host. For a CPU engine the
 * pointers are host memory and the run is synchronous. A variable-batch engine runs here at
 * max_batch (the buffers hold max_batch rows). */
KILN_API kiln_status kiln_context_run_device(kiln_context* context, int num_inputs,
                                             const char* const* input_names,
                                             const void* const* inputs, int num_outputs,
                                             const char* const* output_names, void* const* outputs,
                                             void* cuda_stream);
/* The batch of the last kiln_context_run (0 before the first). */
KILN_API int64_t kiln_context_batch(const kiln_context* context);
/* Waits for the context's own stream (after runs on it with cuda_stream NULL). */
KILN_API kiln_status kiln_context_synchronize(kiln_context* context);
/* Times the forward on the inputs set (kiln_context_set_input, every input): one run as
 * kiln_context_run (whose outputs can then be read), `warmup` (>= 0) more, then `iterations`
 * (1 to 1000000) whole forwards back to back; *milliseconds is the median of those (as `kiln
 * time`: on CUDA a replayed graph, the inputs' copy outside the timed part). */
KILN_API kiln_status kiln_context_time(kiln_context* context, int iterations, int warmup,
                                       double* milliseconds);

/* ---- Training with a Caffe solver ------------------------------------------------------------ */

typedef struct kiln_trainer kiln_trainer;

/* A trainer for the solver file `solver` (its net and data as the file says), starting from the
 * weights of `caffemodel` (NULL: the net's fillers). options->device, precision, layout, algo,
 * workspace_limit, workspace_budget and tuning_file apply; batch and optimize do not. */
KILN_API kiln_status kiln_trainer_from_solver(const char* solver, const char* caffemodel,
                                              const kiln_compile_options* options,
                                              kiln_trainer** trainer);
KILN_API void kiln_trainer_destroy(kiln_trainer* trainer);
/* Runs `iterations` training iterations (forward, backward, update; no tests, no snapshots). */
KILN_API kiln_status kiln_trainer_step(kiln_trainer* trainer, int iterations);
/* The iterations done so far (the solverstate's iter). */
KILN_API int64_t kiln_trainer_iteration(const kiln_trainer* trainer);
/* The loss of the last iteration. */
KILN_API double kiln_trainer_loss(const kiln_trainer* trainer);
/* Writes <prefix>_iter_N.caffemodel and .solverstate (and the manifest that pairs them); prefix
 * NULL: the solver's snapshot_prefix. */
KILN_API kiln_status kiln_trainer_snapshot(kiln_trainer* trainer, const char* prefix);
/* Restores the weights, history and data position of a .solverstate Kiln or Caffe wrote. */
KILN_API kiln_status kiln_trainer_restore(kiln_trainer* trainer, const char* solverstate);

/* The creation options of a trainer (kiln_trainer_create). */
typedef struct kiln_trainer_options {
  size_t struct_size;
  /* NULL: the solver file's `type`; else one of "SGD", "Nesterov", "AdaGrad", "RMSProp",
   * "AdaDelta", "Adam" in its place (pycaffe's SGDSolver, AdamSolver, ...). */
  const char* solver_type;
  /* NULL: the nets' fillers; else the .caffemodel to start from. */
  const char* caffemodel;
  /* NULL: the defaults; as for kiln_trainer_from_solver. */
  const kiln_compile_options* compile;
} kiln_trainer_options;

KILN_API void kiln_trainer_options_init(kiln_trainer_options* options);
/* kiln_trainer_from_solver with the solver type chosen by the caller. */
KILN_API kiln_status kiln_trainer_create(const char* solver, const kiln_trainer_options* options,
                                         kiln_trainer** trainer);
/* The solver's settings as one JSON object (owned by the trainer): type, base_lr, max_iter,
 * display, average_loss, test_interval, test_iter (a list, one per test net), test_initialization,
 * snapshot, snapshot_prefix (resolved as kiln train does) and iter_size. */
KILN_API const char* kiln_trainer_solver_json(const kiln_trainer* trainer);
/* The test nets the solver declares. */
KILN_API int kiln_trainer_num_test_nets(const kiln_trainer* trainer);
/* Runs test net `net` over its test_iter batches on the current weights (Caffe's Solver::Test);
 * `json` receives {"output": mean, ...} for each scalar output (owned by the trainer, valid until
 * its next call). */
KILN_API kiln_status kiln_trainer_test(kiln_trainer* trainer, int net, const char** json);

/* ---- Nets as pycaffe shows them: every blob and parameter by name ---------------------------- */

typedef struct kiln_net kiln_net;

typedef enum kiln_phase { KILN_PHASE_TEST = 0, KILN_PHASE_TRAIN = 1 } kiln_phase;

/* A blob of a net, or a parameter blob of a layer. data and diff are host memory the net owns
 * (dense f32, row-major, `count` values each; diff NULL where there is none), at an address
 * that stays the same until the net is destroyed: the caller may read and write them between
 * passes. */
typedef struct kiln_blob_info {
  const char* name; /* the blob's name, or the parameter's layer */
  int index;        /* a parameter's position in its layer's blobs; 0 for a blob */
  int rank;
  int64_t dims[KILN_MAX_RANK];
  size_t count;
  float* data;
  float* diff;
} kiln_blob_info;

/* Imports the Caffe net `prototxt` for `phase` with the weights of `caffemodel` (NULL: the
 * layers' fillers) and compiles it with every blob kept (no fusion). Data and ImageData layers
 * read their sources (relative paths: the working directory, then the prototxt's folder).
 * `phase` is a kiln_phase (an int, so any value a caller passes is checked, not undefined).
 * options->device, precision, layout, algo and batch (Input layers' first dim) apply. */
KILN_API kiln_status kiln_net_create(const char* prototxt, const char* caffemodel, int phase,
                                     const kiln_compile_options* options, kiln_net** net);
KILN_API void kiln_net_destroy(kiln_net* net);
/* One line: the file, phase, counts, backend and precision. */
KILN_API const char* kiln_net_describe(const kiln_net* net);
/* Blobs in the order the layers make them, inputs first. */
KILN_API int kiln_net_num_blobs(const kiln_net* net);
KILN_API kiln_status kiln_net_blob(kiln_net* net, int index, kiln_blob_info* info);
/* The blobs forward reads from the caller (Input layers), those data layers fill, and those no
 * layer consumes: index-th name, NULL past the end. */
KILN_API const char* kiln_net_input(const kiln_net* net, int index);
KILN_API const char* kiln_net_fed_input(const kiln_net* net, int index);
KILN_API const char* kiln_net_output(const kiln_net* net, int index);
/* Layers in file order; `type` and `num_params` may be NULL. */
KILN_API int kiln_net_num_layers(const kiln_net* net);
KILN_API kiln_status kiln_net_layer(const kiln_net* net, int index, const char** name,
                                    const char** type, int* num_params);
/* The index-th parameter blob of layer `layer`. Shared parameters share their memory. */
KILN_API kiln_status kiln_net_param(kiln_net* net, int layer, int index, kiln_blob_info* info);
/* Reads the next batch of each data layer, then runs the net on the blobs and parameters as
 * they are: every blob's data is the pass's. */
KILN_API kiln_status kiln_net_forward(kiln_net* net);
/* Every blob's and parameter's diff for the last forward's inputs (set, not accumulated).
 * KILN_FAILED_PRECONDITION for a net without a loss or before the first forward. */
KILN_API kiln_status kiln_net_backward(kiln_net* net);
/* Writes the parameters as a .caffemodel; an existing `path` only with overwrite = 1. */
KILN_API kiln_status kiln_net_save(const kiln_net* net, const char* path, int overwrite);
/* Copies the parameters of the layers of `caffemodel` with the same names (checked whole first). */
KILN_API kiln_status kiln_net_copy_from(kiln_net* net, const char* caffemodel);

/* The parameter blobs of a trainer's TRAIN net, as kiln_net_param shows a net's: num, then
 * info (data and diff NULL), then copies out and in between iterations. A blob with lr_mult 0
 * that is no statistic is compiled into the plan: setting it is KILN_FAILED_PRECONDITION. */
KILN_API int kiln_trainer_num_params(const kiln_trainer* trainer);
KILN_API kiln_status kiln_trainer_param(const kiln_trainer* trainer, int index,
                                        kiln_blob_info* info);
KILN_API kiln_status kiln_trainer_get_param(const kiln_trainer* trainer, int index, float* data,
                                            size_t count);
KILN_API kiln_status kiln_trainer_set_param(kiln_trainer* trainer, int index, const float* data,
                                            size_t count);

#ifdef __cplusplus
}
#endif

#endif /* KILN_KILN_H_ */
