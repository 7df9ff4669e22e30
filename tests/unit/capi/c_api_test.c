/* kiln.h from C: compiled as C99 with -Wpedantic and linked against
 * libkiln.so by the C compiler, it exercises each area of the API once.
 * Usage: c_api_test MODEL_DIR (tiny-qwen2) [ONNX_DIR] (the models of
 * make_capi_onnx_models.py); exits non-zero on a failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/kiln.h"

static int failures = 0;

#define EXPECT(cond)                                                      \
  do {                                                                    \
    if (!(cond)) {                                                        \
      fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                         \
    }                                                                     \
  } while (0)

#define REQUIRE_OK(call)                                                                \
  do {                                                                                  \
    kiln_status status_ = (call);                                                       \
    if (status_ != KILN_OK) {                                                           \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, kiln_last_error()); \
      exit(1);                                                                          \
    }                                                                                   \
  } while (0)

struct Stream {
  char text[4096];
  size_t length;
  int events;
};

static int Collect(const kiln_token_event* event, void* user_data) {
  struct Stream* stream = (struct Stream*)user_data;
  if (stream->length + event->text_len < sizeof(stream->text)) {
    memcpy(stream->text + stream->length, event->text, event->text_len);
    stream->length += event->text_len;
    stream->text[stream->length] = '\0';
  }
  ++stream->events;
  return 0;
}

/* two_relu.onnx (a: f32[n,4], b: f32[2,3] -> ya = relu(relu(a)), yb = relu(b))
 * with n fixed to 2 at load, run on this program's arrays. */
static void TestOnnx(const char* dir) {
  char path[512];
  kiln_onnx_model* onnx = NULL;
  kiln_onnx_options options;
  int64_t a_dims[2] = {2, 4}, b_dims[2] = {2, 3}, ya_dims[4] = {0, 0, 0, 0};
  kiln_input_shape shape;
  kiln_tensor_info info;
  float a[8] = {-1, 2, -3, 4, 0.5f, -0.5f, 7, -8}, b[6] = {1, -1, 2, -2, 3, -3};
  float ya[8], yb[6];
  kiln_tensor inputs[2], outputs[2];
  size_t rank = 0, i;

  snprintf(path, sizeof(path), "%s/two_relu.onnx", dir);
  kiln_onnx_options_default(&options);
  shape.name = "a";
  shape.dims = a_dims;
  shape.rank = 2;
  options.input_shapes = &shape;
  options.num_input_shapes = 1;
  options.threads = 2;
  REQUIRE_OK(kiln_onnx_model_load(path, &options, &onnx));
  EXPECT(kiln_onnx_model_num_inputs(onnx) == 2 && kiln_onnx_model_num_outputs(onnx) == 2);
  REQUIRE_OK(kiln_onnx_model_input_info(onnx, 0, &info));
  EXPECT(strcmp(info.name, "a") == 0 && info.dtype == KILN_DTYPE_F32 && info.rank == 2 && info.dims[0] == 2);

  inputs[0].name = "a";
  inputs[0].dtype = KILN_DTYPE_F32;
  inputs[0].rank = 2;
  inputs[0].dims = a_dims;
  inputs[0].data = a;
  inputs[0].size_bytes = sizeof(a);
  inputs[1] = inputs[0];
  inputs[1].name = "b";
  inputs[1].dims = b_dims;
  inputs[1].data = b;
  inputs[1].size_bytes = sizeof(b);
  REQUIRE_OK(kiln_onnx_model_output_shape(onnx, inputs, 2, 0, ya_dims, 4, &rank));
  EXPECT(rank == 2 && ya_dims[0] == 2 && ya_dims[1] == 4);
  outputs[0].name = NULL; /* by position: ya */
  outputs[0].dtype = KILN_DTYPE_F32;
  outputs[0].rank = rank;
  outputs[0].dims = ya_dims;
  outputs[0].data = ya;
  outputs[0].size_bytes = sizeof(ya);
  outputs[1] = outputs[0];
  outputs[1].dims = b_dims;
  outputs[1].data = yb;
  outputs[1].size_bytes = sizeof(yb);
  REQUIRE_OK(kiln_onnx_model_run(onnx, inputs, 2, outputs, 2));
  for (i = 0; i < 8; ++i) EXPECT(ya[i] == (a[i] > 0 ? a[i] : 0));
  for (i = 0; i < 6; ++i) EXPECT(yb[i] == (b[i] > 0 ? b[i] : 0));

  /* A wrong dtype: refused, naming the input. */
  inputs[1].dtype = KILN_DTYPE_I32;
  EXPECT(kiln_onnx_model_run(onnx, inputs, 2, outputs, 2) == KILN_ERROR_INVALID_ARGUMENT);
  EXPECT(strstr(kiln_last_error(), "inputs[1] (b): dtype i32 given") != NULL);
  kiln_onnx_model_destroy(onnx);
}

int main(int argc, char** argv) {
  kiln_model* model = NULL;
  kiln_engine* engine = NULL;
  kiln_session* session = NULL;
  kiln_engine_options engine_options;
  kiln_session_options session_options;
  kiln_sampling_params params;
  kiln_completion* completion = NULL;
  struct Stream stream;
  int32_t ids[64];
  size_t num_ids = 0;
  float* logits = NULL;
  size_t rows = 0;
  int32_t vocab = 0;
  char missing[512];
  const char* prompt = "And God said, Let there be light: and there was";

  if (argc != 2 && argc != 3) {
    fprintf(stderr, "usage: %s MODEL_DIR [ONNX_DIR]\n", argv[0]);
    return 2;
  }
  EXPECT(kiln_api_version() == KILN_API_VERSION);
  EXPECT(strlen(kiln_version()) > 0);
  kiln_set_log_level(KILN_LOG_WARN);

  /* A missing file: the message names the path. */
  snprintf(missing, sizeof(missing), "%s/no-such-folder", argv[1]);
  EXPECT(kiln_model_load(missing, NULL, &model) == KILN_ERROR_NOT_FOUND);
  EXPECT(strstr(kiln_last_error(), missing) != NULL);
  EXPECT(model == NULL);

  REQUIRE_OK(kiln_model_load(argv[1], NULL, &model));
  kiln_engine_options_default(&engine_options);
  engine_options.threads = 2;
  REQUIRE_OK(kiln_engine_create(model, &engine_options, &engine));

  /* Blocking and streamed greedy generation agree. */
  kiln_sampling_params_default(&params);
  params.temperature = 0;
  params.max_tokens = 24;
  params.ignore_eos = 1;
  REQUIRE_OK(kiln_generate(engine, prompt, &params, &completion));
  EXPECT(completion->num_tokens == 24);
  EXPECT(completion->finish_reason == KILN_FINISH_LENGTH);
  EXPECT(completion->text_len > 0 && strlen(completion->text) == completion->text_len);
  memset(&stream, 0, sizeof(stream));
  REQUIRE_OK(kiln_generate_stream(engine, prompt, &params, Collect, &stream, NULL));
  EXPECT(stream.events == 24);
  EXPECT(strcmp(stream.text, completion->text) == 0);

  /* A bad argument: the message names it. */
  params.top_p = 0;
  EXPECT(kiln_generate(engine, prompt, &params, &completion) == KILN_ERROR_INVALID_ARGUMENT);
  EXPECT(strstr(kiln_last_error(), "top_p") != NULL);

  /* Tokenize, then one session pass into our own buffer; its argmax is the
   * first generated token. */
  REQUIRE_OK(kiln_tokenize(model, prompt, strlen(prompt), 1, 1, ids, 64, &num_ids));
  EXPECT(num_ids == completion->num_prompt_tokens);
  kiln_session_options_default(&session_options);
  session_options.threads = 2;
  REQUIRE_OK(kiln_session_create(model, 1, 64, &session_options, &session));
  vocab = kiln_session_vocab_size(session);
  logits = (float*)malloc((size_t)vocab * sizeof(float));
  REQUIRE_OK(
      kiln_session_run(session, ids, NULL, NULL, num_ids, KILN_LOGITS_LAST, logits, (size_t)vocab, &rows));
  EXPECT(rows == 1);
  {
    int32_t best = 0, v;
    for (v = 1; v < vocab; ++v) {
      if (logits[v] > logits[best]) best = v;
    }
    EXPECT(best == completion->token_ids[0]);
  }
  EXPECT(kiln_session_run(session, ids, NULL, NULL, num_ids, KILN_LOGITS_ALL, logits, (size_t)vocab, &rows) ==
         KILN_ERROR_OUT_OF_RANGE);
  EXPECT(strstr(kiln_last_error(), "logits buffer holds") != NULL);

  if (argc == 3) TestOnnx(argv[2]);

  free(logits);
  kiln_completion_free(completion);
  kiln_session_destroy(session);
  kiln_engine_destroy(engine);
  kiln_model_destroy(model);
  if (failures == 0) printf("c_api_test: all checks passed\n");
  return failures == 0 ? 0 : 1;
}
