/* kiln.h from C: compiled as C99 with -Wpedantic and linked against
 * libkiln.so by the C compiler, it exercises each area of the API once.
 * Usage: c_api_test MODEL_DIR (tiny-qwen2); exits non-zero on a failure. */
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

  if (argc != 2) {
    fprintf(stderr, "usage: %s MODEL_DIR\n", argv[0]);
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

  free(logits);
  kiln_completion_free(completion);
  kiln_session_destroy(session);
  kiln_engine_destroy(engine);
  kiln_model_destroy(model);
  if (failures == 0) printf("c_api_test: all checks passed\n");
  return failures == 0 ? 0 : 1;
}
