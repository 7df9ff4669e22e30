// The compile report as `kiln inspect --plan` prints it.
#include <fmt/format.h>

#include "compiler/compiled_model.h"
#include "format/weight_store.h"

namespace kiln {
namespace {

std::string Bytes(double b) {
  if (b >= 1 << 30) return fmt::format("{:.2f} GiB", b / (1 << 30));
  if (b >= 1 << 20) return fmt::format("{:.2f} MiB", b / (1 << 20));
  if (b >= 1 << 10) return fmt::format("{:.1f} KiB", b / (1 << 10));
  return fmt::format("{:.0f} B", b);
}

std::string Flops(double f) {
  if (f >= 1e9) return fmt::format("{:.2f} GFLOP", f / 1e9);
  if (f >= 1e6) return fmt::format("{:.2f} MFLOP", f / 1e6);
  if (f >= 1e3) return fmt::format("{:.1f} kFLOP", f / 1e3);
  return fmt::format("{:.0f} FLOP", f);
}

}  // namespace

std::string CompileReport::ToString(const Graph& g, bool per_node) const {
  std::string s;
  s += fmt::format("compile plan: target {}, precision {}, {} threads, kernels {}, compiled in {:.1f} ms\n",
                   backend, PrecisionName(precision), threads, isa, compile_seconds * 1e3);

  s += "\n[1 legalize]\n";
  s += fmt::format("  {} nodes on {}, {} on cpu\n", legalize.nodes_on_target, legalize.target,
                   legalize.target == "cpu" ? 0 : legalize.nodes_on_cpu);
  for (const std::string& r : legalize.rewrites) s += "  rewrite: " + r + "\n";
  if (legalize.fallbacks.empty()) {
    s += "  fallbacks: none\n";
  } else {
    double flops = 0, bytes = 0;
    for (const Fallback& f : legalize.fallbacks) {
      flops += f.flops;
      bytes += f.bytes_moved;
    }
    s += fmt::format("  fallbacks to cpu: {} nodes, {} {} and {} moved between domains\n", legalize.fallbacks.size(),
                     input_shapes.empty() ? "per decoded token" : "per run", Flops(flops), Bytes(bytes));
    for (const Fallback& f : legalize.fallbacks) {
      s += fmt::format("    {:<44} {:<14} {:>12} {:>10}  {}\n", f.node, f.op_type.empty() ? OpName(f.op) : f.op_type,
                       Flops(f.flops),
                       Bytes(f.bytes_moved), f.reason);
    }
  }

  s += "\n[2 fuse]\n";
  if (fuse.fusions.empty()) s += "  fusions: none\n";
  for (const std::string& f : fuse.fusions) s += "  " + f + "\n";
  for (const std::string& p : fuse.precision) s += "  precision " + p + "\n";

  s += "\n[3 layout]\n";
  size_t in_place = 0, repacked = 0, adopted = 0;
  std::map<std::string, int> layouts;
  for (const PackedWeightInfo& p : layout.packed) {
    (p.in_place ? in_place : repacked) += 1;
    adopted += p.adopted ? 1 : 0;
    layouts[p.backend + ":" + p.layout] += 1;
  }
  s += fmt::format("  weights: {} packed once at load ({}), {} used in place\n", repacked,
                   Bytes(static_cast<double>(layout.packed_bytes)), in_place);
  if (adopted > 0) s += fmt::format("    {} of them as compiled into the artifact, not packed again\n", adopted);
  for (const auto& [l, n] : layouts) s += fmt::format("    {} x {}\n", n, l);
  for (const std::string& a : layout.activation_layouts) s += "  " + a + "\n";
  if (layout.transfers.empty()) s += "  transfers: none\n";
  for (const std::string& t : layout.transfers) s += "  transfer " + t + "\n";
  s += "  activation arena (64-byte aligned buffers, reused by lifetime):\n";
  for (const BucketPlan& b : buckets) {
    std::string per_domain;
    for (const auto& [d, bytes] : b.arena_bytes) {
      auto naive = b.naive_bytes.find(d);
      per_domain += fmt::format("  {} {} planned vs {} naive", domain_names.count(d) ? domain_names.at(d) : "?",
                                Bytes(static_cast<double>(bytes)),
                                Bytes(static_cast<double>(naive == b.naive_bytes.end() ? 0 : naive->second)));
    }
    if (!input_shapes.empty()) {
      s += fmt::format("    {}: {} steps,{}\n", input_shapes, b.steps, per_domain);
    } else {
      s += fmt::format("    bucket {:>5} tokens: {} steps,{}\n", b.env.tokens, b.steps, per_domain);
    }
  }
  for (const auto& [d, bytes] : arena_bytes) {
    s += fmt::format("  allocated arena {}: {}\n", domain_names.count(d) ? domain_names.at(d) : "?",
                     Bytes(static_cast<double>(bytes)));
  }

  s += "\n[4 bind]\n";
  if (!input_shapes.empty()) {
    s += fmt::format("  1 program for input shapes {}; another shape compiles another\n", input_shapes);
  } else {
    s += fmt::format("  {} programs (token buckets", buckets.size());
    for (const BucketPlan& b : buckets) s += fmt::format(" {}", b.env.tokens);
    s += "); block tables, positions and lengths are runtime inputs\n";
  }

  if (per_node) {
    s += "\n[placement]\n";
    for (const Node& n : g.nodes()) {
      std::string fused;
      if (!n.fused_from.empty()) fused = fmt::format("  (fused {} nodes)", n.fused_from.size());
      s += fmt::format("  {:<10} {:<18} {}{}\n", n.backend, OpName(n.op), n.name, fused);
    }
  }
  return s;
}

}  // namespace kiln
