/* Backend plugins that kiln must refuse, one defect each (chosen by a
 * compile definition), around an otherwise valid backend "faulty" that
 * runs f32 adds on the host. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kiln/kiln_backend.h>

static int32_t fail(char* err, size_t size, const char* msg) {
  if (err != NULL && size > 0) snprintf(err, size, "%s", msg);
  return KILN_BACKEND_UNSUPPORTED;
}

static int token;
static int destroyed;

static int32_t mem_alloc(void* s, uint64_t bytes, void** out, char* e, size_t n) {
  (void)s;
  *out = aligned_alloc(64, (size_t)((bytes + 63) / 64 * 64 + 64));
  return *out != NULL ? KILN_BACKEND_OK : fail(e, n, "out of memory");
}
static void mem_free(void* s, void* p, uint64_t b) {
  (void)s;
  (void)b;
  free(p);
}
static int32_t copy(void* s, void* st, int32_t d, const kiln_copy* c, char* e, size_t n) {
  uint64_t r;
  (void)s;
  (void)st;
  (void)d;
  (void)e;
  (void)n;
  for (r = 0; r < c->rows; ++r) {
    memcpy((char*)c->dst + r * c->dst_pitch, (const char*)c->src + r * c->src_pitch, c->row_bytes);
  }
  return KILN_BACKEND_OK;
}
static int32_t make(void* s, void** out, char* e, size_t n) {
  (void)s;
  (void)e;
  (void)n;
  *out = &token;
  return KILN_BACKEND_OK;
}
static void drop(void* s, void* h) {
  (void)s;
  (void)h;
}
static int32_t ok1(void* s, void* h, char* e, size_t n) {
  (void)s;
  (void)h;
  (void)e;
  (void)n;
  return KILN_BACKEND_OK;
}
static int32_t ok2(void* s, void* a, void* b, char* e, size_t n) {
  (void)b;
  return ok1(s, a, e, n);
}
static int32_t pack(void* s, const kiln_weight_desc* w, const kiln_pack_request* r, kiln_packed_weight* o, char* e,
                    size_t n) {
  (void)s;
  (void)w;
  (void)r;
  (void)o;
  return fail(e, n, "no weights");
}
static uint64_t scratch(void* s, const kiln_node_desc* d) {
  (void)s;
  (void)d;
  return 0;
}
static int32_t bind(void* s, const kiln_node_desc* d, void** k, char* e, size_t n) {
  (void)s;
  (void)d;
  (void)k;
  return fail(e, n, "this plugin only tests loading");
}
static int32_t enqueue(void* s, void* k, void* st, const kiln_run_args* a, char* e, size_t n) {
  (void)k;
  (void)a;
  return ok1(s, st, e, n);
}
static void destroy(void* s) {
  (void)s;
  ++destroyed;
}

static const char* const kF32[] = {"f32"};

#ifdef FAULT_UNKNOWN_OP
#define SUPPORTED_OP "frobnicate"
#else
#define SUPPORTED_OP "add"
#endif
static const kiln_support_entry kSupport[] = {
    {sizeof(kiln_support_entry), KILN_BACKEND_ABI_VERSION, SUPPORTED_OP, kF32, 1, NULL, 0, NULL, "rows", 0, 0,
     1, NULL, 0, NULL},
};

#ifdef FAULT_NO_ENTRY
#define ENTRY kiln_backend_plugin_entry_misspelled
#else
#define ENTRY kiln_backend_plugin_entry
#endif

KILN_BACKEND_EXPORT int32_t ENTRY(const kiln_plugin_host* host, char* err, size_t err_size) {
  kiln_backend b;
  memset(&b, 0, sizeof b);
  b.struct_size = sizeof b;
  b.abi_version = KILN_BACKEND_ABI_VERSION;
  b.name = "faulty";
  b.description = "a plugin kiln must refuse";
  b.support = kSupport;
  b.num_support = 1;
  b.alloc = mem_alloc;
  b.free = mem_free;
  b.enqueue_copy = copy;
  b.stream_create = make;
  b.stream_destroy = drop;
  b.stream_synchronize = ok1;
  b.event_create = make;
  b.event_destroy = drop;
  b.event_record = ok2;
  b.stream_wait_event = ok2;
  b.event_synchronize = ok1;
  b.pack_weight = pack;
  b.release_weight = drop;
  b.scratch_bytes = scratch;
  b.bind = bind;
  b.release_kernel = drop;
  b.enqueue = enqueue;
  b.destroy = destroy;
#ifdef FAULT_ABI_VERSION
  b.abi_version = KILN_BACKEND_ABI_VERSION + 1;
#endif
#ifdef FAULT_NAME_CLASH
  b.name = "cpu";
#endif
#ifdef FAULT_STRUCT_SIZE
  b.struct_size = 16;
#endif
#ifdef FAULT_MISSING_FUNCTION
  b.bind = NULL;
#endif
  return host->register_backend(host->ctx, &b, err, err_size);
}
