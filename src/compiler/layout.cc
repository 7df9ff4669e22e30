// The layout stage.
#include "compiler/layout.h"

#include <algorithm>

#include <fmt/format.h>

#include "backend/backend.h"
#include "format/weight_store.h"
#include "quant/dequantize.h"

namespace kiln {

struct PackedWeights::Vector {
  Weight weight;
  std::vector<float> values;
};

PackedWeights::PackedWeights() = default;
PackedWeights::~PackedWeights() = default;

Expected<const Weight*> PackedWeights::F32Vector(const Weight& w) {
  auto it = vectors_.find(w.name);
  if (it != vectors_.end()) return &it->second->weight;
  auto v = std::make_unique<Vector>();
  v->values.resize(static_cast<size_t>(w.num_elements()));
  KILN_RETURN_IF_ERROR(DequantizeRow(w.dtype, w.data, v->values.data(), w.num_elements()).WithContext(w.name));
  v->weight = w;
  v->weight.dtype = DType::kF32;
  v->weight.data = reinterpret_cast<const uint8_t*>(v->values.data());
  v->weight.nbytes = v->values.size() * sizeof(float);
  const Weight* result = &v->weight;
  vectors_.emplace(w.name, std::move(v));
  return result;
}

const PackedMatrix* PackedWeights::Find(const std::string& backend, const std::string& weight) const {
  auto it = packed_.find({backend, weight});
  return it == packed_.end() ? nullptr : it->second.get();
}

void PackedWeights::Add(const std::string& backend, const std::string& weight,
                        std::shared_ptr<const PackedMatrix> m) {
  packed_[{backend, weight}] = std::move(m);
}

size_t PackedWeights::TotalBytes() const {
  size_t total = 0;
  for (const auto& [key, m] : packed_) total += m->in_place() ? 0 : m->bytes();
  return total;
}

Expected<Backend*> KvCacheBackend(const Graph& g, const BackendRegistry& backends) {
  Backend* owner = nullptr;
  const Node* first = nullptr;
  for (const Node& n : g.nodes()) {
    if (n.op != OpKind::kAttention && n.op != OpKind::kGatherKv) continue;
    Backend* b = backends.Find(n.backend);
    if (b == nullptr) return Internal("node {} placed on unknown backend '{}'", n.name, n.backend);
    if (owner != nullptr && &b->domain() != &owner->domain()) {
      return Unsupported("the KV cache is read by {} on {} and by {} on {}: one memory must hold it", first->name,
                         owner->name(), n.name, b->name());
    }
    if (owner == nullptr) {
      owner = b;
      first = &n;
    }
  }
  return owner;
}

Status AssignDomainsAndTransfers(Graph& g, const BackendRegistry& backends, LayoutReport* report) {
  KILN_ASSIGN_OR_RETURN(Backend * kv_owner, KvCacheBackend(g, backends));
  if (kv_owner != nullptr) {
    report->kv_cache_backend = kv_owner->name();
    report->kv_cache_domain = kv_owner->domain().id();
    for (Node& n : g.nodes()) {
      if (n.op != OpKind::kKvWrite) continue;
      Backend* b = backends.Find(n.backend);
      if (b != nullptr && &b->domain() == &kv_owner->domain()) continue;
      std::string why;
      if (kv_owner->support().Match(g, n, &why) == nullptr) {
        return Unsupported("{}: the KV cache lives with attention on {}, which cannot write it ({})", n.name,
                           kv_owner->name(), why);
      }
      n.backend = kv_owner->name();
    }
  }
  auto domain_of_node = [&](const Node& n) -> Expected<int32_t> {
    Backend* b = backends.Find(n.backend);
    if (b == nullptr) return Internal("node {} placed on unknown backend '{}'", n.name, n.backend);
    return b->domain().id();
  };
  std::map<int32_t, std::string> domain_names;
  for (Backend* b : backends.All()) domain_names[b->domain().id()] = b->domain().name();

  // Domains of produced values (views share their storage's).
  for (const Node& n : g.nodes()) {
    KILN_ASSIGN_OR_RETURN(int32_t d, domain_of_node(n));
    for (ValueId out : n.outputs) g.value(out).domain = d;
  }
  for (Value& v : g.values()) {
    if (v.view_of != kNoValue) v.domain = g.value(g.StorageOf(v.view_of)).domain;
  }

  std::vector<Node> out;
  std::map<std::pair<ValueId, int32_t>, ValueId> copies;
  const int32_t host = HostMemory().id();
  for (Node& n : g.nodes()) {
    KILN_ASSIGN_OR_RETURN(int32_t d, domain_of_node(n));
    for (ValueId& in : n.inputs) {
      if (in == kNoValue) continue;
      // A copy: adding values below moves the graph's values.
      const Value v = g.value(in);
      // Constants are weights: the node's backend takes them at bind.
      if (v.is_marker() || v.domain == d || v.constant) continue;
      auto key = std::make_pair(in, d);
      auto it = copies.find(key);
      if (it == copies.end()) {
        ValueId c = g.AddValue(fmt::format("{}@{}", v.name, domain_names[d]), v.dtype, v.rows, v.cols);
        g.value(c).domain = d;
        g.value(c).dims = v.dims;
        g.value(c).layout = v.layout;
        Node t;
        t.op = OpKind::kTransfer;
        t.name = fmt::format("transfer.{}", v.name);
        t.inputs = {in};
        t.outputs = {c};
        t.attrs.transfer_from = v.domain;
        t.backend = n.backend;  // the receiving side performs the copy
        report->transfers.push_back(fmt::format("{}: {} -> {} (for {})", v.name, domain_names[v.domain],
                                                domain_names[d], n.name));
        out.push_back(std::move(t));
        it = copies.emplace(key, c).first;
      }
      in = it->second;
    }
    // The graph output is the caller's host memory: a node elsewhere writes
    // a copy in its own domain, transferred after it.
    std::vector<Node> after;
    for (ValueId& o : n.outputs) {
      const Value v = g.value(o);
      if (!v.is_output || d == host) continue;
      ValueId final_out = o;
      ValueId tmp = g.AddValue(v.name + "@" + domain_names[d], v.dtype, v.rows, v.cols);
      g.value(tmp).domain = d;
      g.value(tmp).dims = v.dims;
      g.value(tmp).layout = v.layout;
      g.value(final_out).domain = host;
      o = tmp;
      Node t;
      t.op = OpKind::kTransfer;
      t.name = fmt::format("transfer.{}", g.value(final_out).name);
      t.inputs = {tmp};
      t.outputs = {final_out};
      t.attrs.transfer_from = d;
      t.backend = backends.cpu().name();
      report->transfers.push_back(fmt::format("{}: {} -> {} (graph output)", g.value(final_out).name,
                                              domain_names[d], domain_names[host]));
      after.push_back(std::move(t));
    }
    out.push_back(std::move(n));
    for (Node& t : after) out.push_back(std::move(t));
  }
  g.nodes() = std::move(out);
  return g.Compact();
}

Status PackWeights(Graph& g, const BackendRegistry& backends, const W8A8Options& w8a8, PackedWeights* packed,
                   LayoutReport* report, const WeightStore* stored) {
  for (Node& n : g.nodes()) {
    Backend* b = backends.Find(n.backend);
    if (b == nullptr) return Internal("node {} placed on unknown backend '{}'", n.name, n.backend);
    for (const Weight*& w : n.weights) {
      if (w != nullptr && w->shape.size() == 1 && w->dtype != DType::kF32) {
        KILN_ASSIGN_OR_RETURN(w, packed->F32Vector(*w));
      }
    }
    // A mixture's experts, router and shared expert are matmuls too.
    bool matmul = n.op == OpKind::kLinear || n.op == OpKind::kGateUpSiluMul || n.op == OpKind::kMoe;
    if (!matmul) continue;
    for (const Weight* w : n.weights) {
      if (w == nullptr || w->shape.size() != 2) continue;
      if (packed->Find(b->name(), w->name) != nullptr) continue;
      PackRequest request;
      request.weight = w;
      request.node = &n;
      if (w8a8.enabled && n.op != OpKind::kMoe) {
        request.int8 = true;
        auto clip = w8a8.input_clips.find(w->name);
        request.activation_clip = clip == w8a8.input_clips.end() ? 0.0f : clip->second;
      }
      const StoredPackedMatrix* form = stored != nullptr ? stored->FindPacked(b->name(), w->name) : nullptr;
      auto m = form != nullptr ? b->AdoptPacked(request, *form) : b->PackWeight(request);
      if (!m.ok()) {
        return m.status().WithContext(fmt::format("{} {} for {}", form != nullptr ? "adopting the stored" : "packing",
                                                  w->name, b->name()));
      }
      PackedWeightInfo info{w->name, b->name(), (*m)->layout(), (*m)->bytes(), (*m)->in_place(), form != nullptr};
      report->packed.push_back(info);
      if (!info.in_place) report->packed_bytes += info.bytes;
      packed->Add(b->name(), w->name, std::move(*m));
    }
  }
  return Status::Ok();
}

Expected<MemoryPlan> PlanMemory(const Graph& g, const ShapeEnv& env, const std::vector<size_t>& scratch_bytes) {
  MemoryPlan plan;
  plan.env = env;
  struct Request {
    ValueId value;  // or -1 for scratch
    int32_t node;   // for scratch
    int32_t domain;
    size_t bytes;
    int32_t first, last;
  };
  std::vector<Request> requests;

  // Lifetimes of storage values: from the producer to the last reader of the
  // value or of any view of it.
  std::map<ValueId, std::pair<int32_t, int32_t>> life;
  const auto& nodes = g.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    auto idx = static_cast<int32_t>(i);
    for (ValueId o : nodes[i].outputs) {
      ValueId s = g.StorageOf(o);
      auto [it, inserted] = life.emplace(s, std::make_pair(idx, idx));
      if (!inserted) it->second.first = std::min(it->second.first, idx);
    }
    for (ValueId in : nodes[i].inputs) {
      if (in == kNoValue) continue;
      ValueId s = g.StorageOf(in);
      if (g.value(s).is_preset()) continue;  // a constant or a graph input: not in the arena
      auto it = life.find(s);
      if (it == life.end()) return Internal("plan: {} read before it is produced", g.value(in).name);
      it->second.second = std::max(it->second.second, idx);
    }
  }
  for (const auto& [v, span] : life) {
    const Value& val = g.value(v);
    if (val.is_marker() || val.is_output || val.io_slot >= 0) continue;
    size_t bytes = AlignUp64(static_cast<size_t>(env.Rows(val.rows)) * static_cast<size_t>(val.RowBytes()));
    if (bytes == 0) continue;
    requests.push_back({v, -1, val.domain, bytes, span.first, span.second});
  }
  for (size_t i = 0; i < scratch_bytes.size() && i < nodes.size(); ++i) {
    if (scratch_bytes[i] == 0) continue;
    const Node& n = nodes[i];
    int32_t domain = n.outputs.empty() ? 0 : g.value(g.StorageOf(n.outputs[0])).domain;
    auto idx = static_cast<int32_t>(i);
    requests.push_back({kNoValue, idx, domain, AlignUp64(scratch_bytes[i]), idx, idx});
  }

  // Greedy by size, largest first: each buffer goes to the lowest offset
  // where it overlaps no placed buffer that is alive at the same time.
  std::stable_sort(requests.begin(), requests.end(),
                   [](const Request& a, const Request& b) { return a.bytes > b.bytes; });
  std::map<int32_t, std::vector<BufferSlot>> placed;
  for (const Request& r : requests) {
    std::vector<BufferSlot>& slots = placed[r.domain];
    std::vector<std::pair<size_t, size_t>> busy;
    for (const BufferSlot& s : slots) {
      if (s.last_node < r.first || s.first_node > r.last) continue;
      busy.emplace_back(s.offset, s.offset + s.bytes);
    }
    std::sort(busy.begin(), busy.end());
    size_t offset = 0;
    for (const auto& [begin, end] : busy) {
      if (offset + r.bytes <= begin) break;
      offset = std::max(offset, end);
    }
    BufferSlot slot{r.domain, offset, r.bytes, r.first, r.last};
    slots.push_back(slot);
    plan.arena_bytes[r.domain] = std::max(plan.arena_bytes[r.domain], offset + r.bytes);
    plan.naive_bytes[r.domain] += r.bytes;
    if (r.value != kNoValue) {
      plan.values[r.value] = slot;
    } else {
      plan.scratch[r.node] = slot;
    }
  }
  return plan;
}

Expected<std::map<int32_t, uint8_t*>> AllocateArenas(const std::map<int32_t, size_t>& arena_bytes,
                                                     const BackendRegistry& backends,
                                                     std::vector<DomainBuffer>* arenas) {
  std::map<int32_t, uint8_t*> bases;
  for (const auto& [d, bytes] : arena_bytes) {
    MemoryDomain* domain = nullptr;
    for (Backend* b : backends.All()) {
      if (b->domain().id() == d) domain = &b->domain();
    }
    if (domain == nullptr) return Internal("no backend owns memory domain {}", d);
    KILN_ASSIGN_OR_RETURN(DomainBuffer buf, DomainBuffer::Allocate(*domain, bytes));
    bases[d] = buf.data();
    arenas->push_back(std::move(buf));
  }
  return bases;
}

}  // namespace kiln
