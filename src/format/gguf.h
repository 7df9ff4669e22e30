// GGUF files (versions 2 and 3): metadata key/value pairs, tensor infos and
// memory-mapped tensor data. The reader validates every field it reads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/dtype.h"
#include "core/mapped_file.h"
#include "core/status.h"

namespace kiln {

enum class GgufType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};

const char* GgufTypeName(GgufType t);

// "GGUF" read as a little-endian uint32.
inline constexpr uint32_t kGgufMagic = 0x46554747;
// Tensor data alignment when general.alignment is absent.
inline constexpr uint64_t kGgufDefaultAlignment = 32;
// Limits the reader enforces: ggml's maximum tensor rank, and how deep
// arrays of arrays may nest.
inline constexpr uint32_t kGgufMaxDims = 4;
inline constexpr int kGgufMaxArrayDepth = 8;

// One metadata value: a scalar, a string, or an array of values (arrays may
// nest).
class GgufValue {
 public:
  GgufValue() = default;
  static GgufValue Int(GgufType type, int64_t v);    // any integer type or bool
  static GgufValue UInt(GgufType type, uint64_t v);  // u64 beyond int64 range
  static GgufValue Float(GgufType type, double v);   // f32 or f64
  static GgufValue String(std::string v);
  static GgufValue Array(GgufType element_type, std::vector<GgufValue> items);

  GgufType type() const { return type_; }
  bool is_array() const { return type_ == GgufType::kArray; }
  // For arrays: the declared element type.
  GgufType element_type() const { return element_type_; }

  // Conversions that succeed when the stored type fits: AsInt for any
  // integer or bool type whose value fits int64; AsFloat for floats and
  // integers; AsBool for bool; AsString for strings.
  std::optional<int64_t> AsInt() const;
  std::optional<uint64_t> AsUInt() const;
  std::optional<double> AsFloat() const;
  std::optional<bool> AsBool() const;
  const std::string* AsString() const;
  const std::vector<GgufValue>& items() const { return items_; }

  // A short human-readable rendering (arrays abbreviated).
  std::string ToString(size_t max_items = 8) const;

  // Same type (and element type for arrays) and same contents.
  bool operator==(const GgufValue& other) const;

 private:
  GgufType type_ = GgufType::kU8;
  GgufType element_type_ = GgufType::kU8;
  uint64_t bits_ = 0;  // integer payload (two's complement for signed)
  double float_ = 0;
  std::string string_;
  std::vector<GgufValue> items_;
};

struct GgufTensorInfo {
  std::string name;
  uint32_t ggml_type = 0;  // the raw type id in the file
  DType dtype = DType::kF32;
  // ggml order: dims[0] is the innermost (contiguous) dimension.
  std::vector<int64_t> dims;
  uint64_t offset = 0;  // relative to the start of the data section
  uint64_t nbytes = 0;
  const uint8_t* data = nullptr;  // points into the mapped file

  int64_t num_elements() const;
  // Row-major shape, outermost first (the reverse of dims), as PyTorch and
  // safetensors write it: a linear weight is [out_features, in_features].
  std::vector<int64_t> shape() const;
};

// ggml's type ids <-> kiln dtypes. Returns nullopt for ids kiln cannot read.
std::optional<DType> DTypeFromGgmlType(uint32_t ggml_type);
std::optional<uint32_t> GgmlTypeFromDType(DType dtype);
// ggml's name for a raw type id ("Q4_K", "F32"), or "type <n>".
std::string GgmlTypeName(uint32_t ggml_type);

class GgufFile {
 public:
  // Maps and parses `path`. Errors name the file, the field and the problem.
  static Expected<std::unique_ptr<GgufFile>> Open(const std::string& path);

  // Parses an image already in memory (tests and fuzzing); `name` is used in
  // messages. REQUIRES: data outlives the returned object.
  static Expected<std::unique_ptr<GgufFile>> Parse(const uint8_t* data, size_t size, const std::string& name);

  const std::string& path() const { return name_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  uint64_t file_size() const { return size_; }

  // Metadata in file order.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }
  const GgufValue* Find(std::string_view key) const;
  // Typed lookups: nullopt when absent or of another type.
  std::optional<int64_t> GetInt(std::string_view key) const;
  std::optional<double> GetFloat(std::string_view key) const;
  std::optional<bool> GetBool(std::string_view key) const;
  std::optional<std::string> GetString(std::string_view key) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* FindTensor(std::string_view name) const;

  // ggml's file_type (general.file_type) as a name such as "Q4_K_M", or "".
  std::string FileTypeName() const;

 private:
  GgufFile() = default;
  // Fills everything from base_/size_; errors lack the file name.
  Status ParseImage();

  std::string name_;
  std::unique_ptr<MappedFile> file_;  // null when parsed from memory
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::unordered_map<std::string, size_t> metadata_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
};

}  // namespace kiln
