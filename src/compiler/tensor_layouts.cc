// The activation layouts of a tensor graph.
#include "compiler/tensor_layouts.h"

#include <deque>
#include <map>
#include <set>

#include <fmt/format.h>

#include "backend/backend.h"

namespace kiln {
namespace {

constexpr const char* kReorder = "kiln.Reorder";

bool IsReorder(const Node& n) {
  return n.op == OpKind::kTensorOp && n.op_type == kReorder;
}

// A value the layout of its reader or producer applies to.
bool IsActivation4d(const Value& v) {
  return v.is_tensor() && v.dims.size() == 4 && !v.constant;
}

bool HasActivation4d(const Graph& g, const Node& n) {
  for (ValueId in : n.inputs) {
    if (in != kNoValue && IsActivation4d(g.value(in))) return true;
  }
  for (ValueId out : n.outputs) {
    if (IsActivation4d(g.value(out))) return true;
  }
  return false;
}

// A layout attribute of a node ("from", "to", "activation_layout").
TensorLayout LayoutAttr(const Node& node, const char* attr) {
  TensorLayout l = TensorLayout::kRowMajor;
  auto name = node.named_attrs.String(attr);
  if (name.ok()) ParseTensorLayout(*name, &l);
  return l;
}

enum class Want : uint8_t { kNo, kWished, kNeeded };

// Whether node i, in `layout`, reads its first input row-major: it may
// (ask.reads_row_major) and that input does not come from a node in its
// layout.
bool ReadsFirstInputRowMajor(const Graph& g, const LayoutQuestions& ask,
                             const std::vector<TensorLayout>& layout, size_t i) {
  const Node& n = g.nodes()[i];
  if (layout[i] == TensorLayout::kRowMajor || !ask.reads_row_major || n.inputs.empty() ||
      n.inputs[0] == kNoValue || !IsActivation4d(g.value(n.inputs[0])))
    return false;
  const int32_t p = g.value(n.inputs[0]).producer;
  if (p >= 0 && layout[static_cast<size_t>(p)] == layout[i]) return false;
  return ask.reads_row_major(g, n, layout[i]);
}

// A chain (nodes of one layout and backend, connected by 4-d values) moves
// the reorders its wishing nodes would make inside their kernels (their
// input and output, as oneDNN's blocked convolutions on row-major
// activations do) to its borders. It stays only where the borders move no
// more elements than those reorders did; a chain with a node that needs
// its layout always stays.
void DropChainsThatDoNotPay(const Graph& g, const LayoutQuestions& ask,
                            const std::vector<std::vector<int32_t>>& consumers,
                            const std::vector<Want>& wanted, std::vector<TensorLayout>* layout) {
  const auto& nodes = g.nodes();
  std::vector<int> chain_of(nodes.size(), -1);
  auto same_chain = [&](size_t a, int32_t b) {
    return b >= 0 && (*layout)[static_cast<size_t>(b)] == (*layout)[a] &&
           nodes[static_cast<size_t>(b)].backend == nodes[a].backend;
  };
  auto elements = [&](ValueId v) { return static_cast<double>(g.value(v).tensor_type().ElementCount()); };
  for (size_t start = 0; start < nodes.size(); ++start) {
    if ((*layout)[start] == TensorLayout::kRowMajor || chain_of[start] >= 0) continue;
    std::vector<size_t> members;
    std::deque<size_t> queue = {start};
    chain_of[start] = static_cast<int>(start);
    while (!queue.empty()) {
      const size_t i = queue.front();
      queue.pop_front();
      members.push_back(i);
      auto visit = [&](int32_t j) {
        if (!same_chain(i, j) || chain_of[static_cast<size_t>(j)] >= 0) return;
        chain_of[static_cast<size_t>(j)] = static_cast<int>(start);
        queue.push_back(static_cast<size_t>(j));
      };
      for (ValueId in : nodes[i].inputs) {
        if (in != kNoValue && IsActivation4d(g.value(in))) visit(g.value(in).producer);
      }
      for (ValueId out : nodes[i].outputs) {
        if (!IsActivation4d(g.value(out))) continue;
        for (int32_t c : consumers[static_cast<size_t>(out)]) visit(c);
      }
    }
    double saved = 0, border = 0;
    bool needed = false;
    std::set<ValueId> crossing;
    for (size_t i : members) {
      needed = needed || wanted[i] == Want::kNeeded;
      for (ValueId in : nodes[i].inputs) {
        if (in == kNoValue || !IsActivation4d(g.value(in))) continue;
        const int32_t p = g.value(in).producer;
        const bool read_row_major = in == nodes[i].inputs[0] && ReadsFirstInputRowMajor(g, ask, *layout, i);
        // A node reading its input row-major saves no reorder of it.
        if (wanted[i] == Want::kWished && in == nodes[i].inputs[0] && !read_row_major) saved += elements(in);
        if ((p < 0 || chain_of[static_cast<size_t>(p)] != static_cast<int>(start)) && !read_row_major)
          crossing.insert(in);
      }
      for (ValueId out : nodes[i].outputs) {
        if (!IsActivation4d(g.value(out))) continue;
        if (wanted[i] == Want::kWished) saved += elements(out);
        bool leaves = g.value(out).is_output || g.value(out).io_slot >= 0;
        for (int32_t c : consumers[static_cast<size_t>(out)]) {
          leaves = leaves || chain_of[static_cast<size_t>(c)] != static_cast<int>(start);
        }
        if (leaves) crossing.insert(out);
      }
    }
    for (ValueId v : crossing) border += elements(v);
    if (needed || border <= saved) continue;
    for (size_t i : members) (*layout)[i] = TensorLayout::kRowMajor;
  }
}

// The layout of each node: the wanted ones, grown over same-backend
// neighbours (through 4-d activations) that take it.
std::vector<TensorLayout> NodeLayouts(const Graph& g, const LayoutQuestions& ask) {
  const auto& nodes = g.nodes();
  std::vector<TensorLayout> layout(nodes.size(), TensorLayout::kRowMajor);
  std::vector<bool> candidate(nodes.size(), false);
  std::vector<Want> wanted(nodes.size(), Want::kNo);
  std::deque<size_t> queue;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    candidate[i] = n.op == OpKind::kTensorOp && !n.dead && !IsReorder(n) && HasActivation4d(g, n);
    if (!candidate[i]) continue;
    layout[i] = ask.wanted(g, n);
    if (layout[i] == TensorLayout::kRowMajor) continue;
    queue.push_back(i);
    // A layout the backend could do without is a wish that must pay; one it
    // needs is not.
    wanted[i] = ask.takes(g, n, TensorLayout::kRowMajor) ? Want::kWished : Want::kNeeded;
  }
  const auto consumers = g.Consumers();
  auto try_grow = [&](size_t from, int32_t to) {
    if (to < 0) return;
    auto t = static_cast<size_t>(to);
    if (!candidate[t] || layout[t] != TensorLayout::kRowMajor || nodes[t].backend != nodes[from].backend)
      return;
    if (!ask.takes(g, nodes[t], layout[from])) return;
    layout[t] = layout[from];
    queue.push_back(t);
  };
  while (!queue.empty()) {
    const size_t i = queue.front();
    queue.pop_front();
    for (ValueId in : nodes[i].inputs) {
      if (in != kNoValue && IsActivation4d(g.value(in))) try_grow(i, g.value(in).producer);
    }
    for (ValueId out : nodes[i].outputs) {
      if (!IsActivation4d(g.value(out))) continue;
      for (int32_t c : consumers[static_cast<size_t>(out)]) try_grow(i, c);
    }
  }
  DropChainsThatDoNotPay(g, ask, consumers, wanted, &layout);
  return layout;
}

Node MakeReorder(const Graph& g, ValueId in, ValueId out, TensorLayout from, TensorLayout to,
                 const std::string& backend, int32_t opset) {
  Node r;
  r.op = OpKind::kTensorOp;
  r.op_type = kReorder;
  r.name = fmt::format("reorder.{}.{}", g.value(in).name, TensorLayoutName(to));
  r.opset = opset;
  r.inputs = {in};
  r.outputs = {out};
  r.named_attrs.SetString("from", TensorLayoutName(from));
  r.named_attrs.SetString("to", TensorLayoutName(to));
  r.backend = backend;
  return r;
}

}  // namespace

LayoutQuestions BackendLayoutQuestions(const BackendRegistry& backends) {
  LayoutQuestions ask;
  ask.wanted = [&backends](const Graph& g, const Node& n) {
    Backend* b = backends.Find(n.backend);
    return b == nullptr ? TensorLayout::kRowMajor : b->WantedLayout(g, n);
  };
  ask.takes = [&backends](const Graph& g, const Node& n, TensorLayout layout) {
    Backend* b = backends.Find(n.backend);
    return b != nullptr && b->TakesLayout(g, n, layout);
  };
  ask.reads_row_major = [&backends](const Graph& g, const Node& n, TensorLayout layout) {
    Backend* b = backends.Find(n.backend);
    return b != nullptr && b->ReadsRowMajorInput(g, n, layout);
  };
  ask.reorder_backend = backends.cpu().name();
  return ask;
}

Expected<int> CancelMeetingReorders(Graph& g) {
  KILN_RETURN_IF_ERROR(g.Compact());
  int cancelled = 0;
  std::vector<Node>& nodes = g.nodes();
  // What each reorder's output stands for: the value it came from, when
  // that came out of the opposite reorder.
  std::map<ValueId, ValueId> same_as;
  for (Node& n : nodes) {
    for (ValueId& in : n.inputs) {
      auto it = in == kNoValue ? same_as.end() : same_as.find(in);
      if (it != same_as.end()) in = it->second;
    }
    if (!IsReorder(n) || g.value(n.outputs[0]).is_output || g.value(n.outputs[0]).io_slot >= 0) continue;
    const int32_t p = g.value(n.inputs[0]).producer;
    if (p < 0 || !IsReorder(nodes[static_cast<size_t>(p)])) continue;
    const Node& first = nodes[static_cast<size_t>(p)];
    if (LayoutAttr(first, "from") != LayoutAttr(n, "to") || LayoutAttr(first, "to") != LayoutAttr(n, "from"))
      continue;
    same_as[n.outputs[0]] = first.inputs[0];
    ++cancelled;
  }
  // Reorders nobody reads any more, from the last back.
  for (bool changed = true; changed;) {
    changed = false;
    const auto consumers = g.Consumers();
    for (Node& n : nodes) {
      if (n.dead || !IsReorder(n)) continue;
      const Value& out = g.value(n.outputs[0]);
      if (out.is_output || out.io_slot >= 0 || !consumers[static_cast<size_t>(n.outputs[0])].empty())
        continue;
      n.dead = true;
      changed = true;
    }
  }
  KILN_RETURN_IF_ERROR(g.Compact());
  return cancelled;
}

Status ChooseTensorLayouts(Graph& g, const LayoutQuestions& ask, TensorLayoutDecisions* decisions) {
  const std::vector<TensorLayout> layout = NodeLayouts(g, ask);
  bool any = false;
  for (TensorLayout l : layout) any = any || l != TensorLayout::kRowMajor;
  if (!any) return Status::Ok();

  // Every border gets its reorder (one per value and layout); the
  // cancelling below removes those between two nodes of one layout.
  std::vector<bool> reads_row_major(g.nodes().size(), false);
  for (size_t i = 0; i < g.nodes().size(); ++i)
    reads_row_major[i] = ReadsFirstInputRowMajor(g, ask, layout, i);
  std::vector<Node> out;
  std::map<std::pair<ValueId, TensorLayout>, ValueId> in_layout;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    Node n = std::move(g.nodes()[i]);
    const TensorLayout l = layout[i];
    if (l == TensorLayout::kRowMajor) {
      out.push_back(std::move(n));
      continue;
    }
    n.named_attrs.SetString("activation_layout", TensorLayoutName(l));
    if (reads_row_major[i])
      n.named_attrs.SetString("input_layout", TensorLayoutName(TensorLayout::kRowMajor));
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      ValueId& in = n.inputs[k];
      if (in == kNoValue || !IsActivation4d(g.value(in)) || (k == 0 && reads_row_major[i])) continue;
      auto key = std::make_pair(in, l);
      auto it = in_layout.find(key);
      if (it == in_layout.end()) {
        const Value v = g.value(in);
        ValueId c = g.AddTensorValue(fmt::format("{}.{}", v.name, TensorLayoutName(l)), v.tensor_type());
        g.value(c).layout = l;
        out.push_back(MakeReorder(g, in, c, TensorLayout::kRowMajor, l, ask.reorder_backend, n.opset));
        ++decisions->reorders_inserted;
        it = in_layout.emplace(key, c).first;
      }
      in = it->second;
    }
    std::vector<Node> after;
    for (ValueId& o : n.outputs) {
      if (!IsActivation4d(g.value(o))) continue;
      const Value v = g.value(o);
      ValueId c = g.AddTensorValue(fmt::format("{}.{}", v.name, TensorLayoutName(l)), v.tensor_type());
      g.value(c).layout = l;
      after.push_back(MakeReorder(g, c, o, l, TensorLayout::kRowMajor, ask.reorder_backend, n.opset));
      ++decisions->reorders_inserted;
      o = c;
    }
    out.push_back(std::move(n));
    for (Node& r : after) out.push_back(std::move(r));
  }
  g.nodes() = std::move(out);
  KILN_ASSIGN_OR_RETURN(decisions->reorders_cancelled, CancelMeetingReorders(g));

  // The plan's lines: per layout and backend the nodes and values in it,
  // then each reorder that stayed.
  std::map<std::pair<std::string, TensorLayout>, std::pair<int, std::vector<std::string>>> chains;
  for (const Node& n : g.nodes()) {
    if (IsReorder(n) || !n.named_attrs.Has("activation_layout")) continue;
    auto& chain = chains[{n.backend, LayoutAttr(n, "activation_layout")}];
    ++chain.first;
    for (ValueId o : n.outputs) {
      if (g.value(o).layout != TensorLayout::kRowMajor) chain.second.push_back(g.value(o).name);
    }
  }
  for (const auto& [key, chain] : chains) {
    constexpr size_t kShown = 8;
    std::vector<std::string> shown(
        chain.second.begin(),
        chain.second.begin() + static_cast<long>(std::min(kShown, chain.second.size())));
    decisions->lines.push_back(fmt::format("activations {} on {}: {} nodes, {} values ({}{})",
                                           TensorLayoutName(key.second), key.first, chain.first,
                                           chain.second.size(), fmt::join(shown, ", "),
                                           chain.second.size() > kShown ? ", ..." : ""));
  }
  for (const Node& n : g.nodes()) {
    if (n.named_attrs.Has("input_layout"))
      decisions->lines.push_back(fmt::format("{} reads {} row-major and writes {} (no reorder)", n.name,
                                             g.value(n.inputs[0]).name,
                                             TensorLayoutName(LayoutAttr(n, "activation_layout"))));
  }
  const auto consumers = g.Consumers();
  for (const Node& n : g.nodes()) {
    if (!IsReorder(n)) continue;
    ++decisions->reorders_kept;
    std::string readers;
    for (int32_t c : consumers[static_cast<size_t>(n.outputs[0])]) {
      readers += (readers.empty() ? "" : ", ") + g.nodes()[static_cast<size_t>(c)].name;
    }
    if (g.value(n.outputs[0]).io_slot >= 0)
      readers += (readers.empty() ? "" : ", ") + std::string("graph output");
    decisions->lines.push_back(fmt::format("reorder {}: {} -> {} (for {})", g.value(n.inputs[0]).name,
                                           TensorLayoutName(LayoutAttr(n, "from")),
                                           TensorLayoutName(LayoutAttr(n, "to")), readers));
  }
  decisions->lines.push_back(
      fmt::format("reorders: {} inserted at layout borders, {} pairs cancelled where two met, {} kept",
                  decisions->reorders_inserted, decisions->reorders_cancelled, decisions->reorders_kept));
  return Status::Ok();
}

}  // namespace kiln
