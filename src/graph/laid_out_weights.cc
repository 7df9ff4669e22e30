#include "graph/laid_out_weights.h"

namespace kiln {

void LaidOutWeights::AddStored(std::string node, std::string layout, std::span<const uint8_t> bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  stored_[{std::move(node), std::move(layout)}] = bytes;
}

void LaidOutWeights::Keep(std::shared_ptr<const void> owner) {
  std::lock_guard<std::mutex> lock(mu_);
  owners_.push_back(std::move(owner));
}

const uint8_t* LaidOutWeights::Take(std::string_view node, std::string_view layout, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  std::pair<std::string, std::string> key{std::string(node), std::string(layout)};
  auto it = stored_.find(key);
  if (it == stored_.end() || it->second.size() != bytes) return nullptr;
  adopted_[key] = true;
  return it->second.data();
}

void LaidOutWeights::Record(std::string_view node, std::string_view layout, std::span<const uint8_t> bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  // A kernel made twice (asked for its scratch, then bound) records twice:
  // the latest is the one the program keeps.
  recorded_[{std::string(node), std::string(layout)}] = bytes;
}

std::vector<LaidOutWeights::Entry> LaidOutWeights::Recorded() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Entry> out;
  for (const auto& [key, bytes] : recorded_) out.push_back({key.first, key.second, bytes});
  return out;
}

int LaidOutWeights::adopted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(adopted_.size());
}

int LaidOutWeights::laid_out() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(recorded_.size());
}

}  // namespace kiln
