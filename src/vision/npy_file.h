// Reading NumPy .npy files of float32 (little-endian, C order, format
// versions 1 to 3): the raw model outputs the vision commands accept in
// place of running a model, and test fixtures.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/status.h"
#include "onnx/onnx_session.h"

namespace kiln {

Expected<HostTensor> ParseNpyFloat32(const uint8_t* data, size_t size);
Expected<HostTensor> ReadNpyFloat32(const std::string& path);

}  // namespace kiln
