#include "onnx/onnx_tensor_reader.h"
#include "core/shape_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace kiln {
namespace {

namespace fs = std::filesystem;

// Appends each of `values` narrowed to `width` bytes (little-endian), as
// int32_data holds int8/uint8/int16/bool/float16/bfloat16 elements.
void AppendNarrowed(const std::vector<int32_t>& values, size_t width, std::string* out) {
  out->resize(values.size() * width);
  char* p = out->data();
  for (int32_t v : values) {
    uint32_t bits = static_cast<uint32_t>(v);
    std::memcpy(p, &bits, width);  // little-endian host: the low bytes first
    p += width;
  }
}

template <typename T>
void AppendValues(const std::vector<T>& values, std::string* out) {
  out->resize(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(out->data(), values.data(), out->size());
}

// The data of a tensor stored in its typed fields; `count` is how many
// values the field holds, `field` its name.
Status ReadTypedFields(const onnx_proto::Tensor& proto, DType dtype, std::string* out, int64_t* count,
                       const char** field) {
  switch (dtype) {
    case DType::kF32:
      *field = "float_data";
      *count = static_cast<int64_t>(proto.float_data.size());
      AppendValues(proto.float_data, out);
      return Status::Ok();
    case DType::kF64:
      *field = "double_data";
      *count = static_cast<int64_t>(proto.double_data.size());
      AppendValues(proto.double_data, out);
      return Status::Ok();
    case DType::kI64:
      *field = "int64_data";
      *count = static_cast<int64_t>(proto.int64_data.size());
      AppendValues(proto.int64_data, out);
      return Status::Ok();
    case DType::kI32:
    case DType::kI16:
    case DType::kI8:
    case DType::kU8:
    case DType::kBool:
    case DType::kF16:
    case DType::kBF16: {
      *field = "int32_data";
      *count = static_cast<int64_t>(proto.int32_data.size());
      AppendNarrowed(proto.int32_data, *DTypeBytes(dtype, 1), out);
      return Status::Ok();
    }
    default: return Internal("no typed field for {}", DTypeName(dtype));
  }
}

Expected<uint64_t> ParseExternalNumber(const std::string& what, const std::string& key,
                                       const std::string& text) {
  uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size()) {
    return Corrupt("{}: external data {} '{}' is not a non-negative integer", what, key, text);
  }
  return v;
}

// True when `path` (canonical) lies inside `dir` (canonical).
bool IsInside(const fs::path& path, const fs::path& dir) {
  auto p = path.begin();
  for (auto d = dir.begin(); d != dir.end(); ++d, ++p) {
    if (d->empty()) continue;  // a trailing separator
    if (p == path.end() || *p != *d) return false;
  }
  return true;
}

Status ReadExternalData(const onnx_proto::Tensor& proto, const std::string& what, uint64_t expected_bytes,
                        OnnxReadContext* ctx, SharedBytes* out) {
  std::string location;
  uint64_t offset = 0;
  std::optional<uint64_t> length;
  for (const onnx_proto::StringStringEntry& entry : proto.external_data) {
    if (entry.key == "location") {
      location = entry.value;
    } else if (entry.key == "offset") {
      KILN_ASSIGN_OR_RETURN(offset, ParseExternalNumber(what, "offset", entry.value));
    } else if (entry.key == "length") {
      KILN_ASSIGN_OR_RETURN(length, ParseExternalNumber(what, "length", entry.value));
    }
    // "checksum" and unknown keys are not needed to read the bytes.
  }
  if (location.empty()) return Corrupt("{} has external data without a location", what);
  if (location.find('\0') != std::string::npos) {
    return Corrupt("{}: external data location has a NUL byte in it", what);
  }
  if (length && *length != expected_bytes) {
    return Corrupt("{}: external data length {} does not match its {} bytes ({} of {})", what, *length,
                   expected_bytes, ShapeText(proto.dims), DTypeName(*DTypeFromOnnx(proto.data_type)));
  }
  ctx->external_files.insert(location);
  if (ctx->options->external_data) {
    KILN_ASSIGN_OR_RETURN(std::span<const uint8_t> file, ctx->options->external_data(location));
    if (offset > file.size() || expected_bytes > file.size() - offset) {
      return Corrupt("{}: external data at offset {} and length {} lies beyond the end of '{}' ({} bytes)",
                     what, offset, expected_bytes, location, file.size());
    }
    const uint8_t* at = file.data() + offset;
    if (ctx->options->external_data_keeper != nullptr && reinterpret_cast<uintptr_t>(at) % 64 == 0) {
      *out = SharedBytes(ctx->options->external_data_keeper, at, expected_bytes);
    } else {
      *out = SharedBytes(std::string(reinterpret_cast<const char*>(at), expected_bytes));
    }
    return Status::Ok();
  }
  if (ctx->base_dir.empty()) {
    return InvalidArgument(
        "{} has external data ('{}'), which needs the model's folder: read the model from a file", what,
        location);
  }
  if (fs::path(location).is_absolute()) {
    return InvalidArgument(
        "{}: external data location '{}' is an absolute path; it must be relative to the model's "
        "folder",
        what, location);
  }
  std::error_code ec;
  fs::path dir = fs::canonical(ctx->base_dir, ec);
  if (ec) return IoError("{}: the model's folder '{}': {}", what, ctx->base_dir, ec.message());
  fs::path file = fs::weakly_canonical(dir / location, ec);
  if (ec || !IsInside(file, dir)) {
    return InvalidArgument("{}: external data location '{}' leaves the model's folder", what, location);
  }
  if (length && *length != expected_bytes) {
    return Corrupt("{}: external data length {} does not match its {} bytes ({} of {})", what, *length,
                   expected_bytes, ShapeText(proto.dims), DTypeName(*DTypeFromOnnx(proto.data_type)));
  }
  uint64_t file_size = fs::file_size(file, ec);
  if (ec) return NotFound("{}: external data file '{}': {}", what, location, ec.message());
  if (offset > file_size || expected_bytes > file_size - offset) {
    return Corrupt("{}: external data at offset {} and length {} lies beyond the end of '{}' ({} bytes)",
                   what, offset, expected_bytes, location, file_size);
  }
  if (expected_bytes > ctx->options->limits.max_external_bytes -
                           std::min(ctx->external_bytes, ctx->options->limits.max_external_bytes)) {
    return ResourceExhausted("{}: external data would exceed the limit of {} bytes read from external files",
                             what, ctx->options->limits.max_external_bytes);
  }
  ctx->external_bytes += expected_bytes;
  std::ifstream in(file, std::ios::binary);
  if (!in) return IoError("{}: cannot open external data file '{}'", what, location);
  in.seekg(static_cast<std::streamoff>(offset));
  std::string bytes(expected_bytes, '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(expected_bytes));
  if (!in)
    return IoError("{}: reading {} bytes at offset {} of '{}' failed", what, expected_bytes, offset,
                   location);
  *out = SharedBytes(std::move(bytes));
  return Status::Ok();
}

}  // namespace

Expected<OnnxTensor> ReadOnnxTensor(const onnx_proto::Tensor& proto, const std::string& what,
                                    OnnxReadContext* ctx) {
  OnnxTensor tensor;
  tensor.name = proto.name;
  std::optional<DType> dtype = DTypeFromOnnx(proto.data_type);
  if (!dtype) {
    return Unsupported("{} has element type {}, which kiln does not read", what,
                       OnnxTypeName(proto.data_type));
  }
  tensor.dtype = *dtype;
  if (proto.has_segment) return Unsupported("{} is stored in segments, which kiln does not read", what);

  const int64_t max_elements = ctx->options->limits.max_tensor_elements;
  tensor.dims = proto.dims;
  bool empty = false;
  for (int64_t d : tensor.dims) {
    if (d < 0) return Corrupt("{} has a negative dimension in its shape {}", what, ShapeText(tensor.dims));
    if (d == 0) empty = true;
  }
  int64_t elements = empty ? 0 : 1;
  for (int64_t d : tensor.dims) {
    if (empty) break;
    if (__builtin_mul_overflow(elements, d, &elements) || elements > max_elements) {
      return ResourceExhausted("{} of shape {} has more than {} elements, the limit", what,
                               ShapeText(tensor.dims), max_elements);
    }
  }
  const uint64_t expected_bytes = *DTypeBytes(tensor.dtype, static_cast<uint64_t>(elements));

  if (proto.data_location == 1 /* EXTERNAL */) {
    KILN_RETURN_IF_ERROR(ReadExternalData(proto, what, expected_bytes, ctx, &tensor.data));
    return tensor;
  }
  if (proto.has_raw_data) {
    if (proto.raw_data.size() != expected_bytes) {
      return Corrupt("{} holds {} bytes of raw data, but its shape {} of {} needs {}", what,
                     proto.raw_data.size(), ShapeText(tensor.dims), DTypeName(tensor.dtype), expected_bytes);
    }
    tensor.data = SharedBytes(std::string(proto.raw_data));
    return tensor;
  }
  int64_t count = 0;
  const char* field = "";
  std::string values;
  KILN_RETURN_IF_ERROR(ReadTypedFields(proto, tensor.dtype, &values, &count, &field));
  tensor.data = SharedBytes(std::move(values));
  if (count != elements) {
    return Corrupt("{} holds {} values in {}, but its shape {} needs {}", what, count, field,
                   ShapeText(tensor.dims), elements);
  }
  return tensor;
}

}  // namespace kiln
