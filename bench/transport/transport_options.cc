#include "transport_options.h"

#include <charconv>
#include <limits>

#include "core/byte_size.h"

namespace kiln::transport {
namespace {

std::vector<std::string_view> SplitCommas(std::string_view text) {
  std::vector<std::string_view> items;
  if (text.empty()) return items;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    items.push_back(
        text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return items;
}

Expected<int64_t> ParsePositive(std::string_view text, std::string_view what) {
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value <= 0) {
    return InvalidArgument("'{}' is not a positive integer ({})", text, what);
  }
  return value;
}

}  // namespace

TransportOptions DefaultTransportOptions() {
  TransportOptions o;
  for (int64_t bytes = int64_t{1} << 10; bytes <= int64_t{64} << 20; bytes *= 4) {
    o.message_sizes.push_back(bytes);
  }
  o.hidden_sizes = {896, 3584, 8192};
  o.rows = {1, 4, 16, 64, 256, 512};
  // Published shapes (config.json): the layers, KV heads and head width.
  o.kv_shapes = {{"qwen2.5-0.5b", 24, 2, 64}, {"llama-3-8b", 32, 8, 128}, {"qwen3-30b-a3b", 48, 4, 128}};
  return o;
}

Expected<std::vector<int64_t>> ParseSizeList(std::string_view text) {
  std::vector<int64_t> sizes;
  for (std::string_view item : SplitCommas(text)) {
    auto size = ParseByteSize(item);
    if (!size.ok()) return InvalidArgument("'{}': {}", item, size.status().message());
    if (size->bytes < 1) return InvalidArgument("'{}' is less than one byte", item);
    // A message's count is an MPI int.
    if (size->bytes > std::numeric_limits<int>::max()) return InvalidArgument("'{}' is over 2 GiB", item);
    sizes.push_back(size->bytes);
  }
  return sizes;
}

Expected<std::vector<int64_t>> ParseCountList(std::string_view text) {
  std::vector<int64_t> counts;
  for (std::string_view item : SplitCommas(text)) {
    auto value = ParsePositive(item, "expected a count");
    if (!value.ok()) return value.status();
    counts.push_back(*value);
  }
  return counts;
}

Expected<std::vector<KvShape>> ParseKvShapes(std::string_view text) {
  std::vector<KvShape> shapes;
  for (std::string_view item : SplitCommas(text)) {
    const size_t equals = item.find('=');
    if (equals == std::string_view::npos || equals == 0) {
      return InvalidArgument("'{}' is not NAME=LAYERSxKV_HEADSxHEAD_DIM", item);
    }
    KvShape shape;
    shape.name = std::string(item.substr(0, equals));
    std::string_view dims = item.substr(equals + 1);
    int64_t* fields[] = {&shape.layers, &shape.kv_heads, &shape.head_dim};
    for (int i = 0; i < 3; ++i) {
      const size_t x = i < 2 ? dims.find('x') : std::string_view::npos;
      if (i < 2 && x == std::string_view::npos) {
        return InvalidArgument("'{}' is not NAME=LAYERSxKV_HEADSxHEAD_DIM", item);
      }
      auto value = ParsePositive(dims.substr(0, x), "in a KV shape");
      if (!value.ok()) return value.status();
      *fields[i] = *value;
      if (x != std::string_view::npos) dims = dims.substr(x + 1);
    }
    shapes.push_back(std::move(shape));
  }
  return shapes;
}

int64_t KvBlockBytes(const KvShape& shape, int64_t block_tokens, int64_t dtype_bytes) {
  return 2 * shape.layers * shape.kv_heads * shape.head_dim * block_tokens * dtype_bytes;
}

}  // namespace kiln::transport
