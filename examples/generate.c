/* Generating text with kiln's C API: greedy, blocking and then streamed.
 * Usage: generate MODEL PROMPT [MAX_TOKENS] */
#include <stdio.h>
#include <stdlib.h>

#include <kiln/kiln.h>

/* Prints what kiln said went wrong and ends the program. */
static void Check(kiln_status status, const char* what) {
  if (status != KILN_OK) {
    fprintf(stderr, "%s failed (%s): %s\n", what, kiln_status_name(status), kiln_last_error());
    exit(1);
  }
}

/* Streams each piece of text to stdout as it arrives. */
static int PrintPiece(const kiln_token_event* event, void* user_data) {
  (void)user_data;
  fwrite(event->text, 1, event->text_len, stdout);
  fflush(stdout);
  return 0; /* non-zero would stop the request */
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s MODEL PROMPT [MAX_TOKENS]\n", argv[0]);
    return 2;
  }
  if (kiln_api_version() != KILN_API_VERSION) {
    fprintf(stderr, "libkiln has API version %d, this program was built for %d\n", kiln_api_version(),
            KILN_API_VERSION);
    return 1;
  }
  kiln_set_log_level(KILN_LOG_WARN);

  kiln_model* model = NULL;
  Check(kiln_model_load(argv[1], NULL, &model), "kiln_model_load");

  kiln_engine_options options;
  kiln_engine_options_default(&options);
  options.threads = 2;
  kiln_engine* engine = NULL;
  Check(kiln_engine_create(model, &options, &engine), "kiln_engine_create");

  kiln_sampling_params params;
  kiln_sampling_params_default(&params);
  params.temperature = 0; /* greedy */
  params.max_tokens = argc > 3 ? atoi(argv[3]) : 32;

  /* Blocking: the whole completion at once. */
  kiln_completion* completion = NULL;
  Check(kiln_generate(engine, argv[2], &params, &completion), "kiln_generate");
  printf("%s\n", completion->text);
  fprintf(stderr, "%zu prompt tokens, %zu generated, finished by %s\n", completion->num_prompt_tokens,
          completion->num_tokens, kiln_finish_reason_name(completion->finish_reason));
  kiln_completion_free(completion);

  /* Streaming: the same text, piece by piece. */
  Check(kiln_generate_stream(engine, argv[2], &params, PrintPiece, NULL, NULL), "kiln_generate_stream");
  printf("\n");

  kiln_engine_destroy(engine);
  kiln_model_destroy(model);
  return 0;
}
