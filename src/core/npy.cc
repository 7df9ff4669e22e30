// .npy reading and writing.
#include "core/npy.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace kiln {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMaxHeader = 1 << 16;

struct DescrName {
  const char* descr;
  DType dtype;
};
constexpr DescrName kDescrs[] = {
    {"<f4", DType::kF32}, {"<f2", DType::kF16}, {"<f8", DType::kF64}, {"<i8", DType::kI64}, {"<i4", DType::kI32},
    {"<i2", DType::kI16}, {"|i1", DType::kI8},  {"|u1", DType::kU8},  {"|b1", DType::kBool},
};

// The value of `key` in the header's dict text: what follows "'key':".
Expected<std::string> Field(const std::string& header, const std::string& key) {
  const std::string k = "'" + key + "'";
  size_t at = header.find(k);
  if (at == std::string::npos) return InvalidArgument("npy: header has no '{}'", key);
  at = header.find(':', at + k.size());
  if (at == std::string::npos) return InvalidArgument("npy: header field '{}' has no value", key);
  ++at;
  while (at < header.size() && header[at] == ' ') ++at;
  size_t end = at;
  if (at < header.size() && header[at] == '(') {
    end = header.find(')', at);
    if (end == std::string::npos) return InvalidArgument("npy: shape tuple is not closed");
    return header.substr(at, end - at + 1);
  }
  if (at < header.size() && header[at] == '\'') {
    end = header.find('\'', at + 1);
    if (end == std::string::npos) return InvalidArgument("npy: '{}' string is not closed", key);
    return header.substr(at + 1, end - at - 1);
  }
  while (end < header.size() && header[end] != ',' && header[end] != '}') ++end;
  return header.substr(at, end - at);
}

}  // namespace

Expected<NpyArray> ParseNpy(const std::string& bytes) {
  if (bytes.size() < 10 || std::memcmp(bytes.data(), kMagic, 6) != 0) return InvalidArgument("npy: not a .npy file (bad magic)");
  const int major = static_cast<uint8_t>(bytes[6]);
  size_t header_len = 0, offset = 0;
  if (major == 1) {
    header_len = static_cast<uint8_t>(bytes[8]) | (static_cast<size_t>(static_cast<uint8_t>(bytes[9])) << 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return InvalidArgument("npy: truncated header");
    header_len = 0;
    for (int i = 0; i < 4; ++i) header_len |= static_cast<size_t>(static_cast<uint8_t>(bytes[8 + i])) << (8 * i);
    offset = 12;
  } else {
    return InvalidArgument("npy: format version {} is not supported", major);
  }
  if (header_len > kMaxHeader || offset + header_len > bytes.size()) return InvalidArgument("npy: truncated header");
  const std::string header = bytes.substr(offset, header_len);
  NpyArray a;
  KILN_ASSIGN_OR_RETURN(std::string descr, Field(header, "descr"));
  bool found = false;
  for (const DescrName& d : kDescrs) {
    // '<' and '|' both mean little-endian for one-byte types; '=' is native (little-endian here).
    std::string alt = d.descr;
    if (descr == d.descr || (descr.size() == 3 && (descr[0] == '=' || descr[0] == '<' || descr[0] == '|') &&
                             descr.substr(1) == alt.substr(1))) {
      a.dtype = d.dtype;
      found = true;
      break;
    }
  }
  if (!found) return InvalidArgument("npy: dtype '{}' is not supported (f4, f2, f8, i8, i4, i2, i1, u1, b1)", descr);
  KILN_ASSIGN_OR_RETURN(std::string fortran, Field(header, "fortran_order"));
  if (fortran.find("True") != std::string::npos) return InvalidArgument("npy: Fortran order is not supported");
  KILN_ASSIGN_OR_RETURN(std::string shape, Field(header, "shape"));
  if (shape.size() < 2 || shape.front() != '(' || shape.back() != ')') return InvalidArgument("npy: bad shape '{}'", shape);
  std::string inner = shape.substr(1, shape.size() - 2);
  std::stringstream ss(inner);
  std::string part;
  uint64_t count = 1;
  while (std::getline(ss, part, ',')) {
    size_t b = part.find_first_not_of(' '), e = part.find_last_not_of(' ');
    if (b == std::string::npos) continue;  // "(3,)" ends with an empty part
    part = part.substr(b, e - b + 1);
    if (part.empty() || part.size() > 12 || part.find_first_not_of("0123456789") != std::string::npos) {
      return InvalidArgument("npy: bad dimension '{}'", part);
    }
    const int64_t d = std::stoll(part);
    a.dims.push_back(d);
    if (d != 0 && count > (uint64_t{1} << 40) / static_cast<uint64_t>(d)) return InvalidArgument("npy: shape too large");
    count *= static_cast<uint64_t>(d);
    if (a.dims.size() > 16) return InvalidArgument("npy: more than 16 dimensions");
  }
  auto data_bytes = DTypeBytes(a.dtype, count);
  if (!data_bytes) return InvalidArgument("npy: shape too large");
  const size_t data_at = offset + header_len;
  if (bytes.size() - data_at != *data_bytes) {
    return InvalidArgument("npy: {} data bytes for shape ({}) of {}, expected {}", bytes.size() - data_at,
                           fmt::join(a.dims, ","), DTypeName(a.dtype), *data_bytes);
  }
  a.data = bytes.substr(data_at);
  return a;
}

Expected<NpyArray> ReadNpy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return NotFound("{}: cannot open", path);
  std::stringstream ss;
  ss << f.rdbuf();
  auto a = ParseNpy(ss.str());
  if (!a.ok()) return a.status().WithContext(path);
  return a;
}

std::string NpyBytes(DType dtype, const std::vector<int64_t>& dims, const void* data, size_t bytes) {
  const char* descr = "<f4";
  for (const DescrName& d : kDescrs) {
    if (d.dtype == dtype) descr = d.descr;
  }
  std::string shape = "(";
  for (int64_t d : dims) shape += fmt::format("{},", d);
  if (dims.size() > 1) shape.pop_back();
  shape += ")";
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", descr, shape);
  // Magic (6) + version (2) + length (2) + header + '\n', padded to 64 bytes.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::string out(kMagic, 6);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>((header.size() >> 8) & 0xff);
  out += header;
  out.append(static_cast<const char*>(data), bytes);
  return out;
}

Status WriteNpy(const std::string& path, DType dtype, const std::vector<int64_t>& dims, const void* data, size_t bytes) {
  std::ofstream f(path, std::ios::binary);
  if (!f) return InvalidArgument("{}: cannot write", path);
  const std::string b = NpyBytes(dtype, dims, data, bytes);
  f.write(b.data(), static_cast<std::streamsize>(b.size()));
  if (!f) return InvalidArgument("{}: write failed", path);
  return Status::Ok();
}

}  // namespace kiln
