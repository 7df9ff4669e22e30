/* kiln's C API: load a model, generate text (blocking or streamed), tokenize,
 * render chat prompts, run forward passes over a KV cache of your own, and
 * run ONNX models on tensors in your own memory. */
#ifndef KILN_KILN_H_
#define KILN_KILN_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define KILN_API __attribute__((visibility("default")))
#else
#define KILN_API
#endif

/* The version of this header's interface. A library built from a header with
 * the same KILN_API_VERSION accepts every call this header describes;
 * compare it with kiln_api_version() at run time. */
#define KILN_API_VERSION 1

/* ------------------------------------------------------------------------
 * Conventions
 *
 * Errors. Every call that can fail returns a kiln_status; KILN_OK is zero.
 * On failure, kiln_last_error() returns a message that names what was wrong
 * and where ("kiln_model_load: /models/x: no such file or directory"). No
 * C++ exception ever leaves the library; running out of memory is
 * KILN_ERROR_OUT_OF_MEMORY. Output parameters are left untouched on failure.
 *
 * Ownership. Handles (kiln_model, kiln_engine, kiln_session,
 * kiln_onnx_model) are created by kiln_*_create / kiln_model_load /
 * kiln_onnx_model_load and released by the matching
 * kiln_*_destroy, which accepts NULL. Strings the library returns through a
 * `char**` are the caller's and are released with kiln_string_free();
 * completions with kiln_completion_free(). Pointers the library passes to a
 * callback are valid only during that call. Buffers the caller passes in
 * (token ids, logits) stay the caller's; their capacity is given in
 * elements, and a call that needs more fails with KILN_ERROR_OUT_OF_RANGE
 * and reports the size it needs.
 *
 * Options. Every options struct starts with `struct_size`. Fill it with the
 * matching kiln_*_default() function, then change the fields you care
 * about. The library reads and writes only the first struct_size bytes
 * (kiln_*_default() is inline and passes your sizeof to kiln_*_init()), so
 * programs built against an older header keep working with a newer
 * library. A NULL options pointer means the defaults.
 *
 * Threads. A kiln_model is immutable once loaded: tokenize, detokenize and
 * chat rendering may run from any number of threads. Every kiln_engine
 * function except kiln_engine_destroy is thread-safe, and requests from
 * different threads are batched together. Calls on one kiln_session are
 * serialized by the session (one forward pass at a time); separate sessions
 * run in parallel. kiln_last_error() is per thread.
 * ---------------------------------------------------------------------- */

typedef enum kiln_status {
  KILN_OK = 0,
  KILN_ERROR_INVALID_ARGUMENT = 1,   /* a malformed argument or option */
  KILN_ERROR_NOT_FOUND = 2,          /* a file, tensor or request id that does not exist */
  KILN_ERROR_CORRUPT = 3,            /* a model file that contradicts its own format */
  KILN_ERROR_UNSUPPORTED = 4,        /* valid but not implemented (architecture, dtype) */
  KILN_ERROR_OUT_OF_RANGE = 5,       /* beyond a limit: context length, a buffer's capacity */
  KILN_ERROR_RESOURCE_EXHAUSTED = 6, /* KV cache blocks, sequences */
  KILN_ERROR_IO = 7,                 /* the operating system refused (open, mmap, read) */
  KILN_ERROR_CANCELLED = 8,          /* stopped on request */
  KILN_ERROR_INTERNAL = 9,           /* a broken invariant: a bug in kiln */
  KILN_ERROR_OUT_OF_MEMORY = 10      /* an allocation failed */
} kiln_status;

/* The status's name, e.g. "invalid argument"; never NULL. */
KILN_API const char* kiln_status_name(kiln_status status);

/* The message of the last call on this thread that failed; "" if none has.
 * Valid until the next failing call on this thread. Successful calls leave
 * it unchanged. */
KILN_API const char* kiln_last_error(void);

/* KILN_API_VERSION of the library loaded at run time. */
KILN_API int kiln_api_version(void);

/* The library's release, e.g. "0.1.0". */
KILN_API const char* kiln_version(void);

typedef enum kiln_log_level {
  KILN_LOG_DEBUG = 0,
  KILN_LOG_INFO = 1, /* the default (or the KILN_LOG environment variable) */
  KILN_LOG_WARN = 2,
  KILN_LOG_ERROR = 3,
  KILN_LOG_OFF = 4
} kiln_log_level;

/* Sets which messages kiln writes to stderr, process-wide. */
KILN_API void kiln_set_log_level(kiln_log_level level);

/* Releases a string returned by the library. Accepts NULL. */
KILN_API void kiln_string_free(char* text);

/* Loads a backend plugin (a shared library written against
 * include/kiln/kiln_backend.h) and registers its backends process-wide, so
 * that the `backend` option of models and sessions can name them. Loading
 * the same file again does nothing. A file that is not such a plugin, or
 * that the library refuses (another ABI version, a backend name already
 * taken, a support list naming unknown ops), fails with
 * KILN_ERROR_INVALID_ARGUMENT (KILN_ERROR_NOT_FOUND for a missing file) and
 * registers nothing. Directories in the environment variable
 * KILN_BACKEND_PATH (colon-separated) are loaded the first time a backend
 * is looked up. */
KILN_API kiln_status kiln_load_backend_plugin(const char* path);

/* ------------------------------------------------------------------------
 * Models: weights, tokenizer and generation config.
 * ---------------------------------------------------------------------- */

typedef struct kiln_model kiln_model;

typedef struct kiln_model_options {
  size_t struct_size;
  /* A tokenizer other than the model's (a folder, tokenizer.json or .gguf);
   * NULL: the model's own. */
  const char* tokenizer;
  /* "auto" (read the weights; NULL means this) or "dummy" (generate weights
   * of the folder's config.json shapes, or of `preset`'s). */
  const char* load_format;
  /* With "dummy": a published model's shapes, e.g. "qwen2.5-0.5b". */
  const char* preset;
  /* With "dummy": the generated weights' dtype, "f32", "f16" or "bf16"
   * (NULL: "bf16"), and their seed. */
  const char* dummy_dtype;
  uint64_t dummy_seed;
} kiln_model_options;

/* Fills `options` with the defaults, struct_size included. */
KILN_API void kiln_model_options_init(kiln_model_options* options, size_t struct_size);
static inline void kiln_model_options_default(kiln_model_options* options) {
  kiln_model_options_init(options, sizeof(*options));
}

/* Loads a model: a Hugging Face folder (config.json, *.safetensors,
 * tokenizer files, generation_config.json) or a .gguf file. Errors name the
 * path and the problem. On success *model is a handle to release with
 * kiln_model_destroy. */
KILN_API kiln_status kiln_model_load(const char* path, const kiln_model_options* options, kiln_model** model);

/* Releases the handle. Engines and sessions created from the model keep
 * what they use, so they may outlive it. Accepts NULL. */
KILN_API void kiln_model_destroy(kiln_model* model);

/* Ids the model knows (the width of a row of logits). */
KILN_API int32_t kiln_model_vocab_size(const kiln_model* model);

/* The longest sequence the model supports (max_position_embeddings). */
KILN_API int32_t kiln_model_max_context(const kiln_model* model);

/* The tokenizer's begin- and end-of-sequence ids; -1 when it has none or
 * the model has no tokenizer. */
KILN_API int32_t kiln_model_bos_id(const kiln_model* model);
KILN_API int32_t kiln_model_eos_id(const kiln_model* model);

/* 1 when the model has a tokenizer (generated weights may not), else 0. */
KILN_API int kiln_model_has_tokenizer(const kiln_model* model);

/* Tokenizes `text_len` bytes of `text` (any bytes; malformed UTF-8 is
 * encoded byte by byte). With `add_special`, BOS (and EOS) are added where
 * the tokenizer's configuration says so; with `parse_special`, special
 * tokens written in the text ("<|im_end|>") become their ids. Sets
 * *num_ids to the number of ids of the text and writes them to `ids`, which
 * holds `capacity`; when they do not fit, nothing is written and the call
 * fails with KILN_ERROR_OUT_OF_RANGE. With `ids` NULL (and capacity 0) the
 * call only reports the count. */
KILN_API kiln_status kiln_tokenize(const kiln_model* model, const char* text, size_t text_len,
                                   int add_special, int parse_special, int32_t* ids, size_t capacity,
                                   size_t* num_ids);

/* The text of `num_ids` ids as a NUL-terminated UTF-8 string in *text (free
 * it with kiln_string_free). With `skip_special`, special tokens are left
 * out. Ids outside the vocabulary are an error naming the first. */
KILN_API kiln_status kiln_detokenize(const kiln_model* model, const int32_t* ids, size_t num_ids,
                                     int skip_special, char** text);

typedef struct kiln_chat_message {
  const char* role;    /* "system", "user", "assistant", ... */
  const char* content; /* UTF-8 */
} kiln_chat_message;

/* Renders a conversation with the model's chat template, followed by the
 * prompt of the assistant's turn, into *prompt (free with
 * kiln_string_free). Generate from the result without adding special
 * tokens (kiln_request.add_special_tokens = 0): the template places them. A
 * model without a template is KILN_ERROR_INVALID_ARGUMENT. */
KILN_API kiln_status kiln_chat_render(const kiln_model* model, const kiln_chat_message* messages,
                                      size_t num_messages, char** prompt);

/* The same with the conversation as JSON text, an array of objects with
 * "role", "content" and any further keys the template reads. */
KILN_API kiln_status kiln_chat_render_json(const kiln_model* model, const char* messages_json, char** prompt);

/* ------------------------------------------------------------------------
 * Engines: continuous batching over a paged KV cache.
 * ---------------------------------------------------------------------- */

typedef struct kiln_engine kiln_engine;

typedef struct kiln_engine_options {
  size_t struct_size;
  int32_t threads;               /* compute threads; 0: one per physical core */
  int64_t kv_cache_memory_bytes; /* 0: see kv_cache_memory_fraction */
  /* A fraction of available memory in (0, 1]; with neither set, enough for
   * max_num_seqs full-length sequences within a fifth of available memory. */
  double kv_cache_memory_fraction;
  const char* kv_cache_dtype;     /* "f32" (NULL), "f16", "bf16" or "int8" (a scale per token and head) */
  int32_t block_size;             /* tokens per KV block (16) */
  int enable_prefix_caching;      /* reuse the KV cache of shared prompt prefixes (1) */
  int32_t max_num_seqs;           /* sequences batched together at most (64) */
  int32_t max_num_batched_tokens; /* tokens in one forward pass at most (512) */
  int32_t max_prefill_chunk;      /* prompt tokens of one sequence per pass; 0: no limit */
  int32_t max_model_len;          /* context length; 0: the model's */
  const char* precision;          /* activations: "fp32", "mixed" (NULL) or "bf16" */
  const char* backend;            /* "cpu" (NULL) */
  uint64_t seed;                  /* seeds requests that set none; 0: random */
  /* Speculative decoding: "none" (NULL), "ngram" (draft tokens looked up
   * in each sequence's prompt and output) or "draft" (a smaller model with
   * the same tokenizer runs ahead), verified in the pass that decodes its
   * next token; greedy requests only, their output unchanged. */
  const char* spec_method;
  int32_t spec_tokens;    /* draft tokens per sequence and pass at most (4) */
  int32_t spec_ngram_min; /* with "ngram": the shortest suffix matched (2) */
  int32_t spec_ngram_max; /* with "ngram": the longest suffix matched, tried first (4) */
  /* With "draft": a Hugging Face folder or .gguf file, or "self" (the
   * model's own weights, converted to draft_dtype when set). Its KV cache
   * comes out of the engine's KV cache memory. */
  const char* draft_model;
  const char* draft_dtype; /* with "self": "f32", "f16", "bf16", "q8_0", "q4_0"; NULL: as loaded */
} kiln_engine_options;

/* Fills `options` with the defaults, struct_size included. */
KILN_API void kiln_engine_options_init(kiln_engine_options* options, size_t struct_size);
static inline void kiln_engine_options_default(kiln_engine_options* options) {
  kiln_engine_options_init(options, sizeof(*options));
}

/* Compiles the model for this machine and allocates the KV cache. Errors
 * name the option at fault. */
KILN_API kiln_status kiln_engine_create(const kiln_model* model, const kiln_engine_options* options,
                                        kiln_engine** engine);

/* Releases the engine. REQUIRES: no call on it is in flight. Accepts NULL. */
KILN_API void kiln_engine_destroy(kiln_engine* engine);

/* The context length the engine was built for. */
KILN_API int32_t kiln_engine_max_model_len(const kiln_engine* engine);

typedef struct kiln_sampling_params {
  size_t struct_size;
  double temperature;        /* 0: greedy (argmax, lowest id on ties); default 1 */
  int32_t top_k;             /* 0: off */
  double top_p;              /* 1: off */
  double min_p;              /* 0: off */
  double repetition_penalty; /* 1: off */
  double presence_penalty;   /* 0: off */
  double frequency_penalty;  /* 0: off */
  int64_t seed;              /* -1: a fresh seed per request */
  int32_t max_tokens;        /* new tokens at most (16) */
  int32_t min_tokens;        /* new tokens before stop conditions apply (0) */
  const char* const* stop;   /* stop strings, not included in the output */
  size_t num_stop;
  const int32_t* stop_token_ids; /* further ids that end generation */
  size_t num_stop_token_ids;
  int ignore_eos;          /* keep generating past end-of-sequence ids (0) */
  int skip_special_tokens; /* leave special tokens out of the text (1) */
  int logprobs;            /* report each chosen token's log-probability (0) */
  /* Structured output, enforced token by token; at most one of the three.
   * A GBNF grammar (llama.cpp's format, start rule `root`), a JSON Schema
   * (2020-12, draft-07 spellings accepted), or any JSON object. NULL / 0:
   * none. An invalid or unsupported one fails the request, the message
   * starting with "grammar: " or "json_schema: ". */
  const char* grammar;
  const char* json_schema;
  int json_object;
} kiln_sampling_params;

/* Fills `params` with the defaults above, struct_size included. */
KILN_API void kiln_sampling_params_init(kiln_sampling_params* params, size_t struct_size);
static inline void kiln_sampling_params_default(kiln_sampling_params* params) {
  kiln_sampling_params_init(params, sizeof(*params));
}

/* Fills `params` as the model's generation_config.json intends, as `kiln
 * generate` does without sampling flags: greedy when it says do_sample
 * false, its temperature, top-k, top-p, min-p and repetition penalty
 * otherwise, and its max_new_tokens as max_tokens (16 when it has none). */
KILN_API void kiln_model_sampling_params_init(const kiln_model* model, kiln_sampling_params* params,
                                              size_t struct_size);
static inline void kiln_model_default_sampling_params(const kiln_model* model, kiln_sampling_params* params) {
  kiln_model_sampling_params_init(model, params, sizeof(*params));
}

typedef enum kiln_finish_reason {
  KILN_FINISH_NONE = 0,   /* still running */
  KILN_FINISH_STOP = 1,   /* an end-of-sequence id, a stop id or a stop string */
  KILN_FINISH_LENGTH = 2, /* max_tokens or the context length reached */
  KILN_FINISH_ABORT = 3,  /* aborted: kiln_engine_abort, or a callback returned non-zero */
  KILN_FINISH_ERROR = 4   /* the engine failed while running it */
} kiln_finish_reason;

/* "stop", "length", "abort", "error", or "" for KILN_FINISH_NONE. */
KILN_API const char* kiln_finish_reason_name(kiln_finish_reason reason);

/* What a streaming callback is told each time its request gets a token, and
 * once more when the request ends without one (an abort). */
typedef struct kiln_token_event {
  int64_t request_id;
  int32_t token; /* -1 when the event only reports the end */
  /* Text this token completes, NUL-terminated (often empty: a character may
   * span tokens, and text that could start a stop string is held back). The
   * texts of all events concatenate to the completion's text. */
  const char* text;
  size_t text_len;
  float logprob;                    /* when the request asked for logprobs */
  int finished;                     /* 1 on the request's last event */
  kiln_finish_reason finish_reason; /* when finished */
} kiln_token_event;

/* Called for each event of a request, on whichever thread is running the
 * engine at the time. Return 0 to continue, non-zero to abort the request
 * (no further tokens are produced; its completion says KILN_FINISH_ABORT).
 * Must not wait for a request of the same engine (kiln_generate,
 * kiln_engine_wait); kiln_engine_add_request and kiln_engine_abort are fine. */
typedef int (*kiln_token_callback)(const kiln_token_event* event, void* user_data);

typedef struct kiln_request {
  size_t struct_size;
  const char* prompt;        /* UTF-8 text, tokenized by the model's tokenizer */
  const int32_t* prompt_ids; /* used instead of `prompt` when num_prompt_ids > 0 */
  size_t num_prompt_ids;
  int add_special_tokens;             /* for text: add BOS where the tokenizer does (1) */
  const kiln_sampling_params* params; /* NULL: kiln_sampling_params_default */
  kiln_token_callback on_token;       /* NULL: no streaming */
  void* user_data;                    /* passed to on_token */
} kiln_request;

/* Fills `request` with the defaults, struct_size included. */
KILN_API void kiln_request_init(kiln_request* request, size_t struct_size);
static inline void kiln_request_default(kiln_request* request) {
  kiln_request_init(request, sizeof(*request));
}

/* A finished request. Owned by the caller: release with
 * kiln_completion_free. */
typedef struct kiln_completion {
  int64_t request_id;
  const char* text; /* NUL-terminated UTF-8, without stop strings */
  size_t text_len;
  const int32_t* token_ids; /* generated ids, a final end-of-sequence or stop id included */
  size_t num_tokens;
  const int32_t* prompt_token_ids;
  size_t num_prompt_tokens;
  const float* logprobs; /* per generated id when asked for, else NULL */
  kiln_finish_reason finish_reason;
  int32_t cached_tokens;        /* prompt tokens found in the prefix cache */
  double time_to_first_token;   /* seconds from arrival; -1 without tokens */
  double time_per_output_token; /* mean seconds between later tokens; 0 with fewer than two */
} kiln_completion;

/* Releases a completion. Accepts NULL. */
KILN_API void kiln_completion_free(kiln_completion* completion);

/* Queues a request and returns at once with its id in *request_id. The
 * request is checked here: an empty prompt, ids outside the vocabulary, bad
 * sampling parameters, or a prompt plus max_tokens beyond the context are
 * errors naming the problem. It runs when some thread waits for any request
 * of the engine; collect its result with kiln_engine_wait (until then the
 * result is kept). Thread-safe. */
KILN_API kiln_status kiln_engine_add_request(kiln_engine* engine, const kiln_request* request,
                                             int64_t* request_id);

/* Runs the engine (together with the requests of every other thread) until
 * the request has finished, then hands its result to *completion. An
 * aborted request is a success whose finish_reason is KILN_FINISH_ABORT;
 * a request the engine failed to run is an error. Each request is waited
 * for once; a second wait is KILN_ERROR_NOT_FOUND. Thread-safe. */
KILN_API kiln_status kiln_engine_wait(kiln_engine* engine, int64_t request_id, kiln_completion** completion);

/* Ends a request at the engine's next step, from any thread; the waiter
 * gets its output so far with KILN_FINISH_ABORT. Aborting a request that
 * has already finished does nothing; an id that is unknown or whose result
 * was already collected is KILN_ERROR_NOT_FOUND. Thread-safe. */
KILN_API kiln_status kiln_engine_abort(kiln_engine* engine, int64_t request_id);

/* Generates from a text prompt and blocks until done: kiln_engine_add_request
 * then kiln_engine_wait. `params` NULL: the defaults. */
KILN_API kiln_status kiln_generate(kiln_engine* engine, const char* prompt,
                                   const kiln_sampling_params* params, kiln_completion** completion);

/* The same, calling `on_token` with each piece of text as it is generated.
 * `completion` may be NULL when only the stream is wanted. */
KILN_API kiln_status kiln_generate_stream(kiln_engine* engine, const char* prompt,
                                          const kiln_sampling_params* params, kiln_token_callback on_token,
                                          void* user_data, kiln_completion** completion);

/* ------------------------------------------------------------------------
 * Sessions: forward passes for your own decoding loop.
 *
 * A session owns a KV cache for sequence ids 0 .. max_seqs-1 of up to
 * max_tokens_per_seq tokens each. kiln_session_run appends tokens to their
 * sequences' caches and writes logits straight into your buffer.
 * ---------------------------------------------------------------------- */

typedef struct kiln_session kiln_session;

typedef struct kiln_session_options {
  size_t struct_size;
  int32_t threads;            /* compute threads; 0: one per physical core */
  int32_t max_batch_tokens;   /* tokens per forward pass (512); a longer run is split */
  const char* precision;      /* "fp32", "mixed" (NULL) or "bf16" */
  const char* kv_cache_dtype; /* "f32" (NULL), "f16" or "bf16" */
  int32_t block_size;         /* tokens per KV block (16) */
  const char* backend;        /* "cpu" (NULL) */
} kiln_session_options;

/* Fills `options` with the defaults, struct_size included. */
KILN_API void kiln_session_options_init(kiln_session_options* options, size_t struct_size);
static inline void kiln_session_options_default(kiln_session_options* options) {
  kiln_session_options_init(options, sizeof(*options));
}

/* Compiles the model and allocates the KV cache for `max_seqs` sequences of
 * `max_tokens_per_seq` tokens (0: the model's context length). */
KILN_API kiln_status kiln_session_create(const kiln_model* model, int32_t max_seqs,
                                         int32_t max_tokens_per_seq, const kiln_session_options* options,
                                         kiln_session** session);

/* Releases the session. REQUIRES: no call on it is in flight. Accepts NULL. */
KILN_API void kiln_session_destroy(kiln_session* session);

typedef enum kiln_logits_mode {
  KILN_LOGITS_LAST = 0, /* one row per sequence in the call: its last token's */
  KILN_LOGITS_ALL = 1,  /* one row per token, in the order given */
  KILN_LOGITS_NONE = 2  /* none (filling the cache only) */
} kiln_logits_mode;

/* One forward pass over `num_tokens` tokens. Token i is `token_ids[i]` of
 * sequence `seq_ids[i]` at position `positions[i]`. Each sequence's tokens
 * must continue its cache: in the order given, their positions are its
 * current length, length + 1, ... (positions NULL: those positions; seq_ids
 * NULL: every token in sequence 0). Sequences may be interleaved.
 *
 * The logits (vocab_size floats per row, rows back to back) are written
 * straight into `logits`, which holds `logits_capacity` floats (NULL is
 * fine with KILN_LOGITS_NONE). Rows for KILN_LOGITS_LAST are ordered by
 * where each sequence's last token stands in the call: for sequences given
 * one after another, or round-robin, the order in which they first appear.
 * *num_rows (may be NULL) receives the number of rows. A run longer than
 * options.max_batch_tokens is split into several passes.
 *
 * Everything is checked before anything runs; an error (naming the token
 * index and the problem) changes no sequence. Sequence lengths grow only
 * when the call succeeds. */
KILN_API kiln_status kiln_session_run(kiln_session* session, const int32_t* token_ids,
                                      const int32_t* positions, const int32_t* seq_ids, size_t num_tokens,
                                      kiln_logits_mode mode, float* logits, size_t logits_capacity,
                                      size_t* num_rows);

/* Empties a sequence's cache (seq_id -1: every sequence's). */
KILN_API kiln_status kiln_session_reset(kiln_session* session, int32_t seq_id);

/* Shortens a sequence to its first `length` tokens, freeing the KV blocks
 * beyond them; the next run continues at position `length`. */
KILN_API kiln_status kiln_session_truncate(kiln_session* session, int32_t seq_id, int32_t length);

/* The number of tokens in a sequence's cache, in *length. */
KILN_API kiln_status kiln_session_seq_length(const kiln_session* session, int32_t seq_id, int32_t* length);

/* Width of a row of logits. */
KILN_API int32_t kiln_session_vocab_size(const kiln_session* session);

/* max_seqs and max_tokens_per_seq as created (the latter resolved). */
KILN_API int32_t kiln_session_max_seqs(const kiln_session* session);
KILN_API int32_t kiln_session_max_tokens_per_seq(const kiln_session* session);

/* ------------------------------------------------------------------------
 * ONNX models: a graph read from a .onnx file, compiled for this machine
 * and run on tensors in the caller's memory.
 *
 * Inputs are read from, and outputs written into, the caller's buffers
 * (row-major, native byte order): nothing is copied on the way in or out.
 * One compiled program is kept per distinct set of input shapes; the first
 * run (or kiln_onnx_model_output_shape) of new shapes compiles it. Calls on
 * one kiln_onnx_model are serialized by the model (one run at a time);
 * separate models run in parallel.
 *
 * Convolutions may run on oneDNN's OpenMP threads, which by default spin
 * ~0.3 s after each call and take the cores from kiln's own threads: start
 * the process with GOMP_SPINCOUNT=3000 (a short spin; or
 * OMP_WAIT_POLICY=PASSIVE on a shared machine). libgomp reads them only
 * when it is loaded; the kiln command and the Python package set the first
 * themselves.
 * ---------------------------------------------------------------------- */

typedef struct kiln_onnx_model kiln_onnx_model;

/* Element types of ONNX inputs and outputs. */
typedef enum kiln_dtype {
  KILN_DTYPE_F32 = 0,
  KILN_DTYPE_F16 = 1,
  KILN_DTYPE_BF16 = 2,
  KILN_DTYPE_F64 = 3,
  KILN_DTYPE_I64 = 4,
  KILN_DTYPE_I32 = 5,
  KILN_DTYPE_I16 = 6,
  KILN_DTYPE_I8 = 7,
  KILN_DTYPE_U8 = 8,
  KILN_DTYPE_BOOL = 9 /* one byte per element, 0 or 1 */
} kiln_dtype;

/* The dtype's name ("f32", "i64", "bool", ...), or "" for a value outside
 * the enum. */
KILN_API const char* kiln_dtype_name(kiln_dtype dtype);

/* Bytes of one element (bool: 1); 0 for a value outside the enum. */
KILN_API size_t kiln_dtype_size(kiln_dtype dtype);

/* A tensor in the caller's memory, row-major. `data` holds `size_bytes`
 * bytes, at least the product of the dims times kiln_dtype_size(dtype).
 * Passed to a run as an input it is only read; as an output, written. */
typedef struct kiln_tensor {
  /* The graph input or output it is; NULL: the one at its position in the
   * array. Each input and output must be given exactly once. */
  const char* name;
  kiln_dtype dtype;
  size_t rank;
  const int64_t* dims;
  void* data;
  size_t size_bytes;
} kiln_tensor;

/* Fixes the dimensions of one graph input at load (`--input-shape`): for an
 * input whose declared shape is symbolic or missing, or to replace it. */
typedef struct kiln_input_shape {
  const char* name;    /* the graph input */
  const int64_t* dims; /* `rank` sizes, each >= 0 */
  size_t rank;
} kiln_input_shape;

typedef struct kiln_onnx_options {
  size_t struct_size;
  const kiln_input_shape* input_shapes; /* NULL: the shapes the file declares */
  size_t num_input_shapes;
  /* Inputs whose values are fixed at compile time (`kiln run --fixed-input`):
   * a shape, scales or pads the graph takes as an input, which static shapes
   * need to know. Each names its input; the values are copied at load, and
   * every run must pass the same. */
  const kiln_tensor* fixed_inputs;
  size_t num_fixed_inputs;
  const char* backend;   /* "cpu" (NULL); what it cannot run falls back to the CPU */
  const char* precision; /* "fp32" (NULL), "mixed" or "bf16" */
  int32_t threads;       /* compute threads; 0: one per physical core */
  /* A .kiln artifact compiled by another kernel-layout version or for an ISA
   * this CPU lacks (stale) is refused with how to rebuild it; nonzero: it is
   * rebuilt in place from the .onnx file it records, then loaded
   * (`--recompile-if-stale`). */
  int32_t recompile_if_stale;
} kiln_onnx_options;

/* Fills `options` with the defaults, struct_size included. */
KILN_API void kiln_onnx_options_init(kiln_onnx_options* options, size_t struct_size);
static inline void kiln_onnx_options_default(kiln_onnx_options* options) {
  kiln_onnx_options_init(options, sizeof(*options));
}

/* Reads an ONNX model (external-data initializers next to it are read too)
 * and, when every input's shape is known, compiles it, so that a graph kiln
 * cannot run fails here. Errors name the file and the node or tensor at
 * fault. On success *model is a handle to release with
 * kiln_onnx_model_destroy. */
KILN_API kiln_status kiln_onnx_model_load(const char* path, const kiln_onnx_options* options,
                                          kiln_onnx_model** model);

/* Releases the model. REQUIRES: no call on it is in flight. Accepts NULL. */
KILN_API void kiln_onnx_model_destroy(kiln_onnx_model* model);

/* The number of graph inputs and outputs (0 for NULL). */
KILN_API size_t kiln_onnx_model_num_inputs(const kiln_onnx_model* model);
KILN_API size_t kiln_onnx_model_num_outputs(const kiln_onnx_model* model);

/* A graph input or output as the model declares it. `name` and `dims` point
 * into the model and stay valid while it lives. */
typedef struct kiln_tensor_info {
  const char* name;
  kiln_dtype dtype;
  size_t rank;
  const int64_t* dims; /* `rank` sizes; -1 for one that the inputs of a run bind */
} kiln_tensor_info;

/* Input or output `index` (in the graph's order); an index past the end is
 * KILN_ERROR_OUT_OF_RANGE. */
KILN_API kiln_status kiln_onnx_model_input_info(const kiln_onnx_model* model, size_t index,
                                                kiln_tensor_info* info);
KILN_API kiln_status kiln_onnx_model_output_info(const kiln_onnx_model* model, size_t index,
                                                 kiln_tensor_info* info);

/* The shape output `output` has when the model runs on inputs of these
 * shapes (their data is not read and may be NULL), compiling the program
 * of those shapes if it is new: size output buffers with it. Writes the
 * output's rank to *rank and its dims to `dims`, which holds `capacity`
 * values; when they do not fit, nothing is written and the call fails with
 * KILN_ERROR_OUT_OF_RANGE (dims NULL and capacity 0: only the rank). The
 * output's dtype is kiln_onnx_model_output_info's. */
KILN_API kiln_status kiln_onnx_model_output_shape(kiln_onnx_model* model, const kiln_tensor* inputs,
                                                  size_t num_inputs, size_t output, int64_t* dims,
                                                  size_t capacity, size_t* rank);

/* Runs the model: reads `inputs` (one per graph input) and writes every
 * graph output into `outputs` (one per graph output, each of the dtype and
 * shape kiln_onnx_model_output_shape gives), straight from and into the
 * caller's buffers. Everything is checked before anything runs: a wrong
 * count, name, dtype or shape, a NULL buffer, one too small, or an output
 * buffer overlapping an input's or another output's is an error naming the
 * tensor, and leaves every output untouched. Input values a graph cannot
 * take (an index outside its axis) are an error of the run naming the node;
 * the outputs may then be partly written. */
KILN_API kiln_status kiln_onnx_model_run(kiln_onnx_model* model, const kiln_tensor* inputs, size_t num_inputs,
                                         kiln_tensor* outputs, size_t num_outputs);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KILN_KILN_H_ */
