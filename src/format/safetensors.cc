// safetensors reader: validates the JSON header against the file's bytes
// (lengths, dtypes, shapes, ranges, duplicates) before exposing any tensor.
#include "format/safetensors.h"
#include "core/shape_text.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

namespace kiln {
namespace {

using nlohmann::json;

// A header larger than this is not a model header (the reference
// implementation refuses them too); it bounds what the JSON parser builds.
constexpr uint64_t kMaxHeaderBytes = 100u << 20;

struct SafetensorsDType {
  const char* name;
  DType dtype;
};
constexpr SafetensorsDType kDTypes[] = {
    {"F64", DType::kF64},        {"F32", DType::kF32},        {"F16", DType::kF16}, {"BF16", DType::kBF16},
    {"F8_E4M3", DType::kF8E4M3}, {"F8_E5M2", DType::kF8E5M2}, {"I64", DType::kI64}, {"I32", DType::kI32},
    {"I16", DType::kI16},        {"I8", DType::kI8},          {"U8", DType::kU8},   {"BOOL", DType::kBool},
};
// Dtypes of the format that kiln does not read.
constexpr const char* kUnreadDTypes[] = {"U16", "U32", "U64", "F8_E8M0", "C64", "F4", "F6_E2M3", "F6_E3M2"};

// Strips nlohmann's "[json.exception.parse_error.101] " prefix.
std::string JsonErrorText(const std::exception& e) {
  std::string what = e.what();
  if (!what.empty() && what[0] == '[') {
    size_t close = what.find("] ");
    if (close != std::string::npos) return what.substr(close + 2);
  }
  return what;
}

// A non-negative JSON integer, or nullopt.
std::optional<uint64_t> UnsignedOf(const json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return static_cast<uint64_t>(v.get<int64_t>());
  return std::nullopt;
}

// Parses a safetensors header, recording duplicate keys (which nlohmann
// would silently merge) and refusing nesting deeper than the format has.
class HeaderParser {
 public:
  Expected<json> Parse(std::string_view text) {
    json result;
    try {
      result =
          json::parse(text.begin(), text.end(), [this](int depth, json::parse_event_t event, json& parsed) {
            return OnEvent(depth, event, parsed);
          });
    } catch (const json::exception& e) {
      return Corrupt("header: invalid JSON: {}", JsonErrorText(e));
    }
    if (!error_.empty()) return Corrupt("header: {}", error_);
    return result;
  }

 private:
  bool OnEvent(int depth, json::parse_event_t event, json& parsed) {
    using E = json::parse_event_t;
    if ((event == E::object_start || event == E::array_start) && depth >= 3) {
      Fail(fmt::format("entry '{}': nested deeper than the format allows", top_key_));
      return false;
    }
    if (event == E::object_start && depth == 1) field_keys_.clear();
    if (event == E::key && depth == 1) {
      top_key_ = parsed.get<std::string>();
      if (!top_keys_.insert(top_key_).second) Fail(fmt::format("entry '{}' appears twice", top_key_));
    }
    if (event == E::key && depth == 2) {
      std::string key = parsed.get<std::string>();
      if (!field_keys_.insert(key).second) {
        Fail(fmt::format("entry '{}': field '{}' appears twice", top_key_, key));
      }
    }
    return true;
  }

  void Fail(std::string message) {
    if (error_.empty()) error_ = std::move(message);
  }

  std::set<std::string> top_keys_;
  std::set<std::string> field_keys_;
  std::string top_key_;
  std::string error_;
};

Expected<SafetensorsTensor> TensorFromJson(const std::string& name, const json& entry, uint64_t data_size) {
  std::string what = fmt::format("tensor '{}'", name);
  if (name.empty()) return Corrupt("tensor with an empty name");
  if (!entry.is_object()) return Corrupt("{}: expected an object, got {}", what, entry.type_name());
  SafetensorsTensor t;
  t.name = name;

  auto dtype_it = entry.find("dtype");
  if (dtype_it == entry.end() || !dtype_it->is_string()) {
    return Corrupt("{}: missing string field 'dtype'", what);
  }
  std::string dtype_name = dtype_it->get<std::string>();
  auto dtype = DTypeFromSafetensorsName(dtype_name);
  if (!dtype) {
    for (const char* unread : kUnreadDTypes) {
      if (dtype_name == unread) return Unsupported("{}: dtype {} is not supported", what, dtype_name);
    }
    return Corrupt("{}: unknown dtype '{}'", what, dtype_name);
  }
  t.dtype = *dtype;

  auto shape_it = entry.find("shape");
  if (shape_it == entry.end() || !shape_it->is_array()) {
    return Corrupt("{}: missing array field 'shape'", what);
  }
  int64_t elements = 1;
  for (const json& d : *shape_it) {
    auto dim = UnsignedOf(d);
    if (!dim) {
      return Corrupt("{}: shape {} holds something other than a non-negative integer", what,
                     shape_it->dump());
    }
    if (*dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        __builtin_mul_overflow(elements, static_cast<int64_t>(*dim), &elements)) {
      return Corrupt("{}: shape {} overflows the element count", what, shape_it->dump());
    }
    t.shape.push_back(static_cast<int64_t>(*dim));
  }

  auto offsets_it = entry.find("data_offsets");
  if (offsets_it == entry.end() || !offsets_it->is_array() || offsets_it->size() != 2) {
    return Corrupt("{}: missing field 'data_offsets' of two integers", what);
  }
  auto begin = UnsignedOf((*offsets_it)[0]);
  auto end = UnsignedOf((*offsets_it)[1]);
  if (!begin || !end) {
    return Corrupt("{}: data_offsets {} are not non-negative integers", what, offsets_it->dump());
  }
  if (*begin > *end) return Corrupt("{}: data_offsets [{}, {}] end before they begin", what, *begin, *end);
  if (*end > data_size) {
    return Corrupt("{}: data offsets [{}, {}] beyond the end of the data ({} bytes)", what, *begin, *end,
                   data_size);
  }
  t.begin = *begin;
  t.end = *end;

  auto expected = DTypeBytes(t.dtype, static_cast<uint64_t>(elements));
  if (!expected) return Corrupt("{}: byte size of shape {} overflows", what, ShapeText(t.shape));
  if (*expected != t.nbytes()) {
    return Corrupt("{}: dtype {} x shape {} is {} bytes, but data_offsets [{}, {}] hold {}", what, dtype_name,
                   ShapeText(t.shape), *expected, t.begin, t.end, t.nbytes());
  }
  return t;
}

}  // namespace

std::optional<DType> DTypeFromSafetensorsName(std::string_view name) {
  for (const auto& d : kDTypes) {
    if (name == d.name) return d.dtype;
  }
  return std::nullopt;
}

std::optional<std::string_view> SafetensorsDTypeName(DType dtype) {
  for (const auto& d : kDTypes) {
    if (d.dtype == dtype) return d.name;
  }
  return std::nullopt;
}

int64_t SafetensorsTensor::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;  // the reader checked that this cannot overflow
  return n;
}

// ---- SafetensorsFile ----

Expected<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(auto mapped, MappedFile::Open(path));
  KILN_ASSIGN_OR_RETURN(auto file, Parse(mapped->data(), mapped->size(), path));
  file->file_ = std::move(mapped);
  return file;
}

Expected<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Parse(const uint8_t* data, size_t size,
                                                                  const std::string& name) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->name_ = name;
  f->base_ = data;
  f->size_ = size;
  Status status = f->ParseImage();
  if (!status.ok()) return status.WithContext(name);
  return f;
}

Status SafetensorsFile::ParseImage() {
  if (size_ < 8) return Corrupt("truncated: {} bytes, the header length alone takes 8", size_);
  uint64_t header_length = 0;
  std::memcpy(&header_length, base_, 8);
  if (header_length > size_ - 8) {
    return Corrupt("header length {} beyond the file end ({} bytes follow the length field)", header_length,
                   size_ - 8);
  }
  if (header_length > kMaxHeaderBytes) {
    return Corrupt("header length {} exceeds the limit of {} bytes", header_length, kMaxHeaderBytes);
  }
  std::string_view text(reinterpret_cast<const char*>(base_) + 8, header_length);
  if (text.empty() || text[0] != '{') return Corrupt("header does not start with '{{'");
  data_offset_ = 8 + header_length;
  uint64_t data_size = size_ - data_offset_;

  HeaderParser parser;
  KILN_ASSIGN_OR_RETURN(json header, parser.Parse(text));
  if (!header.is_object()) return Corrupt("header: expected a JSON object");

  for (const auto& [key, entry] : header.items()) {
    if (key == "__metadata__") {
      if (!entry.is_object()) return Corrupt("__metadata__: expected an object of strings");
      for (const auto& [mk, mv] : entry.items()) {
        if (!mv.is_string()) {
          return Corrupt("__metadata__ '{}': expected a string, got {}", mk, mv.type_name());
        }
        metadata_[mk] = mv.get<std::string>();
      }
      continue;
    }
    KILN_ASSIGN_OR_RETURN(SafetensorsTensor t, TensorFromJson(key, entry, data_size));
    t.data = base_ + data_offset_ + t.begin;
    index_.emplace(t.name, tensors_.size());
    tensors_.push_back(std::move(t));
  }

  std::vector<const SafetensorsTensor*> by_offset;
  for (const auto& t : tensors_) {
    if (t.nbytes() > 0) by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const SafetensorsTensor* a, const SafetensorsTensor* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const SafetensorsTensor* a = by_offset[i - 1];
    const SafetensorsTensor* b = by_offset[i];
    if (b->begin < a->end) {
      return Corrupt("tensors '{}' [{}, {}) and '{}' [{}, {}) overlap", a->name, a->begin, a->end, b->name,
                     b->begin, b->end);
    }
  }
  return Status::Ok();
}

const SafetensorsTensor* SafetensorsFile::Find(std::string_view name) const {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

// ---- SafetensorsModel ----

Expected<std::unique_ptr<SafetensorsModel>> SafetensorsModel::Open(const std::string& path) {
  namespace fs = std::filesystem;
  std::unique_ptr<SafetensorsModel> model(new SafetensorsModel());
  std::string index_path;
  std::string single_path;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    if (fs::exists(fs::path(path) / "model.safetensors.index.json", ec)) {
      index_path = (fs::path(path) / "model.safetensors.index.json").string();
    } else if (fs::exists(fs::path(path) / "model.safetensors", ec)) {
      single_path = (fs::path(path) / "model.safetensors").string();
    } else {
      return NotFound("{}: no model.safetensors or model.safetensors.index.json", path);
    }
  } else if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0) {
    index_path = path;
  } else {
    single_path = path;
  }

  if (!single_path.empty()) {
    KILN_ASSIGN_OR_RETURN(auto file, SafetensorsFile::Open(single_path));
    model->files_.push_back(std::move(file));
    KILN_RETURN_IF_ERROR(model->Index());
    return model;
  }

  KILN_ASSIGN_OR_RETURN(std::string text, ReadFileToString(index_path));
  json index;
  try {
    index = json::parse(text);
  } catch (const json::exception& e) {
    return Corrupt("{}: invalid JSON: {}", index_path, JsonErrorText(e));
  }
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
    return Corrupt("{}: missing object 'weight_map'", index_path);
  }
  const json& weight_map = index["weight_map"];
  std::map<std::string, size_t> shard_files;  // shard name -> index in files_
  for (const auto& [name, shard] : weight_map.items()) {
    if (!shard.is_string()) return Corrupt("{}: weight_map '{}': expected a file name", index_path, name);
    std::string shard_name = shard.get<std::string>();
    if (shard_name.empty() || shard_name == "." || shard_name == ".." ||
        shard_name.find('/') != std::string::npos || shard_name.find('\\') != std::string::npos) {
      return Corrupt("{}: weight_map '{}': shard '{}' is not a plain file name", index_path, name,
                     shard_name);
    }
    shard_files.emplace(shard_name, 0);
  }
  fs::path folder = fs::path(index_path).parent_path();
  for (auto& [shard_name, position] : shard_files) {
    KILN_ASSIGN_OR_RETURN(auto file, SafetensorsFile::Open((folder / shard_name).string()));
    position = model->files_.size();
    model->files_.push_back(std::move(file));
  }
  for (const auto& [name, shard] : weight_map.items()) {
    const SafetensorsFile& file = *model->files_[shard_files.at(shard.get<std::string>())];
    if (file.Find(name) == nullptr) {
      return NotFound("{}: tensor '{}' is not in its shard {}", index_path, name, file.path());
    }
  }
  KILN_RETURN_IF_ERROR(model->Index());
  return model;
}

Status SafetensorsModel::Index() {
  for (const auto& file : files_) {
    for (const auto& t : file->tensors()) {
      auto [it, inserted] = index_.emplace(t.name, tensors_.size());
      if (!inserted) {
        return Corrupt("tensor '{}' appears in both {} and {}", t.name, tensors_[it->second].file->path(),
                       file->path());
      }
      tensors_.push_back(Entry{&t, file.get()});
    }
  }
  std::sort(tensors_.begin(), tensors_.end(),
            [](const Entry& a, const Entry& b) { return a.tensor->name < b.tensor->name; });
  for (size_t i = 0; i < tensors_.size(); ++i) index_[tensors_[i].tensor->name] = i;
  return Status::Ok();
}

std::optional<SafetensorsModel::Entry> SafetensorsModel::Find(std::string_view name) const {
  auto it = index_.find(std::string(name));
  if (it == index_.end()) return std::nullopt;
  return tensors_[it->second];
}

}  // namespace kiln
