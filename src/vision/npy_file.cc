#include "vision/npy_file.h"

#include <cstring>
#include <regex>

#include "core/mapped_file.h"

namespace kiln {

Expected<HostTensor> ParseNpyFloat32(const uint8_t* data, size_t size) {
  static const uint8_t kMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (size < 10 || std::memcmp(data, kMagic, 6) != 0) return Corrupt("not a .npy file (no \\x93NUMPY signature)");
  const int major = data[6];
  size_t header_len = 0, offset = 0;
  if (major == 1) {
    header_len = data[8] | (data[9] << 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12) return Corrupt(".npy header is truncated");
    header_len = data[8] | (data[9] << 8) | (static_cast<size_t>(data[10]) << 16) | (static_cast<size_t>(data[11]) << 24);
    offset = 12;
  } else {
    return Unsupported(".npy format version {} is not supported", major);
  }
  if (header_len > size - offset) return Corrupt(".npy header is truncated");
  const std::string header(reinterpret_cast<const char*>(data + offset), header_len);
  std::smatch m;
  if (!std::regex_search(header, m, std::regex("'descr':\\s*'([^']*)'"))) return Corrupt(".npy header has no descr");
  if (m[1] != "<f4") return Unsupported(".npy dtype {} is not supported (float32, '<f4', is)", m[1].str());
  if (std::regex_search(header, std::regex("'fortran_order':\\s*True"))) {
    return Unsupported(".npy arrays in Fortran order are not supported");
  }
  if (!std::regex_search(header, m, std::regex("'shape':\\s*\\(([^)]*)\\)"))) {
    return Corrupt(".npy header has no shape");
  }
  TensorType type{DType::kF32, {}};
  const std::string shape = m[1];
  int64_t count = 1;
  for (size_t i = 0; i < shape.size();) {
    if (shape[i] < '0' || shape[i] > '9') {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < shape.size() && shape[j] >= '0' && shape[j] <= '9') ++j;
    if (j - i > 12) return Corrupt(".npy shape ({}) is too large", shape);
    const int64_t d = std::stoll(shape.substr(i, j - i));
    i = j;
    type.dims.push_back(d);
    if (d != 0 && count > (int64_t{1} << 40) / d) return Corrupt(".npy shape ({}) is too large", shape);
    count *= d;
  }
  const size_t body = offset + header_len;
  if (static_cast<uint64_t>(count) * 4 != size - body) {
    return Corrupt(".npy data is {} bytes, its shape ({}) needs {}", size - body, shape, count * 4);
  }
  HostTensor t(type);
  std::memcpy(t.bytes.data(), data + body, t.bytes.size());
  return t;
}

Expected<HostTensor> ReadNpyFloat32(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path));
  auto t = ParseNpyFloat32(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  if (!t.ok()) return t.status().WithContext(path);
  return t;
}

}  // namespace kiln
