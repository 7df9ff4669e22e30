#include "cli/bench_onnx.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/statistics.h"
#include "cli/engine_flags.h"
#include "cli/onnx_feeds.h"
#include "compiler/compiled_tensor_graph.h"
#include "core/npy.h"
#include "core/thread_pool.h"
#include "onnx/onnx_session.h"

namespace kiln::cli {
namespace {

using Clock = std::chrono::steady_clock;

// Inputs the caller did not give: seeded values in [0, 1) (float) or 0.
HostTensor RandomInput(const TensorType& type, uint64_t seed) {
  HostTensor t(type);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  if (type.dtype == DType::kF32) {
    float* p = t.data<float>();
    for (int64_t i = 0; i < type.ElementCount(); ++i) p[i] = u(rng);
  }
  return t;
}

// ort_run.js --bench on the same model, inputs and threads: its JSON line.
Expected<nlohmann::json> RunOnnxruntime(const OnnxBenchArgs& a, int threads,
                                        const std::map<std::string, HostTensor>& feeds) {
  const std::string dir = (std::filesystem::temp_directory_path() / fmt::format("kiln_bench_ort_{}", ::getpid())).string();
  std::filesystem::create_directories(dir);
  std::string cmd = fmt::format("node '{}' --model '{}' --threads {} --bench {} --warmup {}", a.onnxruntime, a.model,
                                threads, a.runs, a.warmup);
  int n = 0;
  for (const auto& [name, t] : feeds) {
    const std::string path = fmt::format("{}/in{}.npy", dir, n++);
    KILN_RETURN_IF_ERROR(WriteNpy(path, t.type.dtype, t.type.dims, t.bytes.data(), t.bytes.size()));
    cmd += fmt::format(" --input '{}={}'", name, path);
  }
  std::FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return Internal("cannot run {}", cmd);
  std::string out;
  char buf[4096];
  while (size_t got = std::fread(buf, 1, sizeof buf, p)) out.append(buf, got);
  const int rc = ::pclose(p);
  std::filesystem::remove_all(dir);
  if (rc != 0) return Internal("onnxruntime: `{}` failed (status {})", cmd, rc);
  // The last line that is a JSON object.
  size_t end = out.find_last_of('}');
  size_t begin = end == std::string::npos ? std::string::npos : out.rfind("\n{", end);
  begin = begin == std::string::npos ? out.find('{') : begin + 1;
  if (end == std::string::npos || begin == std::string::npos) return Internal("onnxruntime printed no JSON: {}", out);
  auto j = nlohmann::json::parse(out.substr(begin, end - begin + 1), nullptr, false);
  if (j.is_discarded()) return Internal("onnxruntime printed no JSON: {}", out);
  return j;
}

}  // namespace

Status RunOnnxLatency(const OnnxBenchArgs& a, const bench::RooflineRow* roofline, const std::string& machine) {
  KILN_ASSIGN_OR_RETURN(auto feeds, ReadOnnxFeeds(a.inputs));
  KILN_ASSIGN_OR_RETURN(OnnxSessionOptions options, OnnxOptionsFromFlags(a.input_shapes, a.fixed_inputs, feeds));
  options.backend = a.backend;
  options.threads = a.threads;
  options.recompile_if_stale = a.recompile_if_stale;
  options.verify_weights = a.verify_weights;
  KILN_ASSIGN_OR_RETURN(options.precision, ParsePrecisionFlag(a.precision, Precision::kFp32));
  KILN_ASSIGN_OR_RETURN(auto session, OnnxSession::Load(a.model, options));
  std::vector<TensorType> types;
  uint64_t seed = 1;
  for (const OnnxTensorInfo& i : session->inputs()) {
    auto it = feeds.find(i.name);
    if (it == feeds.end()) {
      auto shape = options.input_shapes.find(i.name);
      TensorType t{i.dtype, shape != options.input_shapes.end() ? shape->second : i.dims};
      for (int64_t d : t.dims) {
        if (d < 0) return InvalidArgument("input {} has shape [{}]: give --input-shape or --input", i.name, DimsToString(i.dims));
      }
      it = feeds.emplace(i.name, RandomInput(t, seed++)).first;
    }
    types.push_back(it->second.type);
  }
  KILN_ASSIGN_OR_RETURN(CompiledTensorGraph * compiled, session->Compiled(types));
  std::vector<const void*> in;
  for (const OnnxTensorInfo& i : session->inputs()) in.push_back(feeds.at(i.name).bytes.data());
  std::vector<HostTensor> outputs;
  std::vector<void*> out;
  for (const TensorType& t : compiled->output_types()) outputs.emplace_back(t);
  for (HostTensor& h : outputs) out.push_back(h.bytes.data());
  ThreadPool* pool = session->pool();

  std::vector<double> seconds;
  for (int r = 0; r < a.warmup + a.runs; ++r) {
    auto start = Clock::now();
    KILN_RETURN_IF_ERROR(compiled->Run(in, out, pool));
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    if (r >= a.warmup) seconds.push_back(s);
  }
  const bench::Summary lat = bench::Summarize(seconds);
  const double flops = compiled->flops();
  const bench::ComputeFigure* fma = roofline != nullptr ? roofline->Find("fp32_fma") : nullptr;
  const double peak = fma != nullptr && fma->supported ? fma->per_second : 0;
  const double achieved = lat.median > 0 ? flops / lat.median : 0;

  fmt::print("{}\n{}; {} threads, backend {}, precision {}\ninputs:", machine, a.model, pool->num_threads(),
             a.backend, PrecisionName(options.precision));
  for (size_t i = 0; i < types.size(); ++i) fmt::print(" {} {}", session->inputs()[i].name, types[i].ToString());
  fmt::print("\n\n{:<10} {:>10} {:>10} {:>10} {:>10} {:>12} {:>10}\n", "runtime", "p50 ms", "p90 ms", "p99 ms", "min ms",
             "GFLOP/s", "of peak");
  const std::string frac = peak > 0 ? fmt::format("{:.1f}%", 100 * achieved / peak) : "-";
  fmt::print("{:<10} {:>10.3f} {:>10.3f} {:>10.3f} {:>10.3f} {:>12.2f} {:>10}\n", "kiln", lat.median * 1e3,
             lat.p90 * 1e3, lat.p99 * 1e3, lat.min * 1e3, achieved / 1e9, frac);
  nlohmann::ordered_json j;
  j["machine"] = machine;
  j["model"] = a.model;
  j["threads"] = pool->num_threads();
  j["precision"] = PrecisionName(options.precision);
  j["flops_per_run"] = flops;
  j["kiln"] = {{"latency_s", bench::ToJson(lat)}, {"gflops_per_s", achieved / 1e9}};
  if (peak > 0) j["roofline"] = {{"figure", "fp32_fma"}, {"per_second", peak}, {"fraction", achieved / peak}};

  if (!a.onnxruntime.empty()) {
    KILN_ASSIGN_OR_RETURN(nlohmann::json ort, RunOnnxruntime(a, pool->num_threads(), feeds));
    auto ms = [&](const char* k) { return ort.value(k, 0.0); };
    fmt::print("{:<10} {:>10.3f} {:>10.3f} {:>10.3f} {:>10.3f} {:>12.2f} {:>10}\n", "ort", ms("p50_ms"),
               ms("p90_ms"), ms("p99_ms"), ms("min_ms"), ms("p50_ms") > 0 ? flops / (ms("p50_ms") * 1e6) : 0.0, "");
    if (ms("p50_ms") > 0) fmt::print("kiln / onnxruntime median latency: {:.3f}\n", lat.median * 1e3 / ms("p50_ms"));
    j["onnxruntime"] = ort;
  }

  if (a.layers) {
    // Per node: the time between consecutive steps' dumps (each step
    // synchronizes before its dump), for nodes of --layers-min-mflop or more.
    const Graph& g = compiled->graph();
    std::map<std::string, int32_t> producer;
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      for (ValueId o : g.nodes()[i].outputs) producer[g.value(o).name] = static_cast<int32_t>(i);
    }
    std::map<int32_t, std::vector<double>> node_seconds;
    for (int r = 0; r < std::max(3, a.runs / 2); ++r) {
      auto last = Clock::now();
      int32_t last_node = -1;
      DumpFn dump = [&](const std::string& name, const BoundValue&, int64_t) {
        auto it = producer.find(name);
        if (it == producer.end() || it->second == last_node) return;
        auto now = Clock::now();
        node_seconds[it->second].push_back(std::chrono::duration<double>(now - last).count());
        last = now;
        last_node = it->second;
      };
      KILN_RETURN_IF_ERROR(compiled->Run(in, out, pool, &dump));
    }
    // GFLOP/s and the fraction count the op's own FLOPs (a convolution's
    // direct 2 x C x M x kh x kw a pixel), whatever the kernel does: a
    // Winograd kernel's products are fewer, so it can show over 100%.
    fmt::print(
        "\nnodes of {} MFLOP or more (median of {} runs):\n{:<44} {:<16} {:>9} {:>9} {:>10} {:>8}  {}\n",
        a.layers_min_mflop, std::max(3, a.runs / 2), "node", "op", "MFLOP", "ms", "GFLOP/s", "of peak",
        "kernel");
    nlohmann::json layers = nlohmann::json::array();
    for (const auto& [i, times] : node_seconds) {
      const Node& n = g.nodes()[static_cast<size_t>(i)];
      const double f = EstimateCost(g, n, ShapeEnv{1, 1, 1, 1}).flops;
      if (f < a.layers_min_mflop * 1e6) continue;
      const double t = bench::Summarize(times).median;
      const double rate = t > 0 ? f / t : 0;
      const std::string op = n.op == OpKind::kTensorOp ? n.op_type : OpName(n.op);
      const std::string kernel = compiled->KernelOf(n.name);
      fmt::print("{:<44} {:<16} {:>9.1f} {:>9.3f} {:>10.2f} {:>8}  {}\n", n.name.substr(0, 44), op, f / 1e6,
                 t * 1e3, rate / 1e9, peak > 0 ? fmt::format("{:.1f}%", 100 * rate / peak) : "-", kernel);
      layers.push_back({{"node", n.name},
                        {"op", op},
                        {"flops", f},
                        {"seconds", t},
                        {"fraction", peak > 0 ? rate / peak : 0},
                        {"kernel", kernel}});
    }
    j["layers"] = layers;
    // Every node, summed by op type: where the time of small models goes.
    std::map<std::string, std::pair<int, double>> by_op;
    double total = 0;
    for (const auto& [i, times] : node_seconds) {
      const Node& n = g.nodes()[static_cast<size_t>(i)];
      const double t = bench::Summarize(times).median;
      auto& [count, seconds] = by_op[n.op == OpKind::kTensorOp ? n.op_type : OpName(n.op)];
      count += 1;
      seconds += t;
      total += t;
    }
    std::vector<std::pair<std::string, std::pair<int, double>>> ops(by_op.begin(), by_op.end());
    std::sort(ops.begin(), ops.end(), [](const auto& x, const auto& y) { return x.second.second > y.second.second; });
    fmt::print("\ntime by op type (medians summed, all {} nodes):\n{:<24} {:>6} {:>9} {:>7}\n", node_seconds.size(), "op",
               "nodes", "ms", "share");
    nlohmann::json op_rows = nlohmann::json::array();
    for (const auto& [op, cs] : ops) {
      fmt::print("{:<24} {:>6} {:>9.3f} {:>6.1f}%\n", op, cs.first, cs.second * 1e3,
                 total > 0 ? 100 * cs.second / total : 0.0);
      op_rows.push_back({{"op", op}, {"nodes", cs.first}, {"seconds", cs.second}});
    }
    j["op_types"] = op_rows;
  }
  if (!a.json.empty()) {
    std::ofstream f(a.json);
    f << j.dump(2) << "\n";
    if (!f) return InvalidArgument("--json {}: cannot write", a.json);
  }
  return Status::Ok();
}

}  // namespace kiln::cli
