/* A plain C program against an installed Kiln (gcc + pkg-config, outside the Bazel workspace):
 * LeNet with its trained weights on the CPU backend and on the reference backend, at batch 3,
 * on the same pseudo-random images; the two must agree, each row must be a probability
 * distribution, and bad input must come back as a status with a message.
 *   c_consumer LENET_PROTOTXT LENET_CAFFEMODEL
 * Prints "c consumer: PASS" and exits 0, or says what failed and exits 1. */
#include <kiln/kiln.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

static void check(int ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "c consumer: FAILED: %s (last error: %s)\n", what, kiln_last_error());
    ++failures;
  }
}

/* Runs LeNet on `device` over `images`; writes the 3 x 10 probabilities to `prob`. */
static kiln_status run_lenet(const char* prototxt, const char* weights, const char* device,
                             const float* images, size_t image_bytes, float* prob) {
  kiln_compile_options options;
  kiln_compile_options_init(&options);
  options.device = device;
  options.batch = 3;
  kiln_engine* engine = NULL;
  kiln_status s = kiln_engine_from_caffe(prototxt, weights, &options, &engine);
  if (s != KILN_OK) return s;
  kiln_tensor_info in, out;
  if ((s = kiln_engine_input(engine, 0, &in)) != KILN_OK ||
      (s = kiln_engine_output(engine, 0, &out)) != KILN_OK) {
    kiln_engine_destroy(engine);
    return s;
  }
  check(strcmp(in.name, "data") == 0 && in.rank == 4 && in.dims[0] == 3 && in.dims[2] == 28,
        "the input is data[3,1,28,28]");
  check(strcmp(out.name, "prob") == 0 && out.bytes == 3 * 10 * sizeof(float),
        "the output is prob[3,10]");
  kiln_context* context = NULL;
  s = kiln_context_create(engine, &context);
  /* The context keeps what it needs: the engine handle may go first. */
  kiln_engine_destroy(engine);
  if (s != KILN_OK) return s;
  if ((s = kiln_context_set_input(context, "data", images, image_bytes)) == KILN_OK &&
      (s = kiln_context_run(context)) == KILN_OK) {
    s = kiln_context_get_output(context, "prob", prob, 3 * 10 * sizeof(float));
  }
  kiln_context_destroy(context);
  return s;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: c_consumer LENET_PROTOTXT LENET_CAFFEMODEL\n");
    return 2;
  }
  printf("kiln %s, %d CUDA device(s)\n", kiln_version(), kiln_cuda_device_count());
  static float images[3 * 28 * 28];
  unsigned state = 12345u;
  for (size_t i = 0; i < sizeof(images) / sizeof(images[0]); ++i) {
    state = state * 1664525u + 1013904223u;
    images[i] = (float)(state >> 8) / 16777216.0f; /* [0, 1): MNIST's scaled pixels */
  }
  float cpu[30], reference[30];
  check(run_lenet(argv[1], argv[2], "cpu", images, sizeof(images), cpu) == KILN_OK,
        "LeNet on the cpu backend");
  check(run_lenet(argv[1], argv[2], "reference", images, sizeof(images), reference) == KILN_OK,
        "LeNet on the reference backend");
  double worst = 0;
  for (int r = 0; r < 3; ++r) {
    double sum = 0;
    for (int c = 0; c < 10; ++c) {
      sum += cpu[r * 10 + c];
      const double d = fabs(cpu[r * 10 + c] - reference[r * 10 + c]);
      if (d > worst) worst = d;
    }
    check(fabs(sum - 1.0) < 1e-4, "each row of prob sums to 1");
  }
  printf("LeNet prob row 0:");
  for (int c = 0; c < 10; ++c) printf(" %.4f", cpu[c]);
  printf("\nlargest |cpu - reference|: %.3g\n", worst);
  check(worst < 1e-5, "the cpu backend agrees with the reference backend");

  /* Bad input: a status and a message, never an abort. */
  kiln_engine* engine = NULL;
  check(kiln_engine_from_caffe("no_such.prototxt", NULL, NULL, &engine) == KILN_NOT_FOUND &&
            strstr(kiln_last_error(), "no_such.prototxt") != NULL && engine == NULL,
        "a missing prototxt is KILN_NOT_FOUND naming it");
  check(kiln_engine_from_caffe(argv[1], NULL, NULL, &engine) == KILN_INVALID_ARGUMENT &&
            strstr(kiln_last_error(), "no weights") != NULL,
        "LeNet without its weights is refused");
  kiln_compile_options options;
  kiln_compile_options_init(&options);
  options.precision = "fp64";
  check(kiln_engine_from_caffe(argv[1], argv[2], &options, &engine) == KILN_INVALID_ARGUMENT &&
            strstr(kiln_last_error(), "fp64") != NULL,
        "an unknown precision is refused, naming it");
  check(kiln_context_run(NULL) == KILN_INVALID_ARGUMENT, "a NULL context is an error");

  if (failures) return 1;
  printf("c consumer: PASS\n");
  return 0;
}
