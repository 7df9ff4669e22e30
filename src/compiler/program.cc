// Running a Program: steps enqueued on their backends' streams, ordered
// across streams by events, synchronized at the pass's end.
#include "compiler/program.h"

#include <algorithm>
#include <atomic>

#include "backend/kv_cache.h"

namespace kiln {
namespace {

std::atomic<SyncFault> g_sync_fault{SyncFault::kNone};

// A copy in host memory of a value that lives in another domain (dumps
// read device values only through the owning backend's copies).
BoundValue StageOnHost(const BoundValue& v, int64_t rows, Backend& owner, std::vector<uint8_t>* staging) {
  const size_t elem = static_cast<size_t>(DTypeBytes(v.dtype, 1).value_or(4));
  const size_t row_bytes = static_cast<size_t>(v.cols) * elem;
  staging->assign(row_bytes * static_cast<size_t>(std::max<int64_t>(rows, 0)), 0);
  if (rows > 0) {
    owner.EnqueueCopy(CopyDirection::kDeviceToHost, {staging->data(), row_bytes, v.data,
                                                     static_cast<size_t>(v.row_stride) * elem, row_bytes,
                                                     static_cast<size_t>(rows)});
    owner.stream().Synchronize();
  }
  BoundValue shown = v;
  shown.data = staging->data();
  shown.row_stride = v.cols;
  shown.domain = HostMemory().id();
  return shown;
}

// The description a profiled run records for node `n`'s step, with the
// node's cost as a linear function of the rows (see KernelInfo).
std::shared_ptr<const KernelInfo> DescribeKernel(const Step& step, const Graph* g, const Node* n) {
  auto k = std::make_shared<KernelInfo>();
  k->name = step.name;
  k->op = n != nullptr && n->op == OpKind::kTensorOp ? n->op_type : OpName(step.op);
  k->backend = step.backend;
  if (g == nullptr || n == nullptr) return k;
  for (ValueId out : n->outputs) {
    const Value& v = g->value(out);
    if (v.rows == RowSpace::kNone) continue;
    if (k->dtype.empty()) k->dtype = DTypeName(v.dtype);
    k->outputs.push_back({v.rows, v.cols, v.dims});
  }
  auto cost = [&](const ShapeEnv& env, double* bytes, double* flops) {
    const NodeCost c = EstimateCost(*g, *n, env);
    *bytes = c.weight_bytes + c.activation_bytes;
    *flops = c.flops;
    if (n->op == OpKind::kEmbedding && !n->outputs.empty()) {
      // The rows gathered, not the whole table: about what is written.
      const Value& out = g->value(n->outputs.front());
      *bytes = c.activation_bytes + static_cast<double>(env.Rows(out.rows)) * static_cast<double>(out.RowBytes());
    }
  };
  cost(ShapeEnv{}, &k->bytes.constant, &k->flops.constant);
  for (int r = 0; r < 4; ++r) {
    ShapeEnv unit;
    int64_t* rows[] = {&unit.tokens, &unit.output_rows, &unit.context_rows, &unit.score_rows};
    *rows[r] = 1;
    cost(unit, &k->bytes.per_row[r], &k->flops.per_row[r]);
    k->bytes.per_row[r] -= k->bytes.constant;
    k->flops.per_row[r] -= k->flops.constant;
  }
  if (n->op == OpKind::kAttention || n->op == OpKind::kAttnScores || n->op == OpKind::kAttnValues) {
    // Each query row against its own sequence's context (the estimate
    // assumes every row sees all of the batch's context): 2 * head_dim
    // FLOPs per head for the scores, as many again for the values.
    const double per_pair = 2.0 * static_cast<double>(n->attrs.head_dim * n->attrs.n_heads);
    k->flops_per_score_row = n->op == OpKind::kAttention ? 2.0 * per_pair : per_pair;
  }
  if (n->op == OpKind::kAttention) {
    k->kv_elements_per_context_row = 2.0 * static_cast<double>(n->attrs.n_kv_heads * n->attrs.head_dim);
  }
  return k;
}

}  // namespace

void SetSyncFaultForTesting(SyncFault fault) { g_sync_fault.store(fault); }

Program::Program(ShapeEnv capacity, std::vector<Step> steps,
                 std::vector<std::vector<std::pair<std::string, BoundValue>>> step_outputs,
                 std::vector<ArenaSpan> arenas, std::map<int32_t, Backend*> domain_owners, const Graph* graph)
    : capacity_(capacity),
      steps_(std::move(steps)),
      step_outputs_(std::move(step_outputs)),
      arenas_(std::move(arenas)),
      domain_owners_(std::move(domain_owners)) {
  for (size_t i = 0; i < steps_.size(); ++i) {
    const bool has_node = graph != nullptr && i < graph->nodes().size();
    kernels_.push_back(DescribeKernel(steps_[i], graph, has_node ? &graph->nodes()[i] : nullptr));
  }
  events_.resize(steps_.size());
  Backend* previous = nullptr;
  for (size_t i = 0; i < steps_.size(); ++i) {
    Backend* b = steps_[i].executor;
    if (b == nullptr) continue;  // host-only Programs built by hand (tests)
    Stream* s = &b->stream();
    if (std::find(streams_.begin(), streams_.end(), s) == streams_.end()) streams_.push_back(s);
    if (previous != nullptr && &previous->stream() != s) events_[i] = previous->CreateEvent();
    previous = b;
  }
}

Status Program::Run(const RunState& state, const DumpFn* dump) const {
  const SyncFault fault = g_sync_fault.load();
  const bool profiling = ProfilingEnabled();
  ShapeEnv actual;
  if ((dump != nullptr || profiling) && state.batch != nullptr) {
    actual.tokens = state.batch->num_tokens;
    actual.output_rows = state.batch->num_output_rows;
    actual.context_rows = state.context_rows;
    actual.score_rows = state.score_rows;
  }
  const ShapeEnv profiled = state.batch != nullptr ? actual : capacity_;  // tensor graphs: their one shape
  double kv_elem_bytes = 0;
  if (profiling && state.kv_cache != nullptr) {
    const DTypeInfo& kv = GetDTypeInfo(state.kv_cache->layout().dtype);
    kv_elem_bytes = static_cast<double>(kv.block_bytes) / static_cast<double>(kv.block_size);
  }
  Stream* current = nullptr;
  std::vector<uint8_t> staging;
  for (size_t i = 0; i < steps_.size(); ++i) {
    const Step& step = steps_[i];
    Stream* stream = step.executor != nullptr ? &step.executor->stream() : &HostStream();
    if (events_[i] != nullptr && current != nullptr) {
      current->Record(*events_[i]);
      if (fault != SyncFault::kSkipEventWaits) stream->Wait(*events_[i]);
    }
    current = stream;
    const int64_t start_ns = profiling ? ProfileNow() : 0;
    if (step.enqueue) {
      step.enqueue(state);
    } else if (stream->is_inline()) {
      step.run(state);
    } else {
      // The state is copied: the kernel runs after this call returns.
      stream->Enqueue([&run = step.run, state] { run(state); });
    }
    if (profiling) {
      if (!stream->is_inline()) stream->Synchronize();
      RecordKernelCall(kernels_[i], profiled, kv_elem_bytes, start_ns);
    }
    if (step.kv_layer >= 0 && state.batch != nullptr && state.batch->on_kv_layer_written) {
      // The layer's keys and values must be in the cache before the
      // callback reads them.
      if (!stream->is_inline()) stream->Synchronize();
      state.batch->on_kv_layer_written.fn(state.batch->on_kv_layer_written.context, step.kv_layer);
    }
    if (dump == nullptr) continue;
    stream->Synchronize();
    for (const auto& [name, v] : step_outputs_[i]) {
      if (v.rows == RowSpace::kNone) continue;
      BoundValue shown = v;
      if (v.io_slot >= 0) {
        shown.data = v.Resolve(state);
        shown.io_slot = -1;
        shown.domain = HostMemory().id();
      } else if (v.is_output) {
        shown.data = reinterpret_cast<uint8_t*>(state.logits);
        shown.row_stride = state.logits_stride;
        shown.domain = HostMemory().id();
      } else if (v.domain != HostMemory().id()) {
        auto owner = domain_owners_.find(v.domain);
        if (owner == domain_owners_.end()) continue;
        shown = StageOnHost(v, actual.Rows(v.rows), *owner->second, &staging);
      }
      (*dump)(name, shown, actual.Rows(v.rows));
    }
  }
  if (fault == SyncFault::kSkipFinalSync) return Status::Ok();
  // The pass's edge: every stream done, then the arenas' contents are dead.
  for (Stream* s : streams_) s->Synchronize();
  for (const ArenaSpan& a : arenas_) a.owner->domain().Discard(a.data, a.bytes);
  for (Stream* s : streams_) KILN_RETURN_IF_ERROR(s->TakeError());
  return Status::Ok();
}

}  // namespace kiln
