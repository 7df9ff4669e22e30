// The test backend delegates the arithmetic to the CPU backend's kernels:
// what it tests is placement, transfers and memory domains.
#include "backend/test/test_backend.h"

#include <atomic>

#include "backend/cpu/cpu_backend.h"

namespace kiln {
namespace {

std::atomic<int32_t> g_next_domain{1};

SupportEntry Entry(OpKind op, std::vector<DType> weights = {}, int64_t max_cols = 0) {
  SupportEntry e;
  e.op = op;
  e.activation_dtypes = {DType::kF32};
  e.weight_dtypes = std::move(weights);
  if (!e.weight_dtypes.empty()) e.weight_layout = "panel";
  e.max_cols = max_cols;
  return e;
}

}  // namespace

SupportList TestBackend::DefaultSupport() {
  SupportList s;
  s.Add(Entry(OpKind::kLinear, {DType::kF32}, 4096));
  s.Add(Entry(OpKind::kGateUpSiluMul, {DType::kF32}, 4096));
  s.Add(Entry(OpKind::kRmsNorm));
  s.Add(Entry(OpKind::kAddRmsNorm));
  s.Add(Entry(OpKind::kAdd));
  s.Add(Entry(OpKind::kSiluMul));
  s.Add(Entry(OpKind::kCast));
  SupportEntry transfer = Entry(OpKind::kTransfer);
  transfer.activation_dtypes = {DType::kF32, DType::kBF16};
  s.Add(transfer);
  return s;
}

SupportList TestBackend::MatmulSupport() {
  SupportList s = DefaultSupport();
  s.Add(Entry(OpKind::kAttnScores));
  s.Add(Entry(OpKind::kMaskedSoftmax));
  s.Add(Entry(OpKind::kAttnValues));
  return s;
}

TestBackend::TestBackend(SupportList support, std::string name)
    : support_(std::move(support)),
      name_(std::move(name)),
      domain_(std::make_unique<MemoryDomain>(name_ + "-mem", g_next_domain.fetch_add(1))) {}

std::string TestBackend::description() const {
  return "a stand-in accelerator with a partial support list and its own memory domain (for testing placement)";
}

Expected<std::shared_ptr<const PackedMatrix>> TestBackend::PackWeight(const PackRequest& request) {
  // It multiplies in float only: an int8 request packs the weight as usual.
  PackRequest as_float;
  as_float.weight = request.weight;
  as_float.node = request.node;
  return BackendRegistry::Get().cpu().PackWeight(as_float);
}

size_t TestBackend::ScratchBytes(const Graph& g, const Node& node, const ShapeEnv& capacity) const {
  return BackendRegistry::Get().cpu().ScratchBytes(g, node, capacity);
}

Expected<Step> TestBackend::Bind(const BindContext& ctx) {
  KILN_ASSIGN_OR_RETURN(Step step, BackendRegistry::Get().cpu().Bind(ctx));
  step.backend = name_;
  return step;
}

}  // namespace kiln
