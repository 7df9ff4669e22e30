// Compiling and running a tensor graph.
#include "compiler/compiled_tensor_graph.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "compiler/bind.h"
#include "compiler/concat_views.h"
#include "compiler/qdq_fusions.h"
#include "compiler/shape_views.h"
#include "compiler/shared_arenas.h"
#include "compiler/tensor_fusions.h"
#include "compiler/tensor_layouts.h"
#include "compiler/tensor_precision.h"
#include "compiler/tensor_rewrites.h"
#include "core/cpu_info.h"
#include "core/thread_pool.h"

namespace kiln {

CompiledTensorGraph::~CompiledTensorGraph() = default;

namespace {

// The backend to compile for, and the report's fields every path fills.
Expected<Backend*> TargetAndReport(const TensorCompileOptions& options, CompileReport* report) {
  BackendRegistry& backends = BackendRegistry::Get();
  Backend* target = backends.Find(options.backend);
  if (target == nullptr) {
    return NotFound("backend '{}': available backends are {} (others load as plugins: --backend-plugin PATH "
                    "or KILN_BACKEND_PATH)",
                    options.backend, backends.Names());
  }
  report->backend = target->name();
  report->precision = options.precision;
  report->threads = options.threads;
  for (Backend* b : backends.All()) report->domain_names[b->domain().id()] = b->domain().name();
  return target;
}

}  // namespace

Expected<std::unique_ptr<CompiledTensorGraph>> CompiledTensorGraph::Compile(Graph graph, std::vector<ValueId> inputs,
                                                                            std::vector<ValueId> outputs,
                                                                            const TensorCompileOptions& options,
                                                                            std::vector<std::string> folded) {
  auto start = std::chrono::steady_clock::now();
  auto m = std::unique_ptr<CompiledTensorGraph>(new CompiledTensorGraph());
  m->graph_ = std::move(graph);
  m->inputs_ = std::move(inputs);
  m->outputs_ = std::move(outputs);
  Graph& g = m->graph_;
  BackendRegistry& backends = BackendRegistry::Get();
  CompileReport& report = m->report_;
  KILN_ASSIGN_OR_RETURN(Backend * target, TargetAndReport(options, &report));
  for (std::string& f : folded) report.legalize.rewrites.push_back(std::move(f));

  // Stage 1: legalize: the rewrites every target gets, then placement (the
  // cost shape of a tensor graph is the graph itself).
  // QDQ convolutions and matrix products first: constant folding would turn their weights to fp32.
  KILN_RETURN_IF_ERROR(FuseQdqProducts(g, &report.legalize.rewrites));
  KILN_RETURN_IF_ERROR(RewriteTensorGraph(g, &report.legalize.rewrites));
  const ShapeEnv env{1, 1, 1, 1};
  KILN_RETURN_IF_ERROR(Legalize(g, *target, backends.cpu(), env, &report.legalize));
  // Stage 3: fuse.
  if (options.fuse) KILN_RETURN_IF_ERROR(FuseTensorOps(g, backends, &report.fuse.fusions));
  KILN_RETURN_IF_ERROR(ApplyTensorPrecision(g, backends, options.precision, &report.fuse.precision));
  // Stage 2: activation layouts, domains, transfers, the arena.
  TensorLayoutDecisions layouts;
  LayoutQuestions ask = BackendLayoutQuestions(backends);
  if (!options.layouts) {
    // Only what a backend cannot run row-major.
    ask.wanted = [wanted = ask.wanted, takes = ask.takes](const Graph& g, const Node& n) {
      return takes(g, n, TensorLayout::kRowMajor) ? TensorLayout::kRowMajor : wanted(g, n);
    };
  }
  KILN_RETURN_IF_ERROR(ChooseTensorLayouts(g, ask, &layouts));
  report.layout.activation_layouts = std::move(layouts.lines);
  if (report.layout.activation_layouts.empty()) report.layout.activation_layouts.push_back("activations: row-major throughout");
  KILN_RETURN_IF_ERROR(AssignDomainsAndTransfers(g, backends, &report.layout));
  KILN_ASSIGN_OR_RETURN(int views, MakeViews(g, backends.cpu().name()));
  if (views > 0) {
    report.layout.activation_layouts.push_back(fmt::format(
        "views: {} reshapes, slices and splits share their input's buffer (no step at run time)", views));
  }
  KILN_ASSIGN_OR_RETURN(int concat_views, MakeConcatViews(g, backends.cpu().name()));
  if (concat_views > 0) {
    report.layout.activation_layouts.push_back(fmt::format(
        "views: {} concats have their inputs written in place in their output's buffer (no step at run time)",
        concat_views));
  }
  // The graph as an artifact stores it: before packing, which the
  // backends redo (adopting the stored layouts) at load.
  if (options.keep_compilation) m->kept_.emplace().graph = g;
  KILN_RETURN_IF_ERROR(m->PackPlanAndBind(options, nullptr));
  if (m->kept_) {
    m->kept_->plans = {m->plan_};
    m->kept_->report = report;
  }
  report.compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return m;
}

Expected<std::unique_ptr<CompiledTensorGraph>> CompiledTensorGraph::FromStored(StoredCompilation stored,
                                                                               const TensorCompileOptions& options) {
  auto start = std::chrono::steady_clock::now();
  if (stored.plans.size() != 1) return Corrupt("compiled graph: {} plans for one tensor graph", stored.plans.size());
  auto m = std::unique_ptr<CompiledTensorGraph>(new CompiledTensorGraph());
  m->graph_ = std::move(stored.graph);
  // The inputs and outputs are the values with an io slot: inputs first.
  std::vector<std::pair<int32_t, ValueId>> io;
  for (ValueId v = 0; v < static_cast<ValueId>(m->graph_.values().size()); ++v) {
    if (m->graph_.value(v).io_slot >= 0) io.emplace_back(m->graph_.value(v).io_slot, v);
  }
  std::sort(io.begin(), io.end());
  for (size_t i = 0; i < io.size(); ++i) {
    const Value& v = m->graph_.value(io[i].second);
    if (io[i].first != static_cast<int32_t>(i)) return Corrupt("compiled graph: io slots are not 0 to {}", io.size() - 1);
    if (v.is_graph_input && !m->outputs_.empty()) return Corrupt("compiled graph: input {} after an output", v.name);
    (v.is_graph_input ? m->inputs_ : m->outputs_).push_back(io[i].second);
  }
  CompileReport& report = m->report_;
  KILN_RETURN_IF_ERROR(TargetAndReport(options, &report).status());
  report.legalize = std::move(stored.report.legalize);
  report.fuse = std::move(stored.report.fuse);
  report.layout = std::move(stored.report.layout);
  report.from_artifact = true;
  const MemoryPlan plan = std::move(stored.plans[0]);
  KILN_RETURN_IF_ERROR(m->PackPlanAndBind(options, &plan));
  report.compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return m;
}

Status CompiledTensorGraph::PackPlanAndBind(const TensorCompileOptions& options, const MemoryPlan* stored_plan) {
  Graph& g = graph_;
  BackendRegistry& backends = BackendRegistry::Get();
  CompileReport& report = report_;
  const ShapeEnv env{1, 1, 1, 1};
  g.laid_out = options.laid_out;  // the kernels made from here on find and record their layouts there
  KILN_RETURN_IF_ERROR(PackWeights(g, backends, W8A8Options{}, &packed_, &report.layout));
  std::vector<size_t> scratch = ScratchNeeds(g, backends, env);
  if (stored_plan != nullptr) {
    if (stored_plan->env.tokens != env.tokens || stored_plan->env.context_rows != env.context_rows) {
      return Corrupt("compiled graph: its plan is not a tensor graph's");
    }
    KILN_RETURN_IF_ERROR(CheckStoredScratch(g, {*stored_plan}, {scratch}));
    plan_ = *stored_plan;
  } else {
    KILN_ASSIGN_OR_RETURN(plan_, PlanMemory(g, env, scratch));
  }
  report.arena_bytes = plan_.arena_bytes;
  std::map<int32_t, uint8_t*> bases;
  if (options.shared_arenas != nullptr) {
    shared_arenas_ = options.shared_arenas;
    KILN_RETURN_IF_ERROR(shared_arenas_->Reserve(options.arena_user, plan_.arena_bytes, backends));
    bases = shared_arenas_->bases();
    bound_generation_ = shared_arenas_->generation();
  } else {
    KILN_ASSIGN_OR_RETURN(bases, AllocateArenas(plan_.arena_bytes, backends, &arenas_));
  }
  // Stage 4: bind.
  KILN_RETURN_IF_ERROR(Bind(bases));
  report.buckets.push_back({plan_.env, plan_.arena_bytes, plan_.naive_bytes, program_->steps().size()});
  for (const Node& n : g.nodes()) flops_ += EstimateCost(g, n, env).flops;
  io_.resize(inputs_.size() + outputs_.size());
  report.isa = GetCpuInfo().BestIsa();
  std::vector<std::string> shapes;
  for (ValueId v : inputs_) shapes.push_back(g.value(v).name + ":" + DimsToString(g.value(v).dims));
  report.input_shapes = fmt::format("{}", fmt::join(shapes, " "));
  return Status::Ok();
}

Status CompiledTensorGraph::Bind(const std::map<int32_t, uint8_t*>& bases) {
  program_.reset();  // its kernels' pointers into the old arena go first
  BindInputs in;
  in.graph = &graph_;
  in.plan = &plan_;
  in.arena_base = bases;
  in.packed = &packed_;
  in.backends = &BackendRegistry::Get();
  KILN_ASSIGN_OR_RETURN(program_, BindProgram(in));
  return Status::Ok();
}

std::vector<TensorType> CompiledTensorGraph::input_types() const {
  std::vector<TensorType> t;
  for (ValueId v : inputs_) t.push_back(graph_.value(v).tensor_type());
  return t;
}

std::vector<TensorType> CompiledTensorGraph::output_types() const {
  std::vector<TensorType> t;
  for (ValueId v : outputs_) t.push_back(graph_.value(v).tensor_type());
  return t;
}

Status CompiledTensorGraph::Run(const std::vector<const void*>& inputs, const std::vector<void*>& outputs,
                                ThreadPool* pool, const DumpFn* dump) {
  if (inputs.size() != inputs_.size() || outputs.size() != outputs_.size()) {
    return InvalidArgument("run: {} inputs and {} outputs given, the graph has {} and {}", inputs.size(),
                           outputs.size(), inputs_.size(), outputs_.size());
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i] == nullptr && graph_.value(inputs_[i]).cols > 0) {
      return InvalidArgument("run: no buffer for input {}", graph_.value(inputs_[i]).name);
    }
    io_[i] = const_cast<void*>(inputs[i]);  // only read
  }
  for (size_t j = 0; j < outputs.size(); ++j) {
    if (outputs[j] == nullptr && graph_.value(outputs_[j]).cols > 0) {
      return InvalidArgument("run: no buffer for output {}", graph_.value(outputs_[j]).name);
    }
    io_[inputs.size() + j] = outputs[j];
  }
  if (shared_arenas_ != nullptr && shared_arenas_->generation() != bound_generation_) {
    KILN_RETURN_IF_ERROR(Bind(shared_arenas_->bases()));
    bound_generation_ = shared_arenas_->generation();
  }
  if (program_ == nullptr) return Internal("run: the graph's last bind failed");
  Status error;
  RunState state;
  state.pool = pool;
  state.tensor_io = io_.data();
  state.tensor_error = &error;
  KILN_RETURN_IF_ERROR(program_->Run(state, dump));
  return error;
}

std::string CompiledTensorGraph::KernelOf(const std::string& node) const {
  if (program_ == nullptr) return {};
  for (const Step& step : program_->steps()) {
    if (step.name == node) return step.kernel;
  }
  return {};
}

std::string TensorPlanText(const CompiledTensorGraph& compiled, bool per_node) {
  const Graph& g = compiled.graph();
  std::string s = compiled.report().ToString(g, false);
  if (!per_node) return s;
  s += "\n[nodes]\n";
  for (const Node& n : g.nodes()) {
    std::string out;
    for (ValueId o : n.outputs) out += (out.empty() ? "" : " ") + g.value(o).tensor_type().ToString();
    const std::string op = n.op == OpKind::kTensorOp ? n.op_type : OpName(n.op);
    std::string fused = n.fused_from.empty() ? "" : fmt::format("  (fused {})", fmt::join(n.fused_from, ", "));
    if (n.named_attrs.Has("compute_dtype"))
      fused += "  [" + *n.named_attrs.String("compute_dtype") + " products]";
    // The activation layout the node runs in (a reorder: from -> to).
    auto layout = n.named_attrs.String("activation_layout");
    auto from = n.named_attrs.String("from"), to = n.named_attrs.String("to");
    std::string in_layout = layout.ok() ? *layout : "row-major";
    if (n.op != OpKind::kTensorOp) {
      in_layout = n.outputs.empty() || !g.value(n.outputs[0]).is_tensor()
                      ? "-"
                      : TensorLayoutName(g.value(n.outputs[0]).layout);
    }
    if (n.op_type == "kiln.Reorder" && from.ok() && to.ok()) in_layout = *from + "->" + *to;
    const std::string kernel = compiled.KernelOf(n.name);
    if (!kernel.empty()) fused += "  [kernel " + kernel + "]";
    s += fmt::format("  {:<40} {:<18} {:<10} {:<20} {}{}\n", n.name, op, n.backend, in_layout, out, fused);
  }
  return s;
}

}  // namespace kiln
