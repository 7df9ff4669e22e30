// Quantizes a GGUF file with llama.cpp's own quantizer, llama_model_quantize
// in the libllama that the npm package node-llama-cpp ships, so that kiln is
// measured on the files llama.cpp's tools write (their Q4_K_M mixture of
// Q4_K, Q5_0, Q6_K and Q8_0 tensors, say), not on kiln's own.
//
//   cc -O2 -o quantize_with_llamacpp quantize_with_llamacpp.c -ldl
//   quantize_with_llamacpp LIBLLAMA.so IN.gguf OUT.gguf TYPE [THREADS]
//
// IN is a bf16, f16 or f32 GGUF (`kiln quantize MODEL IN.gguf --type bf16`).
// The library is opened at run time: nothing in kiln links it.
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// llama_model_quantize_params begins with int32 nthread and the int32 enum
// llama_ftype; the rest is left as llama_model_quantize_default_params
// fills it. The struct is returned in memory the caller provides, so a
// buffer larger than it receives it whole.
struct ParamsBuffer {
  int32_t nthread;
  int32_t ftype;
  unsigned char rest[1024];
};

typedef struct ParamsBuffer (*DefaultParamsFn)(void);
typedef uint32_t (*QuantizeFn)(const char*, const char*, const struct ParamsBuffer*);
typedef void (*VoidFn)(void);

// llama.h's llama_ftype values for the types people download.
static const struct {
  const char* name;
  int32_t ftype;
} kTypes[] = {
    {"f16", 1},    {"q4_0", 2},    {"q4_1", 3},    {"q8_0", 7},    {"q5_0", 8},   {"q5_1", 9},
    {"q2_k", 10},  {"q3_k_m", 12}, {"q4_k_s", 14}, {"q4_k_m", 15}, {"q5_k_s", 16}, {"q5_k_m", 17},
    {"q6_k", 18},  {"iq4_nl", 25}, {"iq4_xs", 30}, {"bf16", 32},
};

int main(int argc, char** argv) {
  if (argc < 5 || argc > 6) {
    fprintf(stderr, "usage: %s LIBLLAMA.so IN.gguf OUT.gguf TYPE [THREADS]\n", argv[0]);
    return 2;
  }
  int32_t ftype = -1;
  for (size_t i = 0; i < sizeof(kTypes) / sizeof(kTypes[0]); ++i) {
    if (strcmp(kTypes[i].name, argv[4]) == 0) ftype = kTypes[i].ftype;
  }
  if (ftype < 0) {
    fprintf(stderr, "type %s: expected one of", argv[4]);
    for (size_t i = 0; i < sizeof(kTypes) / sizeof(kTypes[0]); ++i) fprintf(stderr, " %s", kTypes[i].name);
    fprintf(stderr, "\n");
    return 2;
  }
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "cannot open %s: %s\n", argv[1], dlerror());
    return 1;
  }
  DefaultParamsFn defaults = (DefaultParamsFn)dlsym(lib, "llama_model_quantize_default_params");
  QuantizeFn quantize = (QuantizeFn)dlsym(lib, "llama_model_quantize");
  VoidFn init = (VoidFn)dlsym(lib, "llama_backend_init");
  VoidFn done = (VoidFn)dlsym(lib, "llama_backend_free");
  if (defaults == NULL || quantize == NULL) {
    fprintf(stderr, "%s has no llama_model_quantize\n", argv[1]);
    return 1;
  }
  if (init != NULL) init();
  struct ParamsBuffer params = defaults();
  params.ftype = ftype;
  params.nthread = argc == 6 ? atoi(argv[5]) : 0;
  const uint32_t rc = quantize(argv[2], argv[3], &params);
  if (done != NULL) done();
  if (rc != 0) {
    fprintf(stderr, "llama_model_quantize(%s -> %s, %s) failed: %u\n", argv[2], argv[3], argv[4], rc);
    return 1;
  }
  return 0;
}
