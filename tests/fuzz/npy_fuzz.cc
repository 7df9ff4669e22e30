// Fuzzes the .npy reader (`kiln run`'s inputs), then checks what it
// promises of a file it accepts: the data holds exactly the shape's bytes,
// and writing the array back reads back the same.
#include <cstdint>
#include <string>

#include "core/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto a = kiln::ParseNpy(std::string(reinterpret_cast<const char*>(data), size));
  if (!a.ok()) return 0;
  uint64_t n = 1;
  for (int64_t d : a->dims) n *= static_cast<uint64_t>(d);
  auto bytes = kiln::DTypeBytes(a->dtype, n);
  if (!bytes || *bytes != a->data.size()) __builtin_trap();
  auto again = kiln::ParseNpy(kiln::NpyBytes(a->dtype, a->dims, a->data.data(), a->data.size()));
  if (!again.ok() || again->dims != a->dims || again->dtype != a->dtype || again->data != a->data) __builtin_trap();
  return 0;
}
