// Fuzzes the GGUF reader, then what a loader does with a file that parsed:
// model config, dequantizing every tensor, and a writer round trip that must
// give back the same metadata and tensors.
#include <cstdint>
#include <cstring>
#include <vector>

#include "format/gguf.h"
#include "format/gguf_writer.h"
#include "format/model_config.h"
#include "quant/dequantize.h"

namespace {

// Rewrites a parsed file with GgufWriter and checks that reading it back
// gives the same contents. Returns quietly for files the writer declines.
void CheckRoundTrip(const kiln::GgufFile& file) {
  // Huge alignments are legal but would make the rewrite allocate a lot.
  if (file.alignment() > 4096) return;
  kiln::GgufWriter writer(file.version());
  for (const auto& [key, value] : file.metadata()) {
    if (!writer.Set(key, value).ok()) return;  // e.g. general.alignment stored as another integer type
  }
  for (const auto& t : file.tensors()) {
    if (!writer.AddTensor(t.name, t.dtype, t.shape(), t.data, t.nbytes).ok()) return;
  }
  std::vector<uint8_t> image = writer.Serialize();
  auto again = kiln::GgufFile::Parse(image.data(), image.size(), "rewritten.gguf");
  if (!again.ok()) __builtin_trap();
  if ((*again)->metadata() != file.metadata()) __builtin_trap();
  if ((*again)->tensors().size() != file.tensors().size()) __builtin_trap();
  for (size_t i = 0; i < file.tensors().size(); ++i) {
    const auto& a = file.tensors()[i];
    const auto& b = (*again)->tensors()[i];
    if (a.name != b.name || a.dims != b.dims || a.ggml_type != b.ggml_type || a.nbytes != b.nbytes) {
      __builtin_trap();
    }
    if (a.nbytes > 0 && std::memcmp(a.data, b.data, a.nbytes) != 0) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = kiln::GgufFile::Parse(data, size, "fuzz.gguf");
  if (!file.ok()) return 0;
  for (const auto& entry : (*file)->metadata()) (void)entry.second.ToString();
  (void)(*file)->FileTypeName();
  auto config = kiln::ModelConfigFromGguf(**file);
  if (config.ok()) {
    (void)config->ParameterCount();
    (void)config->KvBytesPerToken(2);
  }
  // Every tensor's bytes lie inside the input, so this reads only valid memory.
  std::vector<float> values;
  for (const auto& t : (*file)->tensors()) {
    values.resize(static_cast<size_t>(t.num_elements()));
    if (!kiln::DequantizeRow(t.dtype, t.data, values.data(), t.num_elements()).ok()) __builtin_trap();
  }
  CheckRoundTrip(**file);
  return 0;
}
