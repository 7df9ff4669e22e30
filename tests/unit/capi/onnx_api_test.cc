// The C API's ONNX models: loading with options, introspection, output
// shapes for given input shapes, runs on the caller's buffers (no copies:
// the outputs land in the buffers given), and a clear status for every
// malformed call.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "capi_onnx_models.h"
#include "kiln/kiln.h"
#include "onnx/onnx_artifact.h"
#include "testing/test_paths.h"

namespace kiln::capi_test {
namespace onnx_api_tests {

struct OnnxModelDeleter {
  void operator()(kiln_onnx_model* m) const { kiln_onnx_model_destroy(m); }
};
using OnnxModelPtr = std::unique_ptr<kiln_onnx_model, OnnxModelDeleter>;

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

OnnxModelPtr Load(const std::string& name, const kiln_onnx_options* options = nullptr) {
  kiln_onnx_model* model = nullptr;
  kiln_status s = kiln_onnx_model_load(CapiOnnxModel(name).c_str(), options, &model);
  EXPECT_EQ(s, KILN_OK) << kiln_last_error();
  return OnnxModelPtr(model);
}

kiln_onnx_options TwoThreads() {
  kiln_onnx_options o;
  kiln_onnx_options_default(&o);
  o.threads = 2;
  return o;
}

// A float tensor in memory this test owns, and its kiln_tensor view.
struct Buffer {
  std::vector<int64_t> dims;
  std::vector<float> values;
  kiln_tensor tensor(const char* name = nullptr) {
    return kiln_tensor{name,        KILN_DTYPE_F32, dims.size(),
                       dims.data(), values.data(),  values.size() * sizeof(float)};
  }
};

Buffer Filled(std::vector<int64_t> dims, float start, float step) {
  Buffer b{std::move(dims), {}};
  int64_t n = 1;
  for (int64_t d : b.dims) n *= d;
  for (int64_t i = 0; i < n; ++i) b.values.push_back(start + step * static_cast<float>(i));
  return b;
}

Buffer Empty(std::vector<int64_t> dims, float fill = -99.0f) {
  Buffer b = Filled(std::move(dims), 0, 0);
  std::fill(b.values.begin(), b.values.end(), fill);
  return b;
}

std::vector<float> Relu(const std::vector<float>& v) {
  std::vector<float> r;
  for (float x : v) r.push_back(x > 0 ? x : 0.0f);
  return r;
}

TEST(CApiOnnx, DTypeNamesAndSizes) {
  EXPECT_STREQ(kiln_dtype_name(KILN_DTYPE_F32), "f32");
  EXPECT_STREQ(kiln_dtype_name(KILN_DTYPE_I64), "i64");
  EXPECT_STREQ(kiln_dtype_name(KILN_DTYPE_BOOL), "bool");
  EXPECT_STREQ(kiln_dtype_name(static_cast<kiln_dtype>(77)), "");
  EXPECT_EQ(kiln_dtype_size(KILN_DTYPE_F32), 4u);
  EXPECT_EQ(kiln_dtype_size(KILN_DTYPE_F16), 2u);
  EXPECT_EQ(kiln_dtype_size(KILN_DTYPE_F64), 8u);
  EXPECT_EQ(kiln_dtype_size(KILN_DTYPE_I64), 8u);
  EXPECT_EQ(kiln_dtype_size(KILN_DTYPE_U8), 1u);
  EXPECT_EQ(kiln_dtype_size(KILN_DTYPE_BOOL), 1u);
  EXPECT_EQ(kiln_dtype_size(static_cast<kiln_dtype>(-1)), 0u);
}

TEST(CApiOnnx, OptionsDefaultsAndOlderStructs) {
  kiln_onnx_options o;
  kiln_onnx_options_default(&o);
  EXPECT_EQ(o.struct_size, sizeof(o));
  EXPECT_EQ(o.input_shapes, nullptr);
  EXPECT_EQ(o.num_input_shapes, 0u);
  EXPECT_EQ(o.backend, nullptr);
  EXPECT_EQ(o.precision, nullptr);
  EXPECT_EQ(o.fixed_inputs, nullptr);
  EXPECT_EQ(o.num_fixed_inputs, 0u);
  EXPECT_EQ(o.threads, 0);
  // A caller built against a shorter struct: the rest is left alone.
  alignas(kiln_onnx_options) unsigned char bytes[sizeof(kiln_onnx_options)];
  std::memset(bytes, 0xAB, sizeof(bytes));
  const size_t old_size = offsetof(kiln_onnx_options, backend);
  kiln_onnx_options_init(reinterpret_cast<kiln_onnx_options*>(bytes), old_size);
  for (size_t i = old_size; i < sizeof(bytes); ++i) ASSERT_EQ(bytes[i], 0xAB) << i;
  // ...and such a struct loads, with the later fields at their defaults.
  kiln_onnx_model* model = nullptr;
  ASSERT_EQ(kiln_onnx_model_load(CapiOnnxModel("static_relu.onnx").c_str(),
                                 reinterpret_cast<kiln_onnx_options*>(bytes), &model),
            KILN_OK)
      << kiln_last_error();
  kiln_onnx_model_destroy(model);
  kiln_onnx_model_destroy(nullptr);
}

TEST(CApiOnnx, IntrospectionListsInputsAndOutputs) {
  kiln_onnx_options o = TwoThreads();
  OnnxModelPtr model = Load("two_relu.onnx", &o);
  ASSERT_NE(model, nullptr);
  ASSERT_EQ(kiln_onnx_model_num_inputs(model.get()), 2u);
  ASSERT_EQ(kiln_onnx_model_num_outputs(model.get()), 2u);
  EXPECT_EQ(kiln_onnx_model_num_inputs(nullptr), 0u);
  kiln_tensor_info info;
  ASSERT_EQ(kiln_onnx_model_input_info(model.get(), 0, &info), KILN_OK) << kiln_last_error();
  EXPECT_STREQ(info.name, "a");
  EXPECT_EQ(info.dtype, KILN_DTYPE_F32);
  ASSERT_EQ(info.rank, 2u);
  EXPECT_EQ(info.dims[0], -1);  // "n": bound per run
  EXPECT_EQ(info.dims[1], 4);
  ASSERT_EQ(kiln_onnx_model_input_info(model.get(), 1, &info), KILN_OK);
  EXPECT_STREQ(info.name, "b");
  EXPECT_EQ(std::vector<int64_t>(info.dims, info.dims + info.rank), (std::vector<int64_t>{2, 3}));
  ASSERT_EQ(kiln_onnx_model_output_info(model.get(), 0, &info), KILN_OK);
  EXPECT_STREQ(info.name, "ya");
  ASSERT_EQ(kiln_onnx_model_output_info(model.get(), 1, &info), KILN_OK);
  EXPECT_STREQ(info.name, "yb");
  EXPECT_EQ(kiln_onnx_model_input_info(model.get(), 2, &info), KILN_ERROR_OUT_OF_RANGE);
  EXPECT_EQ(std::string(kiln_last_error()),
            "kiln_onnx_model_input_info: input index 2: the model has 2 inputs");
  EXPECT_EQ(kiln_onnx_model_output_info(model.get(), 0, nullptr), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kiln_onnx_model_output_info(nullptr, 0, &info), KILN_ERROR_INVALID_ARGUMENT);
}

TEST(CApiOnnx, OutputShapeFollowsTheInputShapes) {
  kiln_onnx_options o = TwoThreads();
  OnnxModelPtr model = Load("two_relu.onnx", &o);
  ASSERT_NE(model, nullptr);
  int64_t a_dims[] = {5, 4}, b_dims[] = {2, 3};
  // Only the types are read: the data may be NULL.
  kiln_tensor inputs[] = {{nullptr, KILN_DTYPE_F32, 2, a_dims, nullptr, 0},
                          {nullptr, KILN_DTYPE_F32, 2, b_dims, nullptr, 0}};
  size_t rank = 0;
  ASSERT_EQ(kiln_onnx_model_output_shape(model.get(), inputs, 2, 0, nullptr, 0, &rank), KILN_OK)
      << kiln_last_error();
  EXPECT_EQ(rank, 2u);
  int64_t dims[4] = {0, 0, 0, 0};
  ASSERT_EQ(kiln_onnx_model_output_shape(model.get(), inputs, 2, 0, dims, 4, &rank), KILN_OK);
  EXPECT_EQ(dims[0], 5);
  EXPECT_EQ(dims[1], 4);
  ASSERT_EQ(kiln_onnx_model_output_shape(model.get(), inputs, 2, 1, dims, 4, &rank), KILN_OK);
  EXPECT_EQ(dims[0], 2);
  EXPECT_EQ(dims[1], 3);
  a_dims[0] = 7;
  ASSERT_EQ(kiln_onnx_model_output_shape(model.get(), inputs, 2, 0, dims, 4, &rank), KILN_OK);
  EXPECT_EQ(dims[0], 7);
  // Too small an array: an error, nothing written.
  int64_t one[1] = {-5};
  EXPECT_EQ(kiln_onnx_model_output_shape(model.get(), inputs, 2, 0, one, 1, &rank), KILN_ERROR_OUT_OF_RANGE);
  EXPECT_TRUE(Contains(kiln_last_error(), "output ya has rank 2; dims holds 1")) << kiln_last_error();
  EXPECT_EQ(one[0], -5);
  EXPECT_EQ(kiln_onnx_model_output_shape(model.get(), inputs, 2, 2, dims, 4, &rank), KILN_ERROR_OUT_OF_RANGE);
  // Shapes the model does not take.
  b_dims[1] = 4;
  EXPECT_EQ(kiln_onnx_model_output_shape(model.get(), inputs, 2, 0, dims, 4, &rank),
            KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(kiln_last_error(), "input b: shape [2,4] given, the model takes [2,3]"))
      << kiln_last_error();
}

TEST(CApiOnnx, RunWritesIntoTheCallersBuffers) {
  kiln_onnx_options o = TwoThreads();
  OnnxModelPtr model = Load("two_relu.onnx", &o);
  ASSERT_NE(model, nullptr);
  for (int64_t n : {3, 1, 6, 3}) {  // new shapes compile, a seen one is reused
    Buffer a = Filled({n, 4}, -5.0f, 0.75f), b = Filled({2, 3}, 1.5f, -0.5f);
    Buffer ya = Empty({n, 4}), yb = Empty({2, 3});
    const float* ya_data = ya.values.data();
    kiln_tensor in[] = {a.tensor(), b.tensor()};
    kiln_tensor out[] = {ya.tensor(), yb.tensor()};
    ASSERT_EQ(kiln_onnx_model_run(model.get(), in, 2, out, 2), KILN_OK) << kiln_last_error();
    EXPECT_EQ(ya.values.data(), ya_data);  // written in place
    EXPECT_EQ(ya.values, Relu(a.values)) << n;
    EXPECT_EQ(yb.values, Relu(b.values)) << n;
  }
}

TEST(CApiOnnx, TensorsMatchByNameInAnyOrder) {
  kiln_onnx_options o = TwoThreads();
  OnnxModelPtr model = Load("two_relu.onnx", &o);
  ASSERT_NE(model, nullptr);
  Buffer a = Filled({2, 4}, -1.0f, 0.25f), b = Filled({2, 3}, 2.0f, -1.0f);
  Buffer ya = Empty({2, 4}), yb = Empty({2, 3});
  kiln_tensor in[] = {b.tensor("b"), a.tensor("a")};
  kiln_tensor out[] = {ya.tensor(), yb.tensor("yb")};  // unnamed: by position
  ASSERT_EQ(kiln_onnx_model_run(model.get(), in, 2, out, 2), KILN_OK) << kiln_last_error();
  EXPECT_EQ(ya.values, Relu(a.values));
  EXPECT_EQ(yb.values, Relu(b.values));
  // An unnamed tensor is the one at its position, even when another names it.
  kiln_tensor clash[] = {yb.tensor("yb"), ya.tensor()};
  EXPECT_EQ(kiln_onnx_model_run(model.get(), in, 2, clash, 2), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(kiln_last_error(), "outputs[1] (yb): given twice")) << kiln_last_error();
}

TEST(CApiOnnx, ModelsWithFixedShapesAndInputShapeOptions) {
  OnnxModelPtr fixed = Load("static_relu.onnx");
  ASSERT_NE(fixed, nullptr);
  Buffer x = Filled({1, 3, 2, 2}, -6.0f, 1.0f), y = Empty({1, 3, 2, 2});
  kiln_tensor in = x.tensor(), out = y.tensor();
  ASSERT_EQ(kiln_onnx_model_run(fixed.get(), &in, 1, &out, 1), KILN_OK) << kiln_last_error();
  EXPECT_EQ(y.values, Relu(x.values));

  // --input-shape: n fixed at load, so introspection shows it.
  int64_t a_dims[] = {3, 4};
  kiln_input_shape shape{"a", a_dims, 2};
  kiln_onnx_options o = TwoThreads();
  o.input_shapes = &shape;
  o.num_input_shapes = 1;
  o.precision = "fp32";
  o.backend = "cpu";
  OnnxModelPtr bound = Load("two_relu.onnx", &o);
  ASSERT_NE(bound, nullptr);
  kiln_tensor_info info;
  ASSERT_EQ(kiln_onnx_model_input_info(bound.get(), 0, &info), KILN_OK);
  EXPECT_EQ(info.dims[0], 3);
}

TEST(CApiOnnx, ACompiledArtifactLoadsWhereTheOnnxFileDoes) {
  const std::string artifact = kiln::testing::MakeTempDir() + "/static_relu.kiln";
  auto compiled = kiln::CompileOnnxArtifact(CapiOnnxModel("static_relu.onnx"), {}, artifact);
  ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
  kiln_onnx_model* loaded = nullptr;
  ASSERT_EQ(kiln_onnx_model_load(artifact.c_str(), nullptr, &loaded), KILN_OK) << kiln_last_error();
  OnnxModelPtr model(loaded);
  Buffer x = Filled({1, 3, 2, 2}, -6.0f, 1.0f), y = Empty({1, 3, 2, 2});
  kiln_tensor in = x.tensor(), out = y.tensor();
  ASSERT_EQ(kiln_onnx_model_run(model.get(), &in, 1, &out, 1), KILN_OK) << kiln_last_error();
  EXPECT_EQ(y.values, Relu(x.values));
  // As an LLM it is refused, naming what it holds.
  kiln_model* llm = nullptr;
  EXPECT_NE(kiln_model_load(artifact.c_str(), nullptr, &llm), KILN_OK);
  EXPECT_TRUE(Contains(kiln_last_error(), "compiled ONNX graph")) << kiln_last_error();
}

TEST(CApiOnnx, LoadErrorsNameTheProblem) {
  kiln_onnx_model* model = nullptr;
  EXPECT_EQ(kiln_onnx_model_load(nullptr, nullptr, &model), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(kiln_last_error()), "kiln_onnx_model_load: path is NULL");
  EXPECT_EQ(kiln_onnx_model_load(CapiOnnxModel("two_relu.onnx").c_str(), nullptr, nullptr),
            KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kiln_onnx_model_load("/nonexistent/m.onnx", nullptr, &model), KILN_ERROR_NOT_FOUND);
  EXPECT_TRUE(Contains(kiln_last_error(), "/nonexistent/m.onnx")) << kiln_last_error();
  EXPECT_EQ(kiln_onnx_model_load(CapiOnnxModel("truncated.onnx").c_str(), nullptr, &model),
            KILN_ERROR_CORRUPT);
  EXPECT_TRUE(Contains(kiln_last_error(), "truncated.onnx")) << kiln_last_error();
  EXPECT_EQ(kiln_onnx_model_load(CapiOnnxModel("unknown_op.onnx").c_str(), nullptr, &model),
            KILN_ERROR_UNSUPPORTED);
  EXPECT_TRUE(Contains(kiln_last_error(), "Frobnicate")) << kiln_last_error();
  EXPECT_EQ(model, nullptr);  // untouched on failure

  const std::string path = CapiOnnxModel("two_relu.onnx");
  kiln_onnx_options o;
  kiln_onnx_options_default(&o);
  o.threads = -1;
  EXPECT_EQ(kiln_onnx_model_load(path.c_str(), &o, &model), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(kiln_last_error(), "options.threads is -1")) << kiln_last_error();
  kiln_onnx_options_default(&o);
  o.precision = "fp64";
  EXPECT_EQ(kiln_onnx_model_load(path.c_str(), &o, &model), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(kiln_last_error(), "options.precision")) << kiln_last_error();
  kiln_onnx_options_default(&o);
  o.backend = "no-such-backend";  // found at load even though the shapes compile later
  EXPECT_EQ(kiln_onnx_model_load(path.c_str(), &o, &model), KILN_ERROR_NOT_FOUND);
  EXPECT_TRUE(Contains(kiln_last_error(), "options.backend 'no-such-backend': available backends are"))
      << kiln_last_error();
  kiln_onnx_options_default(&o);
  o.num_input_shapes = 1;
  EXPECT_EQ(kiln_onnx_model_load(path.c_str(), &o, &model), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(kiln_last_error(), "input_shapes is NULL but num_input_shapes is 1"))
      << kiln_last_error();
  int64_t bad_dims[] = {-3, 4};
  kiln_input_shape bad{"a", bad_dims, 2};
  o.input_shapes = &bad;
  EXPECT_EQ(kiln_onnx_model_load(path.c_str(), &o, &model), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(kiln_last_error(), "options.input_shapes[0] (a): dims[0] is -3")) << kiln_last_error();
  kiln_onnx_options unfilled{};
  EXPECT_EQ(kiln_onnx_model_load(path.c_str(), &unfilled, &model), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(kiln_last_error(), "struct_size is 0")) << kiln_last_error();
  EXPECT_EQ(model, nullptr);
}

// Every malformed run is refused before anything runs: the outputs keep
// what they held.
TEST(CApiOnnx, MalformedRunsAreClearErrorsAndWriteNothing) {
  kiln_onnx_options o = TwoThreads();
  OnnxModelPtr model = Load("two_relu.onnx", &o);
  ASSERT_NE(model, nullptr);
  Buffer a = Filled({2, 4}, -1.0f, 0.5f), b = Filled({2, 3}, 1.0f, 1.0f);
  Buffer ya = Empty({2, 4}), yb = Empty({2, 3});
  auto run = [&](std::vector<kiln_tensor> in, std::vector<kiln_tensor> out) {
    kiln_status s = kiln_onnx_model_run(model.get(), in.data(), in.size(), out.data(), out.size());
    EXPECT_EQ(ya.values, Empty({2, 4}).values);
    EXPECT_EQ(yb.values, Empty({2, 3}).values);
    return s;
  };
  auto expect = [&](kiln_status got, kiln_status want, const std::string& message) {
    EXPECT_EQ(got, want) << kiln_last_error();
    EXPECT_TRUE(Contains(kiln_last_error(), message)) << kiln_last_error() << "\nwanted: " << message;
  };
  expect(run({a.tensor()}, {ya.tensor(), yb.tensor()}), KILN_ERROR_INVALID_ARGUMENT,
         "kiln_onnx_model_run: the model has 2 inputs (a, b); 1 given");
  expect(run({a.tensor(), b.tensor()}, {ya.tensor()}), KILN_ERROR_INVALID_ARGUMENT,
         "the model has 2 outputs (ya, yb); 1 given");
  expect(run({a.tensor("a"), b.tensor("c")}, {ya.tensor(), yb.tensor()}), KILN_ERROR_INVALID_ARGUMENT,
         "inputs[1]: the model has no input named \"c\" (its inputs: a, b)");
  expect(run({a.tensor("a"), b.tensor("a")}, {ya.tensor(), yb.tensor()}), KILN_ERROR_INVALID_ARGUMENT,
         "inputs[1] (a): given twice");
  kiln_tensor wrong_dtype = a.tensor();
  wrong_dtype.dtype = KILN_DTYPE_I32;
  expect(run({wrong_dtype, b.tensor()}, {ya.tensor(), yb.tensor()}), KILN_ERROR_INVALID_ARGUMENT,
         "inputs[0] (a): dtype i32 given, the model's is f32");
  kiln_tensor bad_enum = a.tensor();
  std::memset(&bad_enum.dtype, 0x7f, sizeof bad_enum.dtype);
  expect(run({bad_enum, b.tensor()}, {ya.tensor(), yb.tensor()}), KILN_ERROR_INVALID_ARGUMENT,
         "is not a kiln_dtype");
  kiln_tensor null_data = a.tensor();
  null_data.data = nullptr;
  expect(run({null_data, b.tensor()}, {ya.tensor(), yb.tensor()}), KILN_ERROR_INVALID_ARGUMENT,
         "inputs[0] (a): data is NULL");
  kiln_tensor null_out = yb.tensor();
  null_out.data = nullptr;
  expect(run({a.tensor(), b.tensor()}, {ya.tensor(), null_out}), KILN_ERROR_INVALID_ARGUMENT,
         "outputs[1] (yb): data is NULL");
  kiln_tensor small = a.tensor();
  small.size_bytes -= 1;
  expect(run({small, b.tensor()}, {ya.tensor(), yb.tensor()}), KILN_ERROR_OUT_OF_RANGE,
         "inputs[0] (a): size_bytes is 31; f32[2,4] needs 32");
  kiln_tensor small_out = ya.tensor();
  small_out.size_bytes = 4;
  expect(run({a.tensor(), b.tensor()}, {small_out, yb.tensor()}), KILN_ERROR_OUT_OF_RANGE,
         "outputs[0] (ya): size_bytes is 4");
  kiln_tensor no_dims = a.tensor();
  no_dims.dims = nullptr;
  expect(run({no_dims, b.tensor()}, {ya.tensor(), yb.tensor()}), KILN_ERROR_INVALID_ARGUMENT,
         "inputs[0] (a): dims is NULL but rank is 2");
  kiln_tensor huge_rank = a.tensor();
  huge_rank.rank = 1000;
  expect(run({huge_rank, b.tensor()}, {ya.tensor(), yb.tensor()}), KILN_ERROR_INVALID_ARGUMENT,
         "inputs[0] (a): rank 1000 beyond 64");
  int64_t negative[] = {-2, 4};
  kiln_tensor neg = a.tensor();
  neg.dims = negative;
  expect(run({neg, b.tensor()}, {ya.tensor(), yb.tensor()}), KILN_ERROR_INVALID_ARGUMENT,
         "inputs[0] (a): dims[0] is -2");
  int64_t overflowing[] = {int64_t{1} << 40, int64_t{1} << 40};
  kiln_tensor overflow = a.tensor();
  overflow.dims = overflowing;
  expect(run({overflow, b.tensor()}, {ya.tensor(), yb.tensor()}), KILN_ERROR_OUT_OF_RANGE,
         "too large to address");
  // Shapes: an input the model does not take, an output buffer of another shape.
  int64_t three_cols[] = {2, 3};
  Buffer wide = Filled({2, 3}, 0, 1);
  kiln_tensor wrong_shape = wide.tensor();
  expect(run({wrong_shape, b.tensor()}, {ya.tensor(), yb.tensor()}), KILN_ERROR_INVALID_ARGUMENT,
         "input a: shape [2,3] given, the model takes [-1,4]");
  kiln_tensor wrong_out = yb.tensor();
  wrong_out.dims = three_cols;
  wrong_out.rank = 1;  // f32[2] over a 6-float buffer
  expect(run({a.tensor(), b.tensor()}, {ya.tensor(), wrong_out}), KILN_ERROR_INVALID_ARGUMENT,
         "output yb: buffer of f32[2] given, the output is f32[2,3]");
  // An output written over an input.
  kiln_tensor aliased = ya.tensor();
  aliased.data = a.values.data();
  expect(run({a.tensor(), b.tensor()}, {aliased, yb.tensor()}), KILN_ERROR_INVALID_ARGUMENT,
         "output ya's buffer overlaps input a's");
  kiln_tensor twice = ya.tensor("yb");
  twice.dims = three_cols;  // yb's shape, over ya's buffer
  expect(run({a.tensor(), b.tensor()}, {ya.tensor(), twice}), KILN_ERROR_INVALID_ARGUMENT,
         "output yb's buffer overlaps output ya's");
  // NULL arrays and handles.
  kiln_tensor out[] = {ya.tensor(), yb.tensor()};
  expect(kiln_onnx_model_run(model.get(), nullptr, 2, out, 2), KILN_ERROR_INVALID_ARGUMENT,
         "inputs is NULL but num_inputs is 2");
  expect(kiln_onnx_model_run(nullptr, nullptr, 0, nullptr, 0), KILN_ERROR_INVALID_ARGUMENT,
         "kiln_onnx_model_run: model is NULL");
  size_t rank = 0;
  expect(kiln_onnx_model_output_shape(model.get(), nullptr, 0, 0, nullptr, 0, &rank),
         KILN_ERROR_INVALID_ARGUMENT, "the model has 2 inputs (a, b); 0 given");
  EXPECT_EQ(ya.values, Empty({2, 4}).values);
}

// Integer inputs and outputs: ids (i64) pick rows of a table, and come back
// as a column (i64); an id outside the table is a run-time error, not a read
// out of bounds.
TEST(CApiOnnx, IntegerTensorsAndRunTimeErrors) {
  kiln_onnx_options o = TwoThreads();
  OnnxModelPtr model = Load("gather.onnx", &o);
  ASSERT_NE(model, nullptr);
  kiln_tensor_info info;
  ASSERT_EQ(kiln_onnx_model_input_info(model.get(), 0, &info), KILN_OK);
  EXPECT_EQ(info.dtype, KILN_DTYPE_I64);
  ASSERT_EQ(kiln_onnx_model_output_info(model.get(), 1, &info), KILN_OK);
  EXPECT_EQ(info.dtype, KILN_DTYPE_I64);
  std::vector<int64_t> ids = {4, 0, 5, -1}, ids_dims = {4}, table_dims = {6, 2}, rows_dims = {4, 2},
                       column_dims = {4, 1};
  std::vector<float> table = {0, 1, 10, 11, 20, 21, 30, 31, 40, 41, 50, 51};
  std::vector<float> rows(8, -1);
  std::vector<int64_t> column(4, -7);
  kiln_tensor in[] = {{"ids", KILN_DTYPE_I64, 1, ids_dims.data(), ids.data(), ids.size() * 8},
                      {"table", KILN_DTYPE_F32, 2, table_dims.data(), table.data(), table.size() * 4}};
  kiln_tensor out[] = {{"rows", KILN_DTYPE_F32, 2, rows_dims.data(), rows.data(), rows.size() * 4},
                       {"column", KILN_DTYPE_I64, 2, column_dims.data(), column.data(), column.size() * 8}};
  ASSERT_EQ(kiln_onnx_model_run(model.get(), in, 2, out, 2), KILN_OK) << kiln_last_error();
  EXPECT_EQ(rows, (std::vector<float>{40, 41, 0, 1, 50, 51, 50, 51}));
  EXPECT_EQ(column, ids);
  ids[1] = 6;
  EXPECT_NE(kiln_onnx_model_run(model.get(), in, 2, out, 2), KILN_OK);
  EXPECT_TRUE(Contains(kiln_last_error(), "Gather")) << kiln_last_error();
}

// A graph input that static shapes need (Reshape's shape) compiles once its
// value is fixed at load; runs must then pass that value.
TEST(CApiOnnx, FixedInputs) {
  const std::string path = CapiOnnxModel("reshape.onnx");
  kiln_onnx_model* model = nullptr;
  EXPECT_NE(kiln_onnx_model_load(path.c_str(), nullptr, &model), KILN_OK);
  EXPECT_TRUE(Contains(kiln_last_error(), "shape")) << kiln_last_error();
  EXPECT_EQ(model, nullptr);

  int64_t shape[] = {3, 2}, shape_dims[] = {2}, x_dims[] = {6};
  kiln_tensor fixed{"shape", KILN_DTYPE_I64, 1, shape_dims, shape, sizeof shape};
  kiln_onnx_options o = TwoThreads();
  o.fixed_inputs = &fixed;
  o.num_fixed_inputs = 1;
  OnnxModelPtr loaded = Load("reshape.onnx", &o);
  ASSERT_NE(loaded, nullptr);
  shape[0] = 99;  // copied at load: the caller's array may change
  int64_t passed[] = {3, 2};
  std::vector<float> x = {1, 2, 3, 4, 5, 6}, y(6, 0);
  int64_t y_dims[4];
  size_t rank = 0;
  kiln_tensor in[] = {{"x", KILN_DTYPE_F32, 1, x_dims, x.data(), 24},
                      {"shape", KILN_DTYPE_I64, 1, shape_dims, passed, sizeof passed}};
  ASSERT_EQ(kiln_onnx_model_output_shape(loaded.get(), in, 2, 0, y_dims, 4, &rank), KILN_OK)
      << kiln_last_error();
  ASSERT_EQ(rank, 2u);
  EXPECT_EQ(y_dims[0], 3);
  EXPECT_EQ(y_dims[1], 2);
  kiln_tensor out{"y", KILN_DTYPE_F32, 2, y_dims, y.data(), 24};
  ASSERT_EQ(kiln_onnx_model_run(loaded.get(), in, 2, &out, 1), KILN_OK) << kiln_last_error();
  EXPECT_EQ(y, x);
  passed[0] = 2;
  passed[1] = 3;
  EXPECT_EQ(kiln_onnx_model_run(loaded.get(), in, 2, &out, 1), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(kiln_last_error(), "input shape: its value was fixed at compile time"))
      << kiln_last_error();

  // Malformed fixed inputs.
  fixed.dtype = KILN_DTYPE_I32;  // the same bytes, read as 4 values of another type
  EXPECT_EQ(kiln_onnx_model_load(path.c_str(), &o, &model), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(kiln_last_error(), "fixed input shape: dtype i32 given, the model's is i64"))
      << kiln_last_error();
  fixed.dtype = KILN_DTYPE_I64;
  fixed.data = nullptr;
  EXPECT_EQ(kiln_onnx_model_load(path.c_str(), &o, &model), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(kiln_last_error(), "options.fixed_inputs[0] (shape): data is NULL"))
      << kiln_last_error();
  fixed.data = shape;
  fixed.name = nullptr;
  EXPECT_EQ(kiln_onnx_model_load(path.c_str(), &o, &model), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(kiln_last_error(), "options.fixed_inputs[0].name is NULL")) << kiln_last_error();
  fixed.name = "nope";
  EXPECT_EQ(kiln_onnx_model_load(path.c_str(), &o, &model), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(kiln_last_error(), "nope")) << kiln_last_error();
  o.fixed_inputs = nullptr;
  EXPECT_EQ(kiln_onnx_model_load(path.c_str(), &o, &model), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(kiln_last_error(), "fixed_inputs is NULL but num_fixed_inputs is 1"))
      << kiln_last_error();
  EXPECT_EQ(model, nullptr);
}

// Runs from several threads on one model take turns; each gets its own result.
// An artifact compiled with the shape fixed holds it: the model takes x
// alone, and passing the shape anyway is an error naming it.
TEST(CApiOnnx, AnArtifactCompiledWithAFixedInputTakesNoValueForIt) {
  kiln::OnnxSessionOptions fixed;
  kiln::HostTensor shape(kiln::TensorType{kiln::DType::kI64, {2}});
  shape.data<int64_t>()[0] = 3;
  shape.data<int64_t>()[1] = 2;
  fixed.fixed_inputs["shape"] = shape;
  const std::string artifact = kiln::testing::MakeTempDir() + "/reshape_fixed.kiln";
  auto compiled = kiln::CompileOnnxArtifact(CapiOnnxModel("reshape.onnx"), fixed, artifact);
  ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
  kiln_onnx_model* loaded = nullptr;
  ASSERT_EQ(kiln_onnx_model_load(artifact.c_str(), nullptr, &loaded), KILN_OK) << kiln_last_error();
  OnnxModelPtr model(loaded);
  EXPECT_EQ(kiln_onnx_model_num_inputs(model.get()), 1u);
  int64_t x_dims[] = {6}, y_dims[] = {3, 2}, shape_dims[] = {2}, passed[] = {3, 2};
  std::vector<float> x = {1, 2, 3, 4, 5, 6}, y(6, 0);
  kiln_tensor in[] = {{"x", KILN_DTYPE_F32, 1, x_dims, x.data(), 24},
                      {"shape", KILN_DTYPE_I64, 1, shape_dims, passed, sizeof passed}};
  kiln_tensor out{"y", KILN_DTYPE_F32, 2, y_dims, y.data(), 24};
  ASSERT_EQ(kiln_onnx_model_run(model.get(), in, 1, &out, 1), KILN_OK) << kiln_last_error();
  EXPECT_EQ(y, x);
  EXPECT_EQ(kiln_onnx_model_run(model.get(), in, 2, &out, 1), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(kiln_last_error(), "input shape: its value was fixed when the artifact was compiled"))
      << kiln_last_error();
}

TEST(CApiOnnx, ConcurrentRunsOnOneModel) {
  kiln_onnx_options o = TwoThreads();
  OnnxModelPtr model = Load("two_relu.onnx", &o);
  ASSERT_NE(model, nullptr);
  std::vector<std::thread> threads;
  std::vector<int> failures(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        const int64_t n = 1 + (t + i) % 3;
        Buffer a = Filled({n, 4}, -3.0f + t, 0.5f), b = Filled({2, 3}, 1.0f - t, -0.25f);
        Buffer ya = Empty({n, 4}), yb = Empty({2, 3});
        kiln_tensor in[] = {a.tensor(), b.tensor()};
        kiln_tensor out[] = {ya.tensor(), yb.tensor()};
        if (kiln_onnx_model_run(model.get(), in, 2, out, 2) != KILN_OK || ya.values != Relu(a.values) ||
            yb.values != Relu(b.values)) {
          ++failures[t];
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures, std::vector<int>(4, 0));
}

}  // namespace onnx_api_tests
}  // namespace kiln::capi_test
