// Writes GGUF files (version 3 by default): metadata of any type and tensors
// at the alignment, atomically (a temporary file in the same folder, fsync,
// rename), so a reader never sees a half-written model.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "format/gguf.h"

namespace kiln {

class GgufWriter {
 public:
  // REQUIRES: version is 2 or 3 (the two differ only in what readers accept).
  explicit GgufWriter(uint32_t version = 3);

  // Sets `key` to `value`, replacing an earlier value of the same key (and
  // keeping its position). Setting "general.alignment" changes the alignment.
  Status Set(const std::string& key, GgufValue value);

  // Shorthands for the common scalar types.
  Status SetString(const std::string& key, std::string value);
  Status SetU32(const std::string& key, uint32_t value);
  Status SetI32(const std::string& key, int32_t value);
  Status SetU64(const std::string& key, uint64_t value);
  Status SetF32(const std::string& key, float value);
  Status SetBool(const std::string& key, bool value);
  Status SetStringArray(const std::string& key, const std::vector<std::string>& values);

  // Tensor data alignment (a power of two); written as general.alignment
  // when it differs from the default 32.
  Status SetAlignment(uint32_t alignment);

  // Adds a tensor of row-major `shape` (outermost first, as Weight::shape;
  // the file stores the reverse). `data` must hold exactly the bytes the
  // dtype and shape imply and must stay valid until Write returns.
  Status AddTensor(const std::string& name, DType dtype, const std::vector<int64_t>& shape, const void* data,
                   uint64_t nbytes);
  // As above, the writer keeping `bytes` itself.
  Status AddTensor(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
                   std::vector<uint8_t> bytes);

  // Writes the file atomically: `path` either keeps its old content or has
  // the complete new one.
  Status Write(const std::string& path) const;

  // The whole file image in memory (tests, fuzzing seeds).
  std::vector<uint8_t> Serialize() const;

 private:
  struct Tensor {
    std::string name;
    uint32_t ggml_type;
    std::vector<int64_t> dims;  // ggml order
    const uint8_t* data;
    uint64_t nbytes;
  };

  // Each tensor's offset within the data section at the current alignment.
  std::vector<uint64_t> DataOffsets() const;
  // Everything before the data section, padded to the alignment.
  std::string Header(const std::vector<uint64_t>& offsets) const;

  uint32_t version_;
  uint64_t alignment_ = kGgufDefaultAlignment;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<Tensor> tensors_;
  std::vector<std::shared_ptr<std::vector<uint8_t>>> owned_;
};

}  // namespace kiln
