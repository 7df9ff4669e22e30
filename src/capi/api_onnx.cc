// The C API's ONNX models: loading, introspection, output shapes for given
// input shapes, and runs on the caller's buffers.
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>

#include <fmt/format.h>

#include "backend/backend.h"
#include "capi/c_boundary.h"
#include "capi/onnx_tensor_binding.h"
#include "core/precision.h"
#include "kiln/kiln.h"
#include "onnx/onnx_session.h"

struct kiln_onnx_model {
  std::unique_ptr<kiln::OnnxSession> session;
  // The session compiles on first use of new shapes and runs one call at a
  // time: every call that reaches it holds this.
  std::mutex mutex;
};

using kiln::Expected;
using kiln::InvalidArgument;
using kiln::Status;
using kiln::capi::Guard;

namespace {

kiln_onnx_options DefaultCOnnxOptions() {
  kiln_onnx_options o{};
  o.struct_size = sizeof(o);
  o.input_shapes = nullptr;
  o.num_input_shapes = 0;
  o.fixed_inputs = nullptr;
  o.num_fixed_inputs = 0;
  o.backend = nullptr;
  o.precision = nullptr;
  o.threads = 0;
  o.recompile_if_stale = 0;
  return o;
}

Expected<kiln::OnnxSessionOptions> FromCOnnxOptions(const kiln_onnx_options* given) {
  KILN_ASSIGN_OR_RETURN(kiln_onnx_options c,
                        kiln::capi::ReadOptions(given, DefaultCOnnxOptions(), "kiln_onnx_options"));
  kiln::OnnxSessionOptions o;
  if (c.input_shapes == nullptr && c.num_input_shapes > 0) {
    return InvalidArgument("options.input_shapes is NULL but num_input_shapes is {}", c.num_input_shapes);
  }
  for (size_t i = 0; i < c.num_input_shapes; ++i) {
    const kiln_input_shape& s = c.input_shapes[i];
    if (s.name == nullptr) return InvalidArgument("options.input_shapes[{}].name is NULL", i);
    if (s.rank > 0 && s.dims == nullptr) {
      return InvalidArgument("options.input_shapes[{}] ({}): dims is NULL but rank is {}", i, s.name, s.rank);
    }
    if (s.rank > 64)
      return InvalidArgument("options.input_shapes[{}] ({}): rank {} beyond 64", i, s.name, s.rank);
    std::vector<int64_t> dims(s.dims, s.dims + s.rank);
    for (size_t d = 0; d < dims.size(); ++d) {
      if (dims[d] < 0) {
        return InvalidArgument("options.input_shapes[{}] ({}): dims[{}] is {}", i, s.name, d, dims[d]);
      }
    }
    if (!o.input_shapes.emplace(s.name, std::move(dims)).second) {
      return InvalidArgument("options.input_shapes[{}]: {} is given twice", i, s.name);
    }
  }
  if (c.fixed_inputs == nullptr && c.num_fixed_inputs > 0) {
    return InvalidArgument("options.fixed_inputs is NULL but num_fixed_inputs is {}", c.num_fixed_inputs);
  }
  for (size_t i = 0; i < c.num_fixed_inputs; ++i) {
    const kiln_tensor& t = c.fixed_inputs[i];
    if (t.name == nullptr) return InvalidArgument("options.fixed_inputs[{}].name is NULL", i);
    const std::string label = fmt::format("options.fixed_inputs[{}] ({})", i, t.name);
    KILN_ASSIGN_OR_RETURN(kiln::TensorRef ref,
                          kiln::capi::CheckedTensor(t, label, kiln::capi::BufferUse::kRead));
    kiln::HostTensor copy(ref.type);
    std::memcpy(copy.bytes.data(), ref.data, copy.bytes.size());
    if (!o.fixed_inputs.emplace(t.name, std::move(copy)).second) {
      return InvalidArgument("options.fixed_inputs[{}]: {} is given twice", i, t.name);
    }
  }
  if (c.backend != nullptr) o.backend = c.backend;
  if (c.precision != nullptr) {
    auto precision = kiln::ParsePrecision(c.precision);
    if (!precision.ok()) return precision.status().WithContext("options.precision");
    o.precision = *precision;
  }
  if (c.threads < 0) return InvalidArgument("options.threads is {}", c.threads);
  o.threads = c.threads;
  o.recompile_if_stale = c.recompile_if_stale != 0;
  return o;
}

Status FillInfo(const std::vector<kiln::OnnxTensorInfo>& slots, size_t index, const char* what,
                kiln_tensor_info* info) {
  if (info == nullptr) return InvalidArgument("info (the output) is NULL");
  if (index >= slots.size()) {
    return kiln::OutOfRange("{} index {}: the model has {} {}s", what, index, slots.size(), what);
  }
  const kiln::OnnxTensorInfo& t = slots[index];
  std::optional<kiln_dtype> dtype = kiln::capi::ToCDType(t.dtype);
  if (!dtype)
    return kiln::Unsupported("{} {}: dtype {} has no kiln_dtype", what, t.name, kiln::DTypeName(t.dtype));
  info->name = t.name.c_str();
  info->dtype = *dtype;
  info->rank = t.dims.size();
  info->dims = t.dims.data();
  return Status::Ok();
}

// An input of an artifact's that was fixed when it was compiled, passed
// anyway: the session's error naming it (rather than a count that is off).
Status RefuseFixedWhenCompiled(const kiln::OnnxSession& session, const kiln_tensor* inputs, size_t num_inputs) {
  if (inputs == nullptr) return Status::Ok();  // BindTensors says what is wrong
  for (size_t i = 0; i < num_inputs; ++i) {
    if (inputs[i].name != nullptr) KILN_RETURN_IF_ERROR(session.RefuseInputFixedWhenCompiled(inputs[i].name));
  }
  return Status::Ok();
}

}  // namespace

extern "C" {

const char* kiln_dtype_name(kiln_dtype dtype) {
  auto d = kiln::capi::FromCDType(dtype, "dtype");
  return d.ok() ? kiln::DTypeName(*d) : "";
}

size_t kiln_dtype_size(kiln_dtype dtype) {
  auto d = kiln::capi::FromCDType(dtype, "dtype");
  return d.ok() ? kiln::ElementBytes(*d) : 0;
}

void kiln_onnx_options_init(kiln_onnx_options* options, size_t struct_size) {
  kiln::capi::WriteOptions(options, struct_size, DefaultCOnnxOptions());
}

kiln_status kiln_onnx_model_load(const char* path, const kiln_onnx_options* options,
                                 kiln_onnx_model** model) {
  return Guard("kiln_onnx_model_load", [&]() -> Status {
    if (path == nullptr) return InvalidArgument("path is NULL");
    if (model == nullptr) return InvalidArgument("model (the output) is NULL");
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return kiln::NotFound("{}: no such file or directory", path);
    KILN_ASSIGN_OR_RETURN(kiln::OnnxSessionOptions o, FromCOnnxOptions(options));
    // A model with symbolic input shapes compiles only on its first run: an
    // unknown backend is reported here rather than there.
    const kiln::BackendRegistry& backends = kiln::BackendRegistry::Get();
    if (backends.Find(o.backend) == nullptr) {
      return kiln::NotFound(
          "options.backend '{}': available backends are {} (others load as plugins: "
          "kiln_load_backend_plugin or KILN_BACKEND_PATH)",
          o.backend, backends.Names());
    }
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<kiln::OnnxSession> session, kiln::OnnxSession::Load(path, o));
    for (const auto* slots : {&session->inputs(), &session->outputs()}) {
      for (const kiln::OnnxTensorInfo& t : *slots) {
        if (!kiln::capi::ToCDType(t.dtype)) {
          return kiln::Unsupported("{}: {} has dtype {}, which the C API cannot pass", path, t.name,
                                   kiln::DTypeName(t.dtype));
        }
      }
    }
    auto handle = std::make_unique<kiln_onnx_model>();
    handle->session = std::move(session);
    *model = handle.release();
    return Status::Ok();
  });
}

void kiln_onnx_model_destroy(kiln_onnx_model* model) {
  delete model;
}

size_t kiln_onnx_model_num_inputs(const kiln_onnx_model* model) {
  return model != nullptr ? model->session->inputs().size() : 0;
}

size_t kiln_onnx_model_num_outputs(const kiln_onnx_model* model) {
  return model != nullptr ? model->session->outputs().size() : 0;
}

kiln_status kiln_onnx_model_input_info(const kiln_onnx_model* model, size_t index, kiln_tensor_info* info) {
  return Guard("kiln_onnx_model_input_info", [&]() -> Status {
    if (model == nullptr) return InvalidArgument("model is NULL");
    return FillInfo(model->session->inputs(), index, "input", info);
  });
}

kiln_status kiln_onnx_model_output_info(const kiln_onnx_model* model, size_t index, kiln_tensor_info* info) {
  return Guard("kiln_onnx_model_output_info", [&]() -> Status {
    if (model == nullptr) return InvalidArgument("model is NULL");
    return FillInfo(model->session->outputs(), index, "output", info);
  });
}

kiln_status kiln_onnx_model_output_shape(kiln_onnx_model* model, const kiln_tensor* inputs, size_t num_inputs,
                                         size_t output, int64_t* dims, size_t capacity, size_t* rank) {
  return Guard("kiln_onnx_model_output_shape", [&]() -> Status {
    if (model == nullptr) return InvalidArgument("model is NULL");
    if (rank == nullptr) return InvalidArgument("rank (the output) is NULL");
    if (dims == nullptr && capacity > 0) return InvalidArgument("dims is NULL but capacity is {}", capacity);
    kiln::OnnxSession& session = *model->session;
    if (output >= session.outputs().size()) {
      return kiln::OutOfRange("output index {}: the model has {} outputs", output, session.outputs().size());
    }
    KILN_RETURN_IF_ERROR(RefuseFixedWhenCompiled(session, inputs, num_inputs));
    KILN_ASSIGN_OR_RETURN(std::vector<kiln::TensorRef> refs,
                          kiln::capi::BindTensors(inputs, num_inputs, session.inputs(), "input",
                                                  kiln::capi::BufferUse::kTypesOnly));
    std::vector<kiln::TensorType> types;
    for (const kiln::TensorRef& r : refs) types.push_back(r.type);
    std::vector<kiln::TensorType> out_types;
    {
      std::lock_guard<std::mutex> lock(model->mutex);
      KILN_ASSIGN_OR_RETURN(out_types, session.OutputTypes(types));
    }
    const std::vector<int64_t>& out_dims = out_types.at(output).dims;
    if (dims != nullptr && out_dims.size() > capacity) {
      return kiln::OutOfRange("output {} has rank {}; dims holds {}", session.outputs()[output].name,
                              out_dims.size(), capacity);
    }
    *rank = out_dims.size();
    if (dims != nullptr) std::copy(out_dims.begin(), out_dims.end(), dims);
    return Status::Ok();
  });
}

kiln_status kiln_onnx_model_run(kiln_onnx_model* model, const kiln_tensor* inputs, size_t num_inputs,
                                kiln_tensor* outputs, size_t num_outputs) {
  return Guard("kiln_onnx_model_run", [&]() -> Status {
    if (model == nullptr) return InvalidArgument("model is NULL");
    kiln::OnnxSession& session = *model->session;
    KILN_RETURN_IF_ERROR(RefuseFixedWhenCompiled(session, inputs, num_inputs));
    KILN_ASSIGN_OR_RETURN(
        std::vector<kiln::TensorRef> in,
        kiln::capi::BindTensors(inputs, num_inputs, session.inputs(), "input", kiln::capi::BufferUse::kRead));
    KILN_ASSIGN_OR_RETURN(std::vector<kiln::TensorRef> out,
                          kiln::capi::BindTensors(outputs, num_outputs, session.outputs(), "output",
                                                  kiln::capi::BufferUse::kWrite));
    KILN_RETURN_IF_ERROR(kiln::capi::CheckNoOverlap(in, out, session.inputs(), session.outputs()));
    std::lock_guard<std::mutex> lock(model->mutex);
    // The session checks the input shapes against the model and each output
    // buffer's shape against what those inputs give, before running.
    return session.Run(in, out);
  });
}

}  // extern "C"
