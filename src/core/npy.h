// NumPy .npy files (format versions 1.0-3.0): what `kiln run` reads its
// inputs from and writes its outputs to. The reader takes untrusted bytes:
// every field of the header is checked and the data size must match.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace kiln {

struct NpyArray {
  DType dtype = DType::kF32;
  std::vector<int64_t> dims;  // {} is a scalar
  std::string data;           // row-major, little-endian
};

// Parses a whole .npy file. Refuses Fortran order, big-endian and object
// dtypes, and element types kiln does not have.
Expected<NpyArray> ParseNpy(const std::string& bytes);
Expected<NpyArray> ReadNpy(const std::string& path);

// The bytes of a .npy file (version 1.0) holding `data`.
std::string NpyBytes(DType dtype, const std::vector<int64_t>& dims, const void* data, size_t bytes);
Status WriteNpy(const std::string& path, DType dtype, const std::vector<int64_t>& dims, const void* data,
                size_t bytes);

}  // namespace kiln
