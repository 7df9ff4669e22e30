// GGUF serialization and the atomic temp-file-then-rename write.
#include "format/gguf_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/utf8.h"

namespace kiln {
namespace {

template <typename T>
void Append(std::string& out, T v) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));
  out.append(bytes, sizeof(T));
}

void AppendString(std::string& out, const std::string& s) {
  Append<uint64_t>(out, s.size());
  out += s;
}

void AppendValue(std::string& out, const GgufValue& v) {
  switch (v.type()) {
    case GgufType::kU8: Append(out, static_cast<uint8_t>(*v.AsUInt())); break;
    case GgufType::kI8: Append(out, static_cast<int8_t>(*v.AsInt())); break;
    case GgufType::kU16: Append(out, static_cast<uint16_t>(*v.AsUInt())); break;
    case GgufType::kI16: Append(out, static_cast<int16_t>(*v.AsInt())); break;
    case GgufType::kU32: Append(out, static_cast<uint32_t>(*v.AsUInt())); break;
    case GgufType::kI32: Append(out, static_cast<int32_t>(*v.AsInt())); break;
    case GgufType::kU64: Append(out, *v.AsUInt()); break;
    case GgufType::kI64: Append(out, *v.AsInt()); break;
    case GgufType::kF32: Append(out, static_cast<float>(*v.AsFloat())); break;
    case GgufType::kF64: Append(out, *v.AsFloat()); break;
    case GgufType::kBool: Append<uint8_t>(out, *v.AsBool() ? 1 : 0); break;
    case GgufType::kString: AppendString(out, *v.AsString()); break;
    case GgufType::kArray:
      Append(out, static_cast<uint32_t>(v.element_type()));
      Append<uint64_t>(out, v.items().size());
      for (const GgufValue& item : v.items()) AppendValue(out, item);
      break;
  }
}

// Checks that a value can be written and read back: every array item has
// the declared element type, strings are UTF-8, integers fit their type.
Status CheckValue(const GgufValue& v, int depth) {
  switch (v.type()) {
    case GgufType::kString:
      if (!IsValidUtf8(*v.AsString())) return InvalidArgument("string value is not valid UTF-8");
      return Status::Ok();
    case GgufType::kArray:
      if (depth >= kGgufMaxArrayDepth) {
        return InvalidArgument("arrays nested deeper than {}", kGgufMaxArrayDepth);
      }
      for (size_t i = 0; i < v.items().size(); ++i) {
        if (v.items()[i].type() != v.element_type()) {
          return InvalidArgument("array item {} is {}, the array holds {}", i,
                                 GgufTypeName(v.items()[i].type()), GgufTypeName(v.element_type()));
        }
        KILN_RETURN_IF_ERROR(CheckValue(v.items()[i], depth + 1));
      }
      return Status::Ok();
    default: return Status::Ok();
  }
}

Status WriteAll(int fd, const void* data, uint64_t size, const std::string& path) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd, p, std::min<uint64_t>(size, 1u << 30));
    if (n < 0) {
      if (errno == EINTR) continue;
      return IoError("{}: write failed: {}", path, std::strerror(errno));
    }
    p += n;
    size -= static_cast<uint64_t>(n);
  }
  return Status::Ok();
}

uint64_t AlignUp(uint64_t v, uint64_t alignment) {
  return (v + alignment - 1) / alignment * alignment;
}

}  // namespace

GgufWriter::GgufWriter(uint32_t version) : version_(version) {}

Status GgufWriter::Set(const std::string& key, GgufValue value) {
  if (key.empty()) return InvalidArgument("gguf metadata: empty key");
  if (!IsValidUtf8(key)) return InvalidArgument("gguf metadata: key is not valid UTF-8");
  Status checked = CheckValue(value, 0);
  if (!checked.ok()) return checked.WithContext(fmt::format("gguf metadata '{}'", key));
  if (key == "general.alignment") {
    auto a = value.AsUInt();
    if (value.type() != GgufType::kU32 || !a || *a == 0 || (*a & (*a - 1)) != 0) {
      return InvalidArgument("gguf metadata 'general.alignment': must be a u32 power of two");
    }
    alignment_ = *a;
  }
  for (auto& [k, v] : metadata_) {
    if (k == key) {
      v = std::move(value);
      return Status::Ok();
    }
  }
  metadata_.emplace_back(key, std::move(value));
  return Status::Ok();
}

Status GgufWriter::SetString(const std::string& key, std::string value) {
  return Set(key, GgufValue::String(std::move(value)));
}
Status GgufWriter::SetU32(const std::string& key, uint32_t value) {
  return Set(key, GgufValue::UInt(GgufType::kU32, value));
}
Status GgufWriter::SetI32(const std::string& key, int32_t value) {
  return Set(key, GgufValue::Int(GgufType::kI32, value));
}
Status GgufWriter::SetU64(const std::string& key, uint64_t value) {
  return Set(key, GgufValue::UInt(GgufType::kU64, value));
}
Status GgufWriter::SetF32(const std::string& key, float value) {
  return Set(key, GgufValue::Float(GgufType::kF32, value));
}
Status GgufWriter::SetBool(const std::string& key, bool value) {
  return Set(key, GgufValue::Int(GgufType::kBool, value ? 1 : 0));
}
Status GgufWriter::SetStringArray(const std::string& key, const std::vector<std::string>& values) {
  std::vector<GgufValue> items;
  items.reserve(values.size());
  for (const auto& s : values) items.push_back(GgufValue::String(s));
  return Set(key, GgufValue::Array(GgufType::kString, std::move(items)));
}

Status GgufWriter::SetAlignment(uint32_t alignment) {
  return Set("general.alignment", GgufValue::UInt(GgufType::kU32, alignment));
}

Status GgufWriter::AddTensor(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
                             const void* data, uint64_t nbytes) {
  std::string what = fmt::format("gguf tensor '{}'", name);
  if (name.empty() || !IsValidUtf8(name)) {
    return InvalidArgument("gguf tensor: name empty or not valid UTF-8");
  }
  for (const auto& t : tensors_) {
    if (t.name == name) return InvalidArgument("{}: added twice", what);
  }
  auto ggml_type = GgmlTypeFromDType(dtype);
  if (!ggml_type) return Unsupported("{}: dtype {} has no ggml type", what, DTypeName(dtype));
  if (shape.size() > kGgufMaxDims) {
    return InvalidArgument("{}: {} dimensions, at most {}", what, shape.size(), kGgufMaxDims);
  }
  int64_t elements = 1;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(elements, d, &elements)) {
      return InvalidArgument("{}: bad shape dimension {}", what, d);
    }
  }
  int64_t row = shape.empty() ? 1 : shape.back();
  if (row % DTypeBlockSize(dtype) != 0) {
    return InvalidArgument("{}: row of {} elements is not a multiple of {}'s block size {}", what, row,
                           DTypeName(dtype), DTypeBlockSize(dtype));
  }
  auto expected = DTypeBytes(dtype, static_cast<uint64_t>(elements));
  if (!expected || *expected != nbytes) {
    return InvalidArgument("{}: {} bytes given, {} {} elements take {}", what, nbytes, elements,
                           DTypeName(dtype), expected ? *expected : 0);
  }
  tensors_.push_back(Tensor{name, *ggml_type, std::vector<int64_t>(shape.rbegin(), shape.rend()),
                            static_cast<const uint8_t*>(data), nbytes});
  return Status::Ok();
}

Status GgufWriter::AddTensor(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
                             std::vector<uint8_t> bytes) {
  auto owned = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  KILN_RETURN_IF_ERROR(AddTensor(name, dtype, shape, owned->data(), owned->size()));
  owned_.push_back(std::move(owned));
  return Status::Ok();
}

std::vector<uint64_t> GgufWriter::DataOffsets() const {
  std::vector<uint64_t> offsets;
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    offsets.push_back(offset);
    offset = AlignUp(offset + t.nbytes, alignment_);
  }
  return offsets;
}

std::string GgufWriter::Header(const std::vector<uint64_t>& offsets) const {
  std::string out;
  Append<uint32_t>(out, kGgufMagic);
  Append<uint32_t>(out, version_);
  Append<uint64_t>(out, tensors_.size());
  Append<uint64_t>(out, metadata_.size());
  for (const auto& [key, value] : metadata_) {
    AppendString(out, key);
    Append(out, static_cast<uint32_t>(value.type()));
    AppendValue(out, value);
  }
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const Tensor& t = tensors_[i];
    AppendString(out, t.name);
    Append<uint32_t>(out, static_cast<uint32_t>(t.dims.size()));
    for (int64_t d : t.dims) Append<uint64_t>(out, static_cast<uint64_t>(d));
    Append<uint32_t>(out, t.ggml_type);
    Append<uint64_t>(out, offsets[i]);
  }
  out.resize(AlignUp(out.size(), alignment_), '\0');
  return out;
}

std::vector<uint8_t> GgufWriter::Serialize() const {
  std::vector<uint64_t> offsets = DataOffsets();
  std::string header = Header(offsets);
  std::vector<uint8_t> out(header.begin(), header.end());
  for (size_t i = 0; i < tensors_.size(); ++i) {
    out.resize(header.size() + offsets[i], 0);
    out.insert(out.end(), tensors_[i].data, tensors_[i].data + tensors_[i].nbytes);
  }
  return out;
}

Status GgufWriter::Write(const std::string& path) const {
  // Beside the target, so that the rename stays within one file system.
  std::string tmp = path + ".tmp-XXXXXX";
  int fd = ::mkstemp(tmp.data());
  if (fd < 0) return IoError("{}: cannot create a temporary file beside it: {}", path, std::strerror(errno));
  auto fail = [&](Status s) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return s;
  };
  ::fchmod(fd, 0644);

  std::vector<uint64_t> offsets = DataOffsets();
  std::string header = Header(offsets);
  if (Status s = WriteAll(fd, header.data(), header.size(), tmp); !s.ok()) return fail(s);
  uint64_t written = 0;  // within the data section
  static const uint8_t kZeros[256] = {};
  for (size_t i = 0; i < tensors_.size(); ++i) {
    while (written < offsets[i]) {
      uint64_t pad = std::min<uint64_t>(offsets[i] - written, sizeof(kZeros));
      if (Status s = WriteAll(fd, kZeros, pad, tmp); !s.ok()) return fail(s);
      written += pad;
    }
    if (Status s = WriteAll(fd, tensors_[i].data, tensors_[i].nbytes, tmp); !s.ok()) return fail(s);
    written += tensors_[i].nbytes;
  }
  if (::fsync(fd) != 0) return fail(IoError("{}: fsync failed: {}", tmp, std::strerror(errno)));
  if (::close(fd) != 0) {
    ::unlink(tmp.c_str());
    return IoError("{}: close failed: {}", tmp, std::strerror(errno));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return IoError("{}: cannot rename the temporary file into place: {}", path, std::strerror(err));
  }
  // Make the rename itself durable.
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::string dir = parent.empty() ? "." : parent.string();
  int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
  return Status::Ok();
}

}  // namespace kiln
