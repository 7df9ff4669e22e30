/* kiln's backend plugin ABI: how a backend in a shared library of its own
 * (a vendor's device, a test stand-in) joins kiln without being compiled
 * into it.
 *
 * A plugin exports exactly one symbol, kiln_backend_plugin_entry. kiln
 * dlopen()s the library, calls the entry point once with a kiln_plugin_host,
 * and the plugin registers one or more backends through
 * host->register_backend. Each backend is a table of C functions: its
 * support list, its memory (allocate, free, copies), its streams and events,
 * weight packing (with optional serialization, for compiled artifacts) and
 * kernels (bind a node described in C, enqueue it per forward pass).
 *
 * C only: no C++ types or exceptions cross this boundary; a plugin written
 * in C++ catches everything inside its functions.
 *
 * Versions and sizes. Every struct that is passed on its own starts with
 * `struct_size` (sizeof the struct as the writer compiled it) and
 * `abi_version` (KILN_BACKEND_ABI_VERSION as the writer saw it). kiln
 * refuses a plugin whose abi_version differs from the one it speaks, and a
 * struct whose struct_size is smaller than the version's first layout; it
 * never reads past struct_size, so fields added at the end of a struct in a
 * later minor revision are optional. A plugin reads a kiln-provided struct
 * only up to the struct_size kiln wrote. An array of such structs is
 * strided by its first element's struct_size. The small element structs of
 * lists (kiln_attr, kiln_weight_ref, kiln_kv_pools) have no header: their
 * layout is fixed for an ABI version, and the struct holding the list
 * carries the size and version.
 *
 * Names, not numbers. Ops ("linear", "rms_norm", ...; `kiln backends` lists
 * kiln's), dtypes ("f32", "bf16", "q4_0", ...), layouts ("rows" for kiln's
 * row-major activations; a weight layout is the plugin's own name) and
 * attributes are strings, so ops that later versions add (N-dimensional
 * ONNX ops, MoE expert ops) need no new numbers, and attributes travel as
 * generic key/value lists.
 *
 * Errors. A function that can fail returns KILN_BACKEND_OK (0) or another
 * kiln_backend_status, and on failure writes a NUL-terminated message into
 * `err` (kiln's buffer of `err_size` bytes; truncated as needed).
 *
 * Threads. kiln calls a backend's functions from one thread at a time per
 * stream; the work a stream runs may run on the plugin's own threads.
 */
#ifndef KILN_KILN_BACKEND_H_
#define KILN_KILN_BACKEND_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define KILN_BACKEND_EXPORT __attribute__((visibility("default")))
#else
#define KILN_BACKEND_EXPORT
#endif

/* The ABI this header describes. A plugin built against another major
 * version is refused. */
#define KILN_BACKEND_ABI_VERSION 1

/* The name of the one symbol a plugin exports. */
#define KILN_BACKEND_ENTRY_SYMBOL "kiln_backend_plugin_entry"

/* Largest tensor rank this version describes. */
#define KILN_BACKEND_MAX_RANK 8

typedef enum kiln_backend_status {
  KILN_BACKEND_OK = 0,
  KILN_BACKEND_INVALID_ARGUMENT = 1,
  KILN_BACKEND_UNSUPPORTED = 2,
  KILN_BACKEND_OUT_OF_MEMORY = 3,
  KILN_BACKEND_INTERNAL = 4
} kiln_backend_status;

/* ---------------------------------------------------------------- values */

/* A generic attribute: a node's parameters ("eps", "n_heads", ...), a
 * support entry's extra limits. Pointers are owned by whoever filled the
 * list and valid for the call (or, in a support list, for the plugin's
 * life). */
typedef enum kiln_attr_kind {
  KILN_ATTR_INT = 0,
  KILN_ATTR_FLOAT = 1,
  KILN_ATTR_STRING = 2,
  KILN_ATTR_INTS = 3,
  KILN_ATTR_FLOATS = 4
} kiln_attr_kind;

typedef struct kiln_attr {
  const char* key;
  int32_t kind; /* kiln_attr_kind */
  int64_t i;
  double f;
  const char* s;
  const int64_t* ints;
  uint32_t num_ints;
  const double* floats;
  uint32_t num_floats;
} kiln_attr;

/* Which of a pass's row counts a tensor's first dimension takes at run
 * time (kiln's activations are rows of a fixed width; the bound shape is
 * the compiled capacity). */
typedef enum kiln_row_space {
  KILN_ROWS_TOKENS = 0,
  KILN_ROWS_OUTPUT = 1,  /* the rows whose logits are returned */
  KILN_ROWS_CONTEXT = 2, /* decomposed attention: gathered keys/values */
  KILN_ROWS_SCORES = 3,  /* decomposed attention: scores */
  KILN_ROWS_NONE = 4,    /* a marker (ordering only, no memory) */
  KILN_ROWS_FIXED = 5    /* an N-dimensional tensor of static shape: one row of all its elements */
} kiln_row_space;

/* A tensor as a kernel sees it. */
typedef struct kiln_tensor {
  uint32_t struct_size;
  uint32_t abi_version;
  const char* dtype;  /* "f32", "bf16", ... */
  const char* layout; /* "rows": dims [rows, cols], row-major, strides below */
  int32_t rank;
  int64_t shape[KILN_BACKEND_MAX_RANK];   /* the capacity; shape[0] varies per pass (row_space) */
  int64_t strides[KILN_BACKEND_MAX_RANK]; /* in elements */
  int32_t row_space;                      /* kiln_row_space */
  /* Memory: in this backend's domain (a device pointer from its alloc), or
   * NULL for the graph's output (the host logits of each pass, given in
   * kiln_run_args) and markers. Owned by kiln; valid for the kernel's
   * life. */
  void* data;
  int32_t is_graph_output;
  /* N-dimensional tensor ops (row_space KILN_ROWS_FIXED, layout "dense":
   * row-major over `shape`, rank up to KILN_BACKEND_MAX_RANK): a
   * compile-time constant (a convolution's weights) is host memory owned by
   * kiln, valid for the kernel's life; copy what the kernel needs at bind,
   * as for weights. An omitted optional input has rank -1 and no data. */
  int32_t is_constant;
} kiln_tensor;

/* A weight as stored in the model: host memory owned by kiln, valid for
 * as long as any kernel or packed weight made from it. */
typedef struct kiln_weight_desc {
  uint32_t struct_size;
  uint32_t abi_version;
  const char* name;
  const char* dtype;
  int32_t rank;
  int64_t shape[KILN_BACKEND_MAX_RANK]; /* [out, in] for a linear's matrix */
  const void* data;
  uint64_t nbytes;
} kiln_weight_desc;

/* A weight packed into a backend's layout. `handle` is the plugin's (freed
 * by release_weight); `layout` is a string the plugin owns for the
 * handle's life. */
typedef struct kiln_packed_weight {
  uint32_t struct_size;
  uint32_t abi_version;
  void* handle;
  const char* layout;
  uint64_t bytes;
} kiln_packed_weight;

/* What kiln asks of one packing, owned by kiln and valid during the call.
 * With int8 set kiln asks for W8A8: int8 weights per output channel and
 * int8 input activations, quantized per token (activation_clip 0) or with
 * scale activation_clip / 127. A backend without such kernels, or one that
 * keeps this weight as it is, ignores it and packs the weight as usual. */
typedef struct kiln_pack_request {
  uint32_t struct_size;
  uint32_t abi_version;
  const char* op;        /* the op of the first node that reads the weight */
  const char* node_name; /* that node's name */
  int32_t int8;
  float activation_clip;
} kiln_pack_request;

/* A node's weight at bind time: the weight, and the handle packed for it
 * (matrices of "linear"-like ops; NULL for vectors such as norm weights,
 * which kiln hands over in f32). Either may be NULL for an absent weight. */
typedef struct kiln_weight_ref {
  const kiln_weight_desc* weight;
  void* packed; /* a handle from this backend's pack_weight */
} kiln_weight_ref;

/* The paged KV cache's geometry (the pools arrive per pass). */
typedef struct kiln_kv_layout {
  uint32_t struct_size;
  uint32_t abi_version;
  int64_t num_layers;
  int64_t num_blocks;
  int64_t block_size; /* tokens per block */
  int64_t num_kv_heads;
  int64_t head_dim;
  const char* dtype;
} kiln_kv_layout;

/* One node of the compiled graph, to bind into a kernel. Everything is
 * owned by kiln and valid only during bind (copy what the kernel keeps),
 * except what tensors' `data`, weights' `data` and packed handles point
 * at, which outlive the kernel. */
typedef struct kiln_node_desc {
  uint32_t struct_size;
  uint32_t abi_version;
  const char* op;   /* "linear", "rms_norm", ... */
  const char* name; /* the node's name, for messages */
  const kiln_attr* attrs;
  uint32_t num_attrs;
  const kiln_tensor* inputs;
  uint32_t num_inputs;
  const kiln_tensor* outputs;
  uint32_t num_outputs;
  const kiln_weight_ref* weights;
  uint32_t num_weights;
  void* scratch; /* scratch_bytes() of this backend's memory, or NULL */
  uint64_t scratch_bytes;
  kiln_kv_layout kv;
  int64_t max_positions; /* positions are below this */
  /* The compiled capacities of the row spaces, by kiln_row_space. */
  int64_t capacity[4];
} kiln_node_desc;

/* One layer's KV pools, in the memory of the backend that runs attention
 * ([num_blocks][block_size][num_kv_heads][head_dim]; scales NULL but for
 * an int8 cache). */
typedef struct kiln_kv_pools {
  void* keys;
  void* values;
  float* key_scales;
  float* value_scales;
} kiln_kv_pools;

/* The runtime arguments of one forward pass, given to each enqueue. The
 * struct itself is valid during the enqueue call (copy it, as a kernel
 * launch copies its arguments); the arrays it points to are host memory
 * owned by kiln, valid until the pass's final synchronization (kiln
 * synchronizes every stream it used before the pass returns). */
typedef struct kiln_run_args {
  uint32_t struct_size;
  uint32_t abi_version;
  int32_t num_tokens;
  const int32_t* token_ids; /* [num_tokens] */
  const int32_t* positions; /* [num_tokens] */
  const int32_t* token_seq; /* [num_tokens] */
  int32_t num_seqs;
  const int32_t* query_start;          /* [num_seqs + 1] */
  const int32_t* seq_lens;             /* [num_seqs] */
  const int32_t* const* block_tables;  /* [num_seqs][block_table_lens[s]] */
  const int32_t* block_table_lens;     /* [num_seqs] */
  const int32_t* slots;                /* [num_tokens]: KV slot of each token */
  int32_t num_output_rows;
  const int32_t* output_rows;    /* [num_output_rows] */
  const int64_t* context_offsets; /* [num_seqs + 1] */
  const int64_t* score_offsets;   /* [num_seqs + 1] */
  int64_t context_rows;
  int64_t score_rows;
  float* logits; /* host memory of the graph's output */
  int64_t logits_stride;
  const kiln_kv_pools* kv; /* [num_kv_layers], or NULL without a cache */
  int64_t num_kv_layers;
} kiln_run_args;

/* A 2-D copy: `rows` rows of `row_bytes`, each `*_pitch` bytes apart. */
typedef enum kiln_copy_direction {
  KILN_COPY_HOST_TO_DEVICE = 0,
  KILN_COPY_DEVICE_TO_HOST = 1,
  KILN_COPY_DEVICE_TO_DEVICE = 2
} kiln_copy_direction;

typedef struct kiln_copy {
  uint32_t struct_size;
  uint32_t abi_version;
  void* dst;
  uint64_t dst_pitch;
  const void* src;
  uint64_t src_pitch;
  uint64_t row_bytes;
  uint64_t rows;
} kiln_copy;

/* ------------------------------------------------------------ support */

/* One line of a support list: an op the backend runs, with which dtypes,
 * in which layouts, within which limits. */
typedef struct kiln_support_entry {
  uint32_t struct_size;
  uint32_t abi_version;
  const char* op;
  const char* const* activation_dtypes;
  uint32_t num_activation_dtypes;
  const char* const* weight_dtypes; /* for ops with weight matrices */
  uint32_t num_weight_dtypes;
  const char* weight_layout;     /* the layout weights are packed into, or NULL */
  const char* activation_layout; /* NULL or "rows"; "dense" for N-d tensor ops, whose `op` is the ONNX op name ("Conv"),
                                  * or "nhwc" for one whose kernel takes its 4-d non-constant inputs and writes its 4-d
                                  * outputs channels-last (kiln reorders at the borders; those tensors then come with
                                  * layout "nhwc": shape N,C,H,W, strides of NHWC memory) */
  int64_t max_cols;              /* largest output width (0: no limit) */
  int64_t max_head_dim;          /* attention and RoPE (0: no limit) */
  int32_t sliding_window;        /* attention: 1 when a window is supported */
  const kiln_attr* limits;       /* more limits, for ops later versions add */
  uint32_t num_limits;
  const char* note;
} kiln_support_entry;

/* ------------------------------------------------------------ backend */

/* A backend: `self` is the plugin's state, passed back to every function.
 * Every pointer in this struct (strings, the support list) is owned by the
 * plugin and stays valid until destroy(self). Handles (streams, events,
 * packed weights, kernels, memory) are the plugin's; kiln releases each
 * through the matching function. */
typedef struct kiln_backend {
  uint32_t struct_size;
  uint32_t abi_version; /* KILN_BACKEND_ABI_VERSION */
  const char* name;
  const char* description;
  const kiln_support_entry* support;
  uint32_t num_support;
  void* self;

  /* Memory. alloc returns 64-byte aligned memory of the backend's domain. */
  int32_t (*alloc)(void* self, uint64_t bytes, void** out, char* err, size_t err_size);
  void (*free)(void* self, void* p, uint64_t bytes);
  /* Enqueues a copy on `stream`; a host destination is the host's to read
   * only after an event recorded after it, or the stream, synchronizes. */
  int32_t (*enqueue_copy)(void* self, void* stream, int32_t direction, const kiln_copy* copy, char* err,
                          size_t err_size);
  /* Optional (NULL): the contents of [p, p + bytes) are dead (a pass ended). */
  void (*discard)(void* self, void* p, uint64_t bytes);

  /* Streams and events. kiln creates one stream per backend per process. */
  int32_t (*stream_create)(void* self, void** out, char* err, size_t err_size);
  void (*stream_destroy)(void* self, void* stream);
  int32_t (*stream_synchronize)(void* self, void* stream, char* err, size_t err_size);
  int32_t (*event_create)(void* self, void** out, char* err, size_t err_size);
  void (*event_destroy)(void* self, void* event);
  /* Marks the point after the work enqueued on `stream` so far. */
  int32_t (*event_record)(void* self, void* event, void* stream, char* err, size_t err_size);
  /* Work enqueued on `stream` after this waits for `event` (of this backend). */
  int32_t (*stream_wait_event)(void* self, void* stream, void* event, char* err, size_t err_size);
  /* Blocks the calling host thread until `event` has completed. */
  int32_t (*event_synchronize)(void* self, void* event, char* err, size_t err_size);

  /* Weights. pack_weight fills `out` (handle, layout, bytes) as
   * `request` asks. */
  int32_t (*pack_weight)(void* self, const kiln_weight_desc* weight, const kiln_pack_request* request,
                         kiln_packed_weight* out, char* err, size_t err_size);
  void (*release_weight)(void* self, void* handle);
  /* Optional (both NULL or both set): a packed weight as bytes, for a
   * compiled artifact. serialize with buf NULL stores the size needed in
   * *size; deserialize rebuilds the handle from those bytes and the weight
   * they were packed from. */
  int32_t (*serialize_weight)(void* self, void* handle, void* buf, uint64_t* size, char* err, size_t err_size);
  int32_t (*deserialize_weight)(void* self, const kiln_weight_desc* weight, const void* buf, uint64_t size,
                                kiln_packed_weight* out, char* err, size_t err_size);

  /* Kernels. scratch_bytes reads a node whose tensor data is NULL. bind
   * returns a kernel handle kiln releases with release_kernel. */
  uint64_t (*scratch_bytes)(void* self, const kiln_node_desc* node);
  int32_t (*bind)(void* self, const kiln_node_desc* node, void** kernel, char* err, size_t err_size);
  void (*release_kernel)(void* self, void* kernel);
  /* Enqueues one run of `kernel` on `stream` with this pass's arguments. */
  int32_t (*enqueue)(void* self, void* kernel, void* stream, const kiln_run_args* args, char* err,
                     size_t err_size);

  /* Optional (NULL): sets a backend-specific option ("kernel_delay_us" of
   * a test stand-in, a vendor's tuning knob). Both strings are kiln's,
   * valid during the call. */
  int32_t (*set_option)(void* self, const char* key, const char* value, char* err, size_t err_size);

  /* Releases `self`, after every handle above has been released. */
  void (*destroy)(void* self);
} kiln_backend;

/* What kiln gives the entry point. Owned by kiln; valid during the call. */
typedef struct kiln_plugin_host {
  uint32_t struct_size;
  uint32_t abi_version; /* the version kiln speaks */
  void* ctx;
  /* Registers a backend. kiln copies the struct; the pointers in it must
   * stay valid until kiln calls backend->destroy. Fails (and the plugin
   * must then destroy the backend itself) when kiln refuses it. */
  int32_t (*register_backend)(void* ctx, const kiln_backend* backend, char* err, size_t err_size);
} kiln_plugin_host;

/* The one exported symbol. Returns KILN_BACKEND_OK once its backends are
 * registered. */
typedef int32_t (*kiln_backend_plugin_entry_fn)(const kiln_plugin_host* host, char* err, size_t err_size);
KILN_BACKEND_EXPORT int32_t kiln_backend_plugin_entry(const kiln_plugin_host* host, char* err, size_t err_size);

#ifdef __cplusplus
}
#endif

#endif /* KILN_KILN_BACKEND_H_ */
