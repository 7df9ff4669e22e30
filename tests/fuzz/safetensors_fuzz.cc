// Fuzzes the safetensors reader, then converts every tensor it accepted to
// float32 as the weight store does.
#include <cstdint>
#include <vector>

#include "format/safetensors.h"
#include "quant/dequantize.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = kiln::SafetensorsFile::Parse(data, size, "fuzz.safetensors");
  if (!file.ok()) return 0;
  std::vector<float> values;
  for (const auto& t : (*file)->tensors()) {
    if (t.nbytes() > size) __builtin_trap();  // the reader promised ranges inside the file
    values.resize(static_cast<size_t>(t.num_elements()));
    if (!kiln::DequantizeRow(t.dtype, t.data, values.data(), t.num_elements()).ok()) __builtin_trap();
    if ((*file)->Find(t.name) != &t) __builtin_trap();
  }
  return 0;
}
