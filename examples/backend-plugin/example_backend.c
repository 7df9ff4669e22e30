/* An example kiln backend plugin, in C against include/kiln/kiln_backend.h
 * alone: the backend "example" runs the elementwise add of f32 rows (the
 * residual connections of a decoder), and kiln places everything else on
 * the CPU, with copies between the two memories.
 *
 * Its "device" is the host: memory from aligned_alloc, and a stream that
 * runs each kernel as it is enqueued (so events are complete when
 * recorded). A real device's plugin keeps the same shape and puts its
 * runtime's calls (allocation, asynchronous copies, kernel launches,
 * stream and event objects) behind the same functions. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kiln/kiln_backend.h>

static int32_t fail(char* err, size_t size, int32_t code, const char* msg) {
  if (err != NULL && size > 0) {
    snprintf(err, size, "%s", msg);
  }
  return code;
}

/* ---- the support list */

static const char* const kF32[] = {"f32"};

static const kiln_support_entry kSupport[] = {
    {sizeof(kiln_support_entry), KILN_BACKEND_ABI_VERSION, "add", kF32, 1, NULL, 0, NULL, "rows", 0, 0, 1, NULL, 0,
     "f32 rows, elementwise"},
};

/* ---- memory: the host's, 64-byte aligned */

static int32_t mem_alloc(void* self, uint64_t bytes, void** out, char* err, size_t err_size) {
  (void)self;
  size_t n = (size_t)((bytes + 63) / 64 * 64);
  void* p = aligned_alloc(64, n == 0 ? 64 : n);
  if (p == NULL) return fail(err, err_size, KILN_BACKEND_OUT_OF_MEMORY, "example: out of memory");
  memset(p, 0, n == 0 ? 64 : n);
  *out = p;
  return KILN_BACKEND_OK;
}

static void mem_free(void* self, void* p, uint64_t bytes) {
  (void)self;
  (void)bytes;
  free(p);
}

static int32_t enqueue_copy(void* self, void* stream, int32_t direction, const kiln_copy* c, char* err,
                            size_t err_size) {
  uint64_t r;
  (void)self;
  (void)stream;
  (void)direction; /* one address space: every direction is a memcpy */
  if (c == NULL) return fail(err, err_size, KILN_BACKEND_INVALID_ARGUMENT, "example: no copy");
  for (r = 0; r < c->rows; ++r) {
    memcpy((char*)c->dst + r * c->dst_pitch, (const char*)c->src + r * c->src_pitch, (size_t)c->row_bytes);
  }
  return KILN_BACKEND_OK;
}

/* ---- streams and events: work runs when enqueued */

static int stream_token;
static int event_token;

static int32_t stream_create(void* self, void** out, char* err, size_t err_size) {
  (void)self;
  (void)err;
  (void)err_size;
  *out = &stream_token;
  return KILN_BACKEND_OK;
}

static void stream_destroy(void* self, void* stream) {
  (void)self;
  (void)stream;
}

static int32_t nothing_to_wait_for(void* self, void* a, char* err, size_t err_size) {
  (void)self;
  (void)a;
  (void)err;
  (void)err_size;
  return KILN_BACKEND_OK;
}

static int32_t event_create(void* self, void** out, char* err, size_t err_size) {
  (void)self;
  (void)err;
  (void)err_size;
  *out = &event_token;
  return KILN_BACKEND_OK;
}

static void event_destroy(void* self, void* event) {
  (void)self;
  (void)event;
}

static int32_t event_record(void* self, void* event, void* stream, char* err, size_t err_size) {
  (void)stream;
  return nothing_to_wait_for(self, event, err, err_size);
}

static int32_t stream_wait_event(void* self, void* stream, void* event, char* err, size_t err_size) {
  (void)event;
  return nothing_to_wait_for(self, stream, err, err_size);
}

/* ---- weights: "add" has none */

static int32_t pack_weight(void* self, const kiln_weight_desc* w, const kiln_pack_request* request,
                           kiln_packed_weight* out, char* err, size_t err_size) {
  (void)self;
  (void)w;
  (void)request;
  (void)out;
  return fail(err, err_size, KILN_BACKEND_UNSUPPORTED, "example: no op of this backend takes a weight matrix");
}

static void release_weight(void* self, void* handle) {
  (void)self;
  (void)handle;
}

/* ---- the add kernel */

typedef struct add_kernel {
  const float* a;
  const float* b;
  float* y;
  int64_t a_stride, b_stride, y_stride; /* elements between rows */
  int64_t cols;
  int32_t row_space;
} add_kernel;

static uint64_t scratch_bytes(void* self, const kiln_node_desc* node) {
  (void)self;
  (void)node;
  return 0;
}

static int is_f32_rows(const kiln_tensor* t) {
  return t->rank == 2 && strcmp(t->dtype, "f32") == 0 && (t->layout == NULL || strcmp(t->layout, "rows") == 0);
}

static int32_t bind(void* self, const kiln_node_desc* node, void** kernel, char* err, size_t err_size) {
  add_kernel* k;
  (void)self;
  if (strcmp(node->op, "add") != 0) return fail(err, err_size, KILN_BACKEND_UNSUPPORTED, "example: only add");
  if (node->num_inputs != 2 || node->num_outputs != 1 || !is_f32_rows(&node->inputs[0]) ||
      !is_f32_rows(&node->inputs[1]) || !is_f32_rows(&node->outputs[0]) || node->outputs[0].is_graph_output) {
    return fail(err, err_size, KILN_BACKEND_UNSUPPORTED, "example: add takes two f32 row tensors into a third");
  }
  k = (add_kernel*)malloc(sizeof(add_kernel));
  if (k == NULL) return fail(err, err_size, KILN_BACKEND_OUT_OF_MEMORY, "example: out of memory");
  k->a = (const float*)node->inputs[0].data;
  k->b = (const float*)node->inputs[1].data;
  k->y = (float*)node->outputs[0].data;
  k->a_stride = node->inputs[0].strides[0];
  k->b_stride = node->inputs[1].strides[0];
  k->y_stride = node->outputs[0].strides[0];
  k->cols = node->outputs[0].shape[1];
  k->row_space = node->outputs[0].row_space;
  *kernel = k;
  return KILN_BACKEND_OK;
}

static void release_kernel(void* self, void* kernel) {
  (void)self;
  free(kernel);
}

static int64_t rows_of(int32_t row_space, const kiln_run_args* a) {
  switch (row_space) {
    case KILN_ROWS_TOKENS: return a->num_tokens;
    case KILN_ROWS_OUTPUT: return a->num_output_rows;
    case KILN_ROWS_CONTEXT: return a->context_rows;
    case KILN_ROWS_SCORES: return a->score_rows;
    default: return 0;
  }
}

static int32_t enqueue(void* self, void* kernel, void* stream, const kiln_run_args* args, char* err,
                       size_t err_size) {
  const add_kernel* k = (const add_kernel*)kernel;
  int64_t rows, r, c;
  (void)self;
  (void)stream;
  if (args == NULL) return fail(err, err_size, KILN_BACKEND_INVALID_ARGUMENT, "example: no run arguments");
  rows = rows_of(k->row_space, args);
  for (r = 0; r < rows; ++r) {
    for (c = 0; c < k->cols; ++c) k->y[r * k->y_stride + c] = k->a[r * k->a_stride + c] + k->b[r * k->b_stride + c];
  }
  return KILN_BACKEND_OK;
}

static void destroy(void* self) { (void)self; }

KILN_BACKEND_EXPORT int32_t kiln_backend_plugin_entry(const kiln_plugin_host* host, char* err, size_t err_size) {
  kiln_backend b;
  if (host == NULL || host->struct_size < sizeof(kiln_plugin_host)) {
    return fail(err, err_size, KILN_BACKEND_INVALID_ARGUMENT, "example: kiln_plugin_host missing or too small");
  }
  if (host->abi_version != KILN_BACKEND_ABI_VERSION) {
    return fail(err, err_size, KILN_BACKEND_UNSUPPORTED, "example: built for another kiln backend ABI version");
  }
  memset(&b, 0, sizeof b);
  b.struct_size = sizeof b;
  b.abi_version = KILN_BACKEND_ABI_VERSION;
  b.name = "example";
  b.description = "an example plugin: f32 add on its own stream (examples/backend-plugin)";
  b.support = kSupport;
  b.num_support = sizeof kSupport / sizeof kSupport[0];
  b.self = NULL;
  b.alloc = mem_alloc;
  b.free = mem_free;
  b.enqueue_copy = enqueue_copy;
  b.stream_create = stream_create;
  b.stream_destroy = stream_destroy;
  b.stream_synchronize = nothing_to_wait_for;
  b.event_create = event_create;
  b.event_destroy = event_destroy;
  b.event_record = event_record;
  b.stream_wait_event = stream_wait_event;
  b.event_synchronize = nothing_to_wait_for;
  b.pack_weight = pack_weight;
  b.release_weight = release_weight;
  b.scratch_bytes = scratch_bytes;
  b.bind = bind;
  b.release_kernel = release_kernel;
  b.enqueue = enqueue;
  b.destroy = destroy;
  return host->register_backend(host->ctx, &b, err, err_size);
}
