/* Embedding Kiln from C: a Caffe classifier loaded once, run from host memory, and its errors
 * read back (docs/EMBEDDING.md walks through it).
 *   bazel run //examples/embedding:classify -- DEPLOY.prototxt WEIGHTS.caffemodel [DEVICE]
 * Feeds one batch of pseudo-random pixels and prints each image's most likely class. */
#include <kiln/kiln.h>
#include <stdio.h>
#include <stdlib.h>

static int fail(const char* what, kiln_status status) {
  fprintf(stderr, "%s: %s: %s\n", what, kiln_status_name(status), kiln_last_error());
  return 1;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: classify DEPLOY.prototxt WEIGHTS.caffemodel [auto|cpu|cuda:N]\n");
    return 2;
  }
  kiln_compile_options options;
  kiln_compile_options_init(&options); /* fusion on, device "auto", fp32 */
  if (argc > 3) options.device = argv[3];
  options.batch = 4;

  kiln_engine* engine = NULL;
  kiln_status s = kiln_engine_from_caffe(argv[1], argv[2], &options, &engine);
  if (s != KILN_OK) return fail("load", s);
  printf("%s\n", kiln_engine_describe(engine));

  kiln_tensor_info input, output;
  if ((s = kiln_engine_input(engine, 0, &input)) != KILN_OK) return fail("input", s);
  if ((s = kiln_engine_output(engine, 0, &output)) != KILN_OK) return fail("output", s);
  if (input.dtype != KILN_F32 || output.dtype != KILN_F32 || output.rank != 2) {
    fprintf(stderr, "this example wants one f32 image input and one [N, classes] f32 output\n");
    return 1;
  }
  kiln_context* context = NULL; /* one per thread; the engine's weights are shared */
  if ((s = kiln_context_create(engine, &context)) != KILN_OK) return fail("context", s);

  float* pixels = malloc(input.bytes);
  float* scores = malloc(output.bytes);
  unsigned seed = 1;
  for (size_t i = 0; i < input.bytes / sizeof(float); ++i) {
    seed = seed * 1664525u + 1013904223u;
    pixels[i] = (float)(seed >> 8) / 16777216.0f;
  }
  if ((s = kiln_context_set_input(context, input.name, pixels, input.bytes)) != KILN_OK ||
      (s = kiln_context_run(context)) != KILN_OK ||
      (s = kiln_context_get_output(context, output.name, scores, output.bytes)) != KILN_OK) {
    return fail("run", s);
  }
  const int64_t classes = output.dims[1];
  for (int64_t n = 0; n < output.dims[0]; ++n) {
    int64_t best = 0;
    for (int64_t c = 1; c < classes; ++c) {
      if (scores[n * classes + c] > scores[n * classes + best]) best = c;
    }
    printf("image %lld: class %lld (%s %.4f)\n", (long long)n, (long long)best, output.name,
           scores[n * classes + best]);
  }
  free(pixels);
  free(scores);
  kiln_context_destroy(context);
  kiln_engine_destroy(engine);
  return 0;
}
