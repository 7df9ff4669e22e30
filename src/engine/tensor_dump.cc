// The --dump writer: .npy files and their index.
#include "engine/tensor_dump.h"

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "backend/backend.h"
#include "quant/dequantize.h"

namespace kiln {
namespace {

std::string SafeFileName(const std::string& name) {
  std::string out;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
              c == '_' || c == '-';
    out.push_back(ok ? c : '_');
  }
  return out;
}

Status WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  f.close();
  if (!f) return IoError("{}: could not write {} bytes", path, bytes.size());
  return Status::Ok();
}

}  // namespace

std::string NpyFloat32(const float* data, int64_t rows, int64_t cols) {
  std::string header =
      fmt::format("{{'descr': '<f4', 'fortran_order': False, 'shape': ({}, {}), }}", rows, cols);
  // Magic (6) + version (2) + header length (2) + header, padded with
  // spaces and a newline to a multiple of 64 bytes.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::string out("\x93NUMPY\x01\x00", 8);
  out.push_back(static_cast<char>(header.size() & 0xff));
  out.push_back(static_cast<char>(header.size() >> 8));
  out += header;
  out.append(reinterpret_cast<const char*>(data), static_cast<size_t>(rows * cols) * sizeof(float));
  return out;
}

TensorDumper::TensorDumper(std::string dir) : dir_(std::move(dir)) {
  index_ = {{"format", "kiln-dump-1"}, {"passes", nlohmann::json::array()}};
  fn_ = [this](const std::string& name, const BoundValue& value, int64_t rows) { Write(name, value, rows); };
}

Expected<std::unique_ptr<TensorDumper>> TensorDumper::Create(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return IoError("dump folder {}: {}", dir, ec.message());
  return std::unique_ptr<TensorDumper>(new TensorDumper(dir));
}

void TensorDumper::BeginPass(const std::vector<int32_t>& token_ids, const std::vector<int32_t>& positions,
                             const std::vector<int32_t>& seq_of_token) {
  value_in_pass_ = 0;
  current_ = {{"pass", pass_},
              {"token_ids", token_ids},
              {"positions", positions},
              {"seq_of_token", seq_of_token},
              {"values", nlohmann::json::array()}};
}

void TensorDumper::Write(const std::string& name, const BoundValue& value, int64_t rows) {
  if (value.data == nullptr || rows <= 0 || value.cols <= 0 || value.rows == RowSpace::kNone) return;
  std::vector<float> f32(static_cast<size_t>(rows * value.cols));
  size_t row_bytes = DTypeBytes(value.dtype, static_cast<uint64_t>(value.row_stride)).value_or(0);
  for (int64_t r = 0; r < rows; ++r) {
    Status s = DequantizeRow(value.dtype, value.data + static_cast<size_t>(r) * row_bytes,
                             f32.data() + r * value.cols, value.cols);
    if (!s.ok()) {
      if (error_.ok()) error_ = s.WithContext(fmt::format("dump of {}", name));
      return;
    }
  }
  std::string file = fmt::format("pass{:04d}_{:04d}_{}.npy", pass_, value_in_pass_++, SafeFileName(name));
  Status s =
      WriteFile((std::filesystem::path(dir_) / file).string(), NpyFloat32(f32.data(), rows, value.cols));
  if (!s.ok()) {
    if (error_.ok()) error_ = s;
    return;
  }
  current_["values"].push_back({{"name", name},
                                {"file", file},
                                {"shape", {rows, value.cols}},
                                {"dtype", "f32"},
                                {"source_dtype", DTypeName(value.dtype)}});
}

Status TensorDumper::EndPass() {
  index_["passes"].push_back(std::move(current_));
  current_ = nlohmann::json();
  ++pass_;
  Status s = WriteFile((std::filesystem::path(dir_) / "index.json").string(), index_.dump(1) + "\n");
  Status first = error_.ok() ? s : error_;
  error_ = Status::Ok();
  return first;
}

}  // namespace kiln
