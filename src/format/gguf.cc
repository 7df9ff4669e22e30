// GGUF reader: parses the header, metadata and tensor infos of a mapped
// image, checking every length and offset against the bytes that remain.
#include "format/gguf.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/utf8.h"

namespace kiln {
namespace {

// Bytes the smallest possible entry of each kind takes, used to reject
// counts the remaining bytes cannot hold before anything is reserved.
constexpr uint64_t kMinMetadataBytes = 8 + 4 + 1;        // empty key, type, u8
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;  // empty name, n_dims, type, offset

// ggml's type names by id; "" marks ids that are not (or no longer) assigned.
constexpr std::array<const char*, 40> kGgmlTypeNames = {
    "F32",    "F16",   "Q4_0",  "Q4_1",   "",      "",      "Q5_0",    "Q5_1",   "Q8_0",    "Q8_1",
    "Q2_K",   "Q3_K",  "Q4_K",  "Q5_K",   "Q6_K",  "Q8_K",  "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S",
    "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS", "I8",    "I16",   "I32",     "I64",    "F64",     "IQ1_M",
    "BF16",   "",      "",      "",       "TQ1_0", "TQ2_0", "",        "",       "",        "MXFP4",
};

struct GgmlTypeMapping {
  uint32_t ggml_type;
  DType dtype;
};

constexpr GgmlTypeMapping kGgmlTypes[] = {
    {0, DType::kF32},   {1, DType::kF16},   {2, DType::kQ4_0},  {3, DType::kQ4_1},  {6, DType::kQ5_0},
    {7, DType::kQ5_1},  {8, DType::kQ8_0},  {9, DType::kQ8_1},  {10, DType::kQ2_K}, {11, DType::kQ3_K},
    {12, DType::kQ4_K}, {13, DType::kQ5_K}, {14, DType::kQ6_K}, {15, DType::kQ8_K}, {24, DType::kI8},
    {25, DType::kI16},  {26, DType::kI32},  {27, DType::kI64},  {28, DType::kF64},  {30, DType::kBF16},
    {20, DType::kIQ4_NL}, {23, DType::kIQ4_XS}, {16, DType::kIQ2_XXS}, {17, DType::kIQ2_XS},
    {22, DType::kIQ2_S},  {18, DType::kIQ3_XXS}, {21, DType::kIQ3_S},
};

// llama.cpp's general.file_type values (enum llama_ftype) by name.
struct FileTypeName {
  int64_t id;
  const char* name;
};
constexpr FileTypeName kFileTypeNames[] = {
    {0, "F32"},     {1, "F16"},     {2, "Q4_0"},       {3, "Q4_1"},    {7, "Q8_0"},     {8, "Q5_0"},
    {9, "Q5_1"},    {10, "Q2_K"},   {11, "Q3_K_S"},    {12, "Q3_K_M"}, {13, "Q3_K_L"},  {14, "Q4_K_S"},
    {15, "Q4_K_M"}, {16, "Q5_K_S"}, {17, "Q5_K_M"},    {18, "Q6_K"},   {19, "IQ2_XXS"}, {20, "IQ2_XS"},
    {21, "Q2_K_S"}, {22, "IQ3_XS"}, {23, "IQ3_XXS"},   {24, "IQ1_S"},  {25, "IQ4_NL"},  {26, "IQ3_S"},
    {27, "IQ3_M"},  {28, "IQ2_S"},  {29, "IQ2_M"},     {30, "IQ4_XS"}, {31, "IQ1_M"},   {32, "BF16"},
    {36, "TQ1_0"},  {37, "TQ2_0"},  {38, "MXFP4_MOE"},
};

bool IsUnsignedType(GgufType t) {
  return t == GgufType::kU8 || t == GgufType::kU16 || t == GgufType::kU32 || t == GgufType::kU64;
}
bool IsSignedType(GgufType t) {
  return t == GgufType::kI8 || t == GgufType::kI16 || t == GgufType::kI32 || t == GgufType::kI64;
}

// Size in the file of a scalar of type t, or 0 for strings and arrays.
uint64_t ScalarBytes(GgufType t) {
  switch (t) {
    case GgufType::kU8:
    case GgufType::kI8:
    case GgufType::kBool: return 1;
    case GgufType::kU16:
    case GgufType::kI16: return 2;
    case GgufType::kU32:
    case GgufType::kI32:
    case GgufType::kF32: return 4;
    case GgufType::kU64:
    case GgufType::kI64:
    case GgufType::kF64: return 8;
    case GgufType::kString:
    case GgufType::kArray: return 0;
  }
  return 0;
}

// The least bytes one value of type t takes: a string its length field, an
// array its element type and count.
uint64_t MinValueBytes(GgufType t) {
  if (t == GgufType::kString) return 8;
  if (t == GgufType::kArray) return 12;
  return ScalarBytes(t);
}

bool IsKnownType(uint32_t t) {
  return t <= static_cast<uint32_t>(GgufType::kF64);
}

// Reads a GGUF image front to back. Every read is bounds-checked; errors say
// what was being read and at which offset.
class GgufParser {
 public:
  GgufParser(const uint8_t* data, uint64_t size) : data_(data), size_(size) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  template <typename T>
  Status Read(T* out, std::string_view what) {
    if (remaining() < sizeof(T)) {
      return Corrupt("{} at offset {}: needs {} bytes, file ends after {}", what, pos_, sizeof(T),
                     remaining());
    }
    std::memcpy(out, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return Status::Ok();
  }

  Status ReadString(std::string* out, std::string_view what) {
    uint64_t start = pos_;
    uint64_t length = 0;
    KILN_RETURN_IF_ERROR(Read(&length, what));
    if (length > remaining()) {
      return Corrupt("{} at offset {}: string length {} beyond file end ({} bytes left)", what, start, length,
                     remaining());
    }
    out->assign(reinterpret_cast<const char*>(data_ + pos_), length);
    pos_ += length;
    size_t bad = FirstInvalidUtf8(*out);
    if (bad != std::string::npos) {
      return Corrupt("{} at offset {}: invalid UTF-8 at byte {} of the string", what, start, bad);
    }
    return Status::Ok();
  }

  Expected<GgufValue> ReadValue(GgufType type, int depth, std::string_view what) {
    switch (type) {
      case GgufType::kU8: return ReadInt<uint8_t>(type, what);
      case GgufType::kI8: return ReadInt<int8_t>(type, what);
      case GgufType::kU16: return ReadInt<uint16_t>(type, what);
      case GgufType::kI16: return ReadInt<int16_t>(type, what);
      case GgufType::kU32: return ReadInt<uint32_t>(type, what);
      case GgufType::kI32: return ReadInt<int32_t>(type, what);
      case GgufType::kI64: return ReadInt<int64_t>(type, what);
      case GgufType::kU64: {
        uint64_t v = 0;
        KILN_RETURN_IF_ERROR(Read(&v, what));
        return GgufValue::UInt(type, v);
      }
      case GgufType::kBool: {
        uint64_t start = pos_;
        uint8_t v = 0;
        KILN_RETURN_IF_ERROR(Read(&v, what));
        if (v > 1) return Corrupt("{} at offset {}: bool value {} is neither 0 nor 1", what, start, v);
        return GgufValue::Int(type, v);
      }
      case GgufType::kF32: {
        float v = 0;
        KILN_RETURN_IF_ERROR(Read(&v, what));
        return GgufValue::Float(type, v);
      }
      case GgufType::kF64: {
        double v = 0;
        KILN_RETURN_IF_ERROR(Read(&v, what));
        return GgufValue::Float(type, v);
      }
      case GgufType::kString: {
        std::string s;
        KILN_RETURN_IF_ERROR(ReadString(&s, what));
        return GgufValue::String(std::move(s));
      }
      case GgufType::kArray: return ReadArray(depth, what);
    }
    return Corrupt("{}: unknown value type {}", what, static_cast<uint32_t>(type));
  }

 private:
  template <typename T>
  Expected<GgufValue> ReadInt(GgufType type, std::string_view what) {
    T v{};
    KILN_RETURN_IF_ERROR(Read(&v, what));
    return GgufValue::Int(type, static_cast<int64_t>(v));
  }

  Expected<GgufValue> ReadArray(int depth, std::string_view what) {
    uint64_t start = pos_;
    if (depth >= kGgufMaxArrayDepth) {
      return Corrupt("{} at offset {}: arrays nested deeper than {}", what, start, kGgufMaxArrayDepth);
    }
    uint32_t raw_type = 0;
    uint64_t count = 0;
    KILN_RETURN_IF_ERROR(Read(&raw_type, what));
    if (!IsKnownType(raw_type)) {
      return Corrupt("{} at offset {}: unknown array element type {}", what, start, raw_type);
    }
    KILN_RETURN_IF_ERROR(Read(&count, what));
    auto element_type = static_cast<GgufType>(raw_type);
    if (count > remaining() / MinValueBytes(element_type)) {
      return Corrupt("{} at offset {}: array of {} {} values cannot fit in the {} bytes left", what, start,
                     count, GgufTypeName(element_type), remaining());
    }
    std::vector<GgufValue> items;
    items.reserve(count);
    for (uint64_t i = 0; i < count; ++i) {
      KILN_ASSIGN_OR_RETURN(GgufValue item, ReadValue(element_type, depth + 1, what));
      items.push_back(std::move(item));
    }
    return GgufValue::Array(element_type, std::move(items));
  }

  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

std::string Quoted(std::string_view s) {
  return fmt::format("'{}'", s);
}

}  // namespace

const char* GgufTypeName(GgufType t) {
  switch (t) {
    case GgufType::kU8: return "u8";
    case GgufType::kI8: return "i8";
    case GgufType::kU16: return "u16";
    case GgufType::kI16: return "i16";
    case GgufType::kU32: return "u32";
    case GgufType::kI32: return "i32";
    case GgufType::kF32: return "f32";
    case GgufType::kBool: return "bool";
    case GgufType::kString: return "string";
    case GgufType::kArray: return "array";
    case GgufType::kU64: return "u64";
    case GgufType::kI64: return "i64";
    case GgufType::kF64: return "f64";
  }
  return "unknown";
}

// ---- GgufValue ----

GgufValue GgufValue::Int(GgufType type, int64_t v) {
  GgufValue r;
  r.type_ = type;
  r.bits_ = type == GgufType::kBool ? (v != 0 ? 1 : 0) : static_cast<uint64_t>(v);
  return r;
}

GgufValue GgufValue::UInt(GgufType type, uint64_t v) {
  GgufValue r;
  r.type_ = type;
  r.bits_ = v;
  return r;
}

GgufValue GgufValue::Float(GgufType type, double v) {
  GgufValue r;
  r.type_ = type;
  if (type == GgufType::kF32) {
    // Rounded to what the file can hold; beyond float's range is infinite
    // (a plain cast would be undefined).
    constexpr double kMax = std::numeric_limits<float>::max();
    v = v > kMax ? HUGE_VAL : v < -kMax ? -HUGE_VAL : static_cast<double>(static_cast<float>(v));
  }
  r.float_ = v;
  return r;
}

GgufValue GgufValue::String(std::string v) {
  GgufValue r;
  r.type_ = GgufType::kString;
  r.string_ = std::move(v);
  return r;
}

GgufValue GgufValue::Array(GgufType element_type, std::vector<GgufValue> items) {
  GgufValue r;
  r.type_ = GgufType::kArray;
  r.element_type_ = element_type;
  r.items_ = std::move(items);
  return r;
}

std::optional<int64_t> GgufValue::AsInt() const {
  if (IsSignedType(type_)) return static_cast<int64_t>(bits_);
  if (IsUnsignedType(type_) || type_ == GgufType::kBool) {
    if (bits_ > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(bits_);
  }
  return std::nullopt;
}

std::optional<uint64_t> GgufValue::AsUInt() const {
  if (IsUnsignedType(type_) || type_ == GgufType::kBool) return bits_;
  if (IsSignedType(type_)) {
    auto v = static_cast<int64_t>(bits_);
    if (v < 0) return std::nullopt;
    return static_cast<uint64_t>(v);
  }
  return std::nullopt;
}

std::optional<double> GgufValue::AsFloat() const {
  if (type_ == GgufType::kF32 || type_ == GgufType::kF64) return float_;
  if (IsSignedType(type_)) return static_cast<double>(static_cast<int64_t>(bits_));
  if (IsUnsignedType(type_)) return static_cast<double>(bits_);
  return std::nullopt;
}

std::optional<bool> GgufValue::AsBool() const {
  if (type_ != GgufType::kBool) return std::nullopt;
  return bits_ != 0;
}

const std::string* GgufValue::AsString() const {
  return type_ == GgufType::kString ? &string_ : nullptr;
}

bool GgufValue::operator==(const GgufValue& other) const {
  if (type_ != other.type_) return false;
  switch (type_) {
    case GgufType::kString: return string_ == other.string_;
    case GgufType::kArray: return element_type_ == other.element_type_ && items_ == other.items_;
    case GgufType::kF32:
    case GgufType::kF64:
      // Bitwise, so that NaN payloads compare equal to themselves after a round trip.
      return std::memcmp(&float_, &other.float_, sizeof(double)) == 0;
    default: return bits_ == other.bits_;
  }
}

std::string GgufValue::ToString(size_t max_items) const {
  switch (type_) {
    case GgufType::kString: {
      constexpr size_t kMaxChars = 80;
      if (string_.size() <= kMaxChars) return fmt::format("\"{}\"", string_);
      std::string_view head(string_.data(), kMaxChars);
      head = head.substr(0, CompleteUtf8Prefix(head));
      return fmt::format("\"{}...\" ({} bytes)", head, string_.size());
    }
    case GgufType::kArray: {
      std::string out = "[";
      size_t shown = std::min(max_items, items_.size());
      for (size_t i = 0; i < shown; ++i) {
        if (i > 0) out += ", ";
        out += items_[i].ToString(max_items);
      }
      if (shown < items_.size()) {
        out += fmt::format("{}... ({} {} items)", shown > 0 ? ", " : "", items_.size(),
                           GgufTypeName(element_type_));
      }
      out += "]";
      return out;
    }
    case GgufType::kBool: return bits_ ? "true" : "false";
    case GgufType::kF32:
    case GgufType::kF64: return fmt::format("{}", float_);
    default:
      if (IsSignedType(type_)) return fmt::format("{}", static_cast<int64_t>(bits_));
      return fmt::format("{}", bits_);
  }
}

// ---- tensor infos and type ids ----

int64_t GgufTensorInfo::num_elements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;  // the reader checked that this cannot overflow
  return n;
}

std::vector<int64_t> GgufTensorInfo::shape() const {
  return std::vector<int64_t>(dims.rbegin(), dims.rend());
}

std::optional<DType> DTypeFromGgmlType(uint32_t ggml_type) {
  for (const auto& m : kGgmlTypes) {
    if (m.ggml_type == ggml_type) return m.dtype;
  }
  return std::nullopt;
}

std::optional<uint32_t> GgmlTypeFromDType(DType dtype) {
  for (const auto& m : kGgmlTypes) {
    if (m.dtype == dtype) return m.ggml_type;
  }
  return std::nullopt;
}

std::string GgmlTypeName(uint32_t ggml_type) {
  if (ggml_type < kGgmlTypeNames.size() && kGgmlTypeNames[ggml_type][0] != '\0') {
    return kGgmlTypeNames[ggml_type];
  }
  return fmt::format("type {}", ggml_type);
}

// ---- GgufFile ----

Expected<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(auto mapped, MappedFile::Open(path));
  const uint8_t* data = mapped->data();
  size_t size = mapped->size();
  KILN_ASSIGN_OR_RETURN(auto file, Parse(data, size, path));
  file->file_ = std::move(mapped);
  return file;
}

Expected<std::unique_ptr<GgufFile>> GgufFile::Parse(const uint8_t* data, size_t size,
                                                    const std::string& name) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->name_ = name;
  f->base_ = data;
  f->size_ = size;
  Status status = f->ParseImage();
  if (!status.ok()) return status.WithContext(name);
  return f;
}

Status GgufFile::ParseImage() {
  const uint8_t* data = base_;
  uint64_t size = size_;
  GgufParser p(data, size);
  constexpr uint64_t kHeaderBytes = 4 + 4 + 8 + 8;
  if (size < kHeaderBytes) {
    return Corrupt("truncated: {} bytes, a GGUF header needs {}", size, kHeaderBytes);
  }
  uint32_t magic = 0;
  KILN_RETURN_IF_ERROR(p.Read(&magic, "magic"));
  if (magic != kGgufMagic) {
    std::string shown;
    for (int i = 0; i < 4; ++i) {
      char c = static_cast<char>(data[i]);
      shown += (c >= 0x20 && c < 0x7f) ? std::string(1, c) : fmt::format("\\x{:02x}", data[i]);
    }
    return Corrupt("wrong magic '{}': not a GGUF file (expected 'GGUF')", shown);
  }
  KILN_RETURN_IF_ERROR(p.Read(&version_, "version"));
  if (version_ == 1) {
    return Unsupported(
        "GGUF version 1 is not supported (an obsolete format with 32-bit counts); "
        "convert the model again with a current llama.cpp");
  }
  if (version_ == 0x02000000u || version_ == 0x03000000u) {
    return Unsupported("big-endian GGUF files are not supported");
  }
  if (version_ != 2 && version_ != 3) {
    return Unsupported("GGUF version {} is not supported (versions 2 and 3 are)", version_);
  }
  uint64_t n_tensors = 0, n_kv = 0;
  KILN_RETURN_IF_ERROR(p.Read(&n_tensors, "tensor count"));
  KILN_RETURN_IF_ERROR(p.Read(&n_kv, "metadata count"));
  if (n_kv > p.remaining() / kMinMetadataBytes) {
    return Corrupt("metadata count {} cannot fit in the {} bytes left", n_kv, p.remaining());
  }
  if (n_tensors > p.remaining() / kMinTensorInfoBytes) {
    return Corrupt("tensor count {} cannot fit in the {} bytes left", n_tensors, p.remaining());
  }

  // Metadata.
  metadata_.reserve(n_kv);
  for (uint64_t i = 0; i < n_kv; ++i) {
    uint64_t entry_offset = p.pos();
    std::string key;
    KILN_RETURN_IF_ERROR(p.ReadString(&key, fmt::format("metadata entry {} key", i)));
    std::string what = fmt::format("metadata {}", Quoted(key));
    if (key.empty()) return Corrupt("metadata entry {} at offset {}: empty key", i, entry_offset);
    if (metadata_index_.count(key)) return Corrupt("{}: duplicate key", what);
    uint32_t raw_type = 0;
    uint64_t type_offset = p.pos();
    KILN_RETURN_IF_ERROR(p.Read(&raw_type, what));
    if (!IsKnownType(raw_type)) {
      return Corrupt("{} at offset {}: unknown value type {}", what, type_offset, raw_type);
    }
    KILN_ASSIGN_OR_RETURN(GgufValue value, p.ReadValue(static_cast<GgufType>(raw_type), 0, what));
    metadata_index_.emplace(key, metadata_.size());
    metadata_.emplace_back(std::move(key), std::move(value));
  }

  // general.alignment.
  if (const GgufValue* v = Find("general.alignment")) {
    auto a = v->AsUInt();
    if (!a || v->is_array()) {
      return Corrupt("metadata 'general.alignment': expected an unsigned integer, got {}",
                     GgufTypeName(v->type()));
    }
    if (*a == 0 || (*a & (*a - 1)) != 0 || *a > (1u << 30)) {
      return Corrupt("metadata 'general.alignment': {} is not a power of two up to 2^30", *a);
    }
    alignment_ = *a;
  }

  // Tensor infos.
  tensors_.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    uint64_t entry_offset = p.pos();
    GgufTensorInfo t;
    KILN_RETURN_IF_ERROR(p.ReadString(&t.name, fmt::format("tensor info {} name", i)));
    std::string what = fmt::format("tensor {}", Quoted(t.name));
    if (t.name.empty()) return Corrupt("tensor info {} at offset {}: empty name", i, entry_offset);
    if (tensor_index_.count(t.name)) return Corrupt("{}: duplicate tensor name", what);
    uint32_t n_dims = 0;
    KILN_RETURN_IF_ERROR(p.Read(&n_dims, what));
    if (n_dims > kGgufMaxDims) {
      return Corrupt("{}: {} dimensions, at most {} are allowed", what, n_dims, kGgufMaxDims);
    }
    int64_t elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t dim = 0;
      KILN_RETURN_IF_ERROR(p.Read(&dim, what));
      if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          __builtin_mul_overflow(elements, static_cast<int64_t>(dim), &elements)) {
        return Corrupt("{}: dimension {} ({}) makes the element count overflow", what, d, dim);
      }
      t.dims.push_back(static_cast<int64_t>(dim));
    }
    KILN_RETURN_IF_ERROR(p.Read(&t.ggml_type, what));
    KILN_RETURN_IF_ERROR(p.Read(&t.offset, what));
    auto dtype = DTypeFromGgmlType(t.ggml_type);
    if (!dtype) {
      bool known = t.ggml_type < kGgmlTypeNames.size() && kGgmlTypeNames[t.ggml_type][0] != '\0';
      if (known) {
        return Unsupported("{}: ggml type {} ({}) is not supported", what, GgmlTypeName(t.ggml_type),
                           t.ggml_type);
      }
      return Corrupt("{}: unknown ggml type {}", what, t.ggml_type);
    }
    t.dtype = *dtype;
    int block = DTypeBlockSize(t.dtype);
    int64_t row = t.dims.empty() ? 1 : t.dims[0];
    if (row % block != 0) {
      return Corrupt("{}: row of {} elements is not a multiple of {}'s block size {}", what, row,
                     GgmlTypeName(t.ggml_type), block);
    }
    auto nbytes = DTypeBytes(t.dtype, static_cast<uint64_t>(elements));
    if (!nbytes) {
      return Corrupt("{}: byte size of {} {} elements overflows", what, elements, DTypeName(t.dtype));
    }
    t.nbytes = *nbytes;
    if (t.offset % alignment_ != 0) {
      return Corrupt("{}: data offset {} is not a multiple of the alignment {}", what, t.offset, alignment_);
    }
    tensor_index_.emplace(t.name, tensors_.size());
    tensors_.push_back(std::move(t));
  }

  // Tensor data: starts at the next multiple of the alignment.
  uint64_t header_end = p.pos();
  data_offset_ = (header_end + alignment_ - 1) / alignment_ * alignment_;
  uint64_t data_size = data_offset_ <= size ? size - data_offset_ : 0;
  for (auto& t : tensors_) {
    if (t.offset > data_size || t.nbytes > data_size - t.offset) {
      return Corrupt("tensor {}: data [{}, {}) beyond the end of the data section ({} bytes)", Quoted(t.name),
                     t.offset, t.offset + std::min(t.nbytes, std::numeric_limits<uint64_t>::max() - t.offset),
                     data_size);
    }
    t.data = data + data_offset_ + t.offset;
  }
  std::vector<const GgufTensorInfo*> by_offset;
  for (const auto& t : tensors_) {
    if (t.nbytes > 0) by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const GgufTensorInfo* a, const GgufTensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const GgufTensorInfo* a = by_offset[i - 1];
    const GgufTensorInfo* b = by_offset[i];
    if (b->offset < a->offset + a->nbytes) {
      return Corrupt("tensors {} [{}, {}) and {} [{}, {}) overlap", Quoted(a->name), a->offset,
                     a->offset + a->nbytes, Quoted(b->name), b->offset, b->offset + b->nbytes);
    }
  }
  return Status::Ok();
}

const GgufValue* GgufFile::Find(std::string_view key) const {
  auto it = metadata_index_.find(std::string(key));
  return it == metadata_index_.end() ? nullptr : &metadata_[it->second].second;
}

std::optional<int64_t> GgufFile::GetInt(std::string_view key) const {
  const GgufValue* v = Find(key);
  return v ? v->AsInt() : std::nullopt;
}

std::optional<double> GgufFile::GetFloat(std::string_view key) const {
  const GgufValue* v = Find(key);
  return v ? v->AsFloat() : std::nullopt;
}

std::optional<bool> GgufFile::GetBool(std::string_view key) const {
  const GgufValue* v = Find(key);
  return v ? v->AsBool() : std::nullopt;
}

std::optional<std::string> GgufFile::GetString(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr || v->AsString() == nullptr) return std::nullopt;
  return *v->AsString();
}

const GgufTensorInfo* GgufFile::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(std::string(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::string GgufFile::FileTypeName() const {
  auto id = GetInt("general.file_type");
  if (!id) return "";
  for (const auto& entry : kFileTypeNames) {
    if (entry.id == *id) return entry.name;
  }
  return fmt::format("file type {}", *id);
}

}  // namespace kiln
