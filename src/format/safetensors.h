// safetensors files: a JSON header naming each tensor's dtype, shape and
// byte range, then the raw little-endian data, memory-mapped. Single files
// and sharded models (model.safetensors.index.json) alike.
#pragma once

#include <cstdint>
#include <map>
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

// safetensors' dtype names ("F32", "BF16", "F8_E4M3", "BOOL", ...) <-> kiln
// dtypes. nullopt for names kiln does not read and for block dtypes.
std::optional<DType> DTypeFromSafetensorsName(std::string_view name);
std::optional<std::string_view> SafetensorsDTypeName(DType dtype);

struct SafetensorsTensor {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;  // row-major, outermost first
  uint64_t begin = 0;          // byte range within the data section
  uint64_t end = 0;
  const uint8_t* data = nullptr;  // points into the mapped file

  uint64_t nbytes() const { return end - begin; }
  int64_t num_elements() const;
};

class SafetensorsFile {
 public:
  // Maps and parses `path`. Errors name the file, the tensor or field, and
  // the problem.
  static Expected<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);

  // Parses an image already in memory (tests and fuzzing); `name` is used in
  // messages. REQUIRES: data outlives the returned object.
  static Expected<std::unique_ptr<SafetensorsFile>> Parse(const uint8_t* data, size_t size,
                                                          const std::string& name);

  const std::string& path() const { return name_; }
  // Where the data section starts: 8 + the header length.
  uint64_t data_offset() const { return data_offset_; }
  uint64_t file_size() const { return size_; }

  // The "__metadata__" string map ({"format": "pt"} in PyTorch's files).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Tensors sorted by name.
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  // nullptr when absent.
  const SafetensorsTensor* Find(std::string_view name) const;

 private:
  SafetensorsFile() = default;
  // Fills everything from base_/size_; errors lack the file name.
  Status ParseImage();

  std::string name_;
  std::unique_ptr<MappedFile> file_;  // null when parsed from memory
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  uint64_t data_offset_ = 0;
  std::map<std::string, std::string> metadata_;
  std::vector<SafetensorsTensor> tensors_;
  std::unordered_map<std::string, size_t> index_;
};

// All tensors of a model: one .safetensors file, or the shards a
// model.safetensors.index.json names in its "weight_map".
class SafetensorsModel {
 public:
  // `path` is a .safetensors file, an index .json, or a folder holding
  // model.safetensors.index.json or model.safetensors. Every tensor the index
  // names must be in the shard it names; no name may appear twice.
  static Expected<std::unique_ptr<SafetensorsModel>> Open(const std::string& path);

  struct Entry {
    const SafetensorsTensor* tensor;
    const SafetensorsFile* file;
  };

  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }
  // Every tensor of every shard, sorted by name.
  const std::vector<Entry>& tensors() const { return tensors_; }
  // nullopt when absent.
  std::optional<Entry> Find(std::string_view name) const;

 private:
  SafetensorsModel() = default;
  Status Index();

  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::vector<Entry> tensors_;
  std::unordered_map<std::string, size_t> index_;
};

}  // namespace kiln
