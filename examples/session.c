/* A decoding loop of your own over kiln's forward passes: a session holds
 * the KV cache, kiln_session_run writes logits into your buffer, and you
 * pick the next token (here, greedily).
 * Usage: session MODEL PROMPT [MAX_TOKENS] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kiln/kiln.h>

static void Check(kiln_status status, const char* what) {
  if (status != KILN_OK) {
    fprintf(stderr, "%s failed (%s): %s\n", what, kiln_status_name(status), kiln_last_error());
    exit(1);
  }
}

static int32_t Argmax(const float* row, int32_t n) {
  int32_t best = 0;
  for (int32_t i = 1; i < n; ++i) {
    if (row[i] > row[best]) best = i;
  }
  return best;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s MODEL PROMPT [MAX_TOKENS]\n", argv[0]);
    return 2;
  }
  const int max_tokens = argc > 3 ? atoi(argv[3]) : 32;
  kiln_set_log_level(KILN_LOG_WARN);

  kiln_model* model = NULL;
  Check(kiln_model_load(argv[1], NULL, &model), "kiln_model_load");

  /* The prompt's ids: ask for the count, then fill a buffer of that size
   * (with room for the tokens to come). */
  size_t num_prompt = 0;
  Check(kiln_tokenize(model, argv[2], strlen(argv[2]), 1, 1, NULL, 0, &num_prompt), "kiln_tokenize");
  int32_t* ids = malloc((num_prompt + (size_t)max_tokens) * sizeof(int32_t));
  Check(kiln_tokenize(model, argv[2], strlen(argv[2]), 1, 1, ids, num_prompt, &num_prompt), "kiln_tokenize");

  kiln_session_options options;
  kiln_session_options_default(&options);
  options.threads = 2;
  kiln_session* session = NULL;
  /* One sequence (id 0) of up to prompt + max_tokens tokens. */
  Check(kiln_session_create(model, 1, (int32_t)num_prompt + max_tokens, &options, &session),
        "kiln_session_create");

  const int32_t vocab = kiln_session_vocab_size(session);
  float* logits = malloc((size_t)vocab * sizeof(float)); /* one row: the last token's */
  size_t length = num_prompt;
  /* Prefill: the whole prompt in one pass (positions and sequence ids
   * NULL: sequence 0, continuing where it stands). */
  Check(kiln_session_run(session, ids, NULL, NULL, num_prompt, KILN_LOGITS_LAST, logits, (size_t)vocab, NULL),
        "kiln_session_run");
  for (int n = 0; n < max_tokens; ++n) {
    int32_t next = Argmax(logits, vocab);
    if (next == kiln_model_eos_id(model)) break;
    ids[length++] = next;
    if (n + 1 == max_tokens) break;
    /* Decode: one token at the next position. */
    int32_t position = (int32_t)length - 1;
    int32_t seq = 0;
    Check(kiln_session_run(session, &next, &position, &seq, 1, KILN_LOGITS_LAST, logits, (size_t)vocab, NULL),
          "kiln_session_run");
  }

  char* text = NULL;
  Check(kiln_detokenize(model, ids + num_prompt, length - num_prompt, 1, &text), "kiln_detokenize");
  printf("%s\n", text);
  kiln_string_free(text);

  free(logits);
  free(ids);
  kiln_session_destroy(session);
  kiln_model_destroy(model);
  return 0;
}
