/* An ONNX model run on buffers of your own: the inputs are read where they
 * lie and the outputs written into the buffers you allocate (no copies).
 * Every input must be f32; each is filled with the pattern -3, -2, ..., 3,
 * -3, ... and each output printed as its name, type and the sum of its
 * values. A dimension the model leaves open is 1 unless given on the
 * command line as NAME:D0,D1,... (the whole shape of input NAME).
 * Usage: onnx_run MODEL.onnx [NAME:D0,D1,...]... */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kiln/kiln.h>

#define MAX_RANK 8

static void Check(kiln_status status, const char* what) {
  if (status != KILN_OK) {
    fprintf(stderr, "%s failed (%s): %s\n", what, kiln_status_name(status), kiln_last_error());
    exit(1);
  }
}

static void* Allocate(size_t bytes) {
  void* p = malloc(bytes > 0 ? bytes : 1);
  if (p == NULL) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  return p;
}

static size_t Elements(const int64_t* dims, size_t rank) {
  size_t n = 1;
  for (size_t d = 0; d < rank; ++d) n *= (size_t)dims[d];
  return n;
}

/* The shape given for input `name` as NAME:D0,D1,... among the arguments;
 * returns its rank, or -1 when none is given. */
static int GivenShape(int argc, char** argv, const char* name, int64_t* dims) {
  const size_t length = strlen(name);
  for (int a = 2; a < argc; ++a) {
    if (strncmp(argv[a], name, length) != 0 || argv[a][length] != ':') continue;
    int rank = 0;
    const char* p = argv[a] + length + 1;
    while (rank < MAX_RANK) {
      char* end = NULL;
      dims[rank++] = strtoll(p, &end, 10);
      if (*end != ',') break;
      p = end + 1;
    }
    return rank;
  }
  return -1;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s MODEL.onnx [NAME:D0,D1,...]...\n", argv[0]);
    return 2;
  }
  kiln_set_log_level(KILN_LOG_WARN);
  kiln_onnx_options options;
  kiln_onnx_options_default(&options);
  options.threads = 2;
  kiln_onnx_model* model = NULL;
  Check(kiln_onnx_model_load(argv[1], &options, &model), "kiln_onnx_model_load");

  const size_t num_inputs = kiln_onnx_model_num_inputs(model);
  const size_t num_outputs = kiln_onnx_model_num_outputs(model);
  kiln_tensor* inputs = (kiln_tensor*)Allocate(num_inputs * sizeof(kiln_tensor));
  kiln_tensor* outputs = (kiln_tensor*)Allocate(num_outputs * sizeof(kiln_tensor));
  int64_t(*input_dims)[MAX_RANK] = Allocate(num_inputs * sizeof(*input_dims));
  int64_t(*output_dims)[MAX_RANK] = Allocate(num_outputs * sizeof(*output_dims));

  for (size_t i = 0; i < num_inputs; ++i) {
    kiln_tensor_info info;
    Check(kiln_onnx_model_input_info(model, i, &info), "kiln_onnx_model_input_info");
    if (info.dtype != KILN_DTYPE_F32 || info.rank > MAX_RANK) {
      fprintf(stderr, "input %s is %s of rank %zu; this example fills f32 inputs of rank <= %d only\n",
              info.name, kiln_dtype_name(info.dtype), info.rank, MAX_RANK);
      return 1;
    }
    int rank = GivenShape(argc, argv, info.name, input_dims[i]);
    if (rank < 0) {
      rank = (int)info.rank;
      for (size_t d = 0; d < info.rank; ++d) input_dims[i][d] = info.dims[d] < 0 ? 1 : info.dims[d];
    }
    const size_t n = Elements(input_dims[i], (size_t)rank);
    float* values = (float*)Allocate(n * sizeof(float));
    for (size_t k = 0; k < n; ++k) values[k] = (float)((int)(k % 7) - 3);
    kiln_tensor t = {info.name, KILN_DTYPE_F32, (size_t)rank, input_dims[i], values, n * sizeof(float)};
    inputs[i] = t;
  }

  /* Size each output for these inputs, then let kiln write into it. */
  for (size_t j = 0; j < num_outputs; ++j) {
    kiln_tensor_info info;
    size_t rank = 0;
    Check(kiln_onnx_model_output_info(model, j, &info), "kiln_onnx_model_output_info");
    Check(kiln_onnx_model_output_shape(model, inputs, num_inputs, j, output_dims[j], MAX_RANK, &rank),
          "kiln_onnx_model_output_shape");
    const size_t bytes = Elements(output_dims[j], rank) * kiln_dtype_size(info.dtype);
    kiln_tensor t = {info.name, info.dtype, rank, output_dims[j], Allocate(bytes), bytes};
    outputs[j] = t;
  }
  Check(kiln_onnx_model_run(model, inputs, num_inputs, outputs, num_outputs), "kiln_onnx_model_run");

  for (size_t j = 0; j < num_outputs; ++j) {
    printf("%s %s[", outputs[j].name, kiln_dtype_name(outputs[j].dtype));
    for (size_t d = 0; d < outputs[j].rank; ++d) printf(d ? ",%lld" : "%lld", (long long)outputs[j].dims[d]);
    printf("]");
    if (outputs[j].dtype == KILN_DTYPE_F32) {
      double sum = 0;
      const float* v = (const float*)outputs[j].data;
      for (size_t k = 0; k < Elements(outputs[j].dims, outputs[j].rank); ++k) sum += v[k];
      printf(" sum %g", sum);
    }
    printf("\n");
    free(outputs[j].data);
  }
  for (size_t i = 0; i < num_inputs; ++i) free(inputs[i].data);
  free(inputs);
  free(outputs);
  free(input_dims);
  free(output_dims);
  kiln_onnx_model_destroy(model);
  return 0;
}
