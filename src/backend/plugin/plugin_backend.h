// A backend that lives in a plugin: a kiln Backend over the C function
// table of include/kiln/kiln_backend.h. Everything crosses as C: nodes as
// kiln_node_desc, weights as kiln_weight_desc, passes as kiln_run_args,
// memory, streams and events as the plugin's opaque handles.
#pragma once

#include <cstddef>

#include <memory>
#include <mutex>
#include <string>

#include "backend/backend.h"
#include "kiln/kiln_backend.h"

namespace kiln {

// Bytes of the buffer kiln hands a plugin for an error message.
constexpr size_t kPluginErrorBytes = 512;

class PluginBackend : public Backend {
 public:
  // Checks `table` (struct size, ABI version, name, functions, support
  // list), copies it and creates the backend's one stream. `library` names
  // the file in messages. On error nothing of the plugin's is released:
  // the caller still owns `table`.
  static Expected<std::unique_ptr<PluginBackend>> Create(const kiln_backend& table, const std::string& library);
  // Releases the stream, then the plugin's state (table.destroy).
  ~PluginBackend() override;

  const std::string& name() const override { return name_; }
  std::string description() const override;
  const SupportList& support() const override { return support_; }
  MemoryDomain& domain() override { return *domain_; }
  Expected<std::shared_ptr<const PackedMatrix>> PackWeight(const PackRequest& request) override;
  size_t ScratchBytes(const Graph& g, const Node& node, const ShapeEnv& capacity) const override;
  // A tensor op whose support entry says "nhwc" runs channels-last, and only so.
  TensorLayout WantedLayout(const Graph& g, const Node& node) const override;
  bool TakesLayout(const Graph& g, const Node& node, TensorLayout layout) const override;
  Expected<Step> Bind(const BindContext& ctx) override;
  Stream& stream() override { return *stream_; }
  std::unique_ptr<Event> CreateEvent() override;
  void EnqueueCopy(CopyDirection direction, const RowCopy& copy) override;
  Status SetOption(const std::string& key, const std::string& value) override;

  const std::string& library() const { return library_; }
  const kiln_backend& table() const { return table_; }

 private:
  PluginBackend() = default;

  kiln_backend table_{};
  std::string library_;
  std::string name_;
  std::string description_;
  SupportList support_;
  std::unique_ptr<MemoryDomain> domain_;
  std::unique_ptr<Stream> stream_;
};

}  // namespace kiln
