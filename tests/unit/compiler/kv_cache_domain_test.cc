// Where the compiler puts the KV cache: in the memory domain of the backend
// whose nodes write and read it, host memory only when that is the CPU.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "compiler/compiled_model.h"
#include "compiler_test_util.h"
#include "testing/model_runner_for_tests.h"

namespace kiln {
namespace kv_cache_domain_tests {

SupportEntry F32Entry(OpKind op, bool weights = false) {
  SupportEntry e;
  e.op = op;
  e.activation_dtypes = {DType::kF32};
  if (weights) {
    e.weight_dtypes = {DType::kF32};
    e.weight_layout = "panel";
  }
  return e;
}

// An in-process stand-in with a memory domain of its own that runs fused
// attention (and, with `writes_kv`, the KV write) with the CPU's kernels on
// the host's stream: what it tests is where the compiler allocates the
// cache, not the device runtime (the plugins' tests do that).
class AttentionStandIn : public Backend {
 public:
  AttentionStandIn(std::string name, bool writes_kv) : name_(std::move(name)), domain_(name_ + "-mem", NewDomainId()) {
    for (OpKind op : {OpKind::kRmsNorm, OpKind::kAddRmsNorm, OpKind::kAdd, OpKind::kSiluMul, OpKind::kCast,
                      OpKind::kTransfer, OpKind::kAttention}) {
      support_.Add(F32Entry(op));
    }
    support_.Add(F32Entry(OpKind::kLinear, true));
    support_.Add(F32Entry(OpKind::kGateUpSiluMul, true));
    if (writes_kv) support_.Add(F32Entry(OpKind::kKvWrite));
  }
  const std::string& name() const override { return name_; }
  std::string description() const override { return "attention on its own memory (test)"; }
  const SupportList& support() const override { return support_; }
  MemoryDomain& domain() override { return domain_; }
  Expected<std::shared_ptr<const PackedMatrix>> PackWeight(const PackRequest& request) override {
    PackRequest as_float = request;
    as_float.int8 = false;
    return Cpu().PackWeight(as_float);
  }
  size_t ScratchBytes(const Graph& g, const Node& node, const ShapeEnv& capacity) const override {
    return Cpu().ScratchBytes(g, node, capacity);
  }
  Expected<Step> Bind(const BindContext& ctx) override {
    KILN_ASSIGN_OR_RETURN(Step step, Cpu().Bind(ctx));
    step.backend = name_;
    return step;
  }

 private:
  static Backend& Cpu() { return BackendRegistry::Get().cpu(); }
  std::string name_;
  MemoryDomain domain_;
  SupportList support_;
};

// Registered once per process.
Backend& AttentionBackend(const std::string& name, bool writes_kv) {
  BackendRegistry& r = BackendRegistry::Get();
  if (Backend* b = r.Find(name)) return *b;
  EXPECT_TRUE(r.Register(std::make_unique<AttentionStandIn>(name, writes_kv)).ok());
  return *r.Find(name);
}

CompileOptions Fp32On(const std::string& backend) {
  CompileOptions o;
  o.backend = backend;
  o.precision = Precision::kFp32;
  o.threads = 2;
  o.max_batch_tokens = 16;
  return o;
}

std::string BackendOf(const CompiledModel& m, OpKind op) {
  for (const Node& n : m.graph().nodes()) {
    if (n.op == op) return n.backend;
  }
  return "";
}

// Allocates a cache of 4 blocks and checks that exactly its bytes landed in
// `domain`.
void ExpectAllocatedIn(const CompiledModel& m, MemoryDomain& domain) {
  const size_t before = domain.bytes_in_use();
  auto cache = m.AllocateKvCache(4);
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  EXPECT_EQ(domain.bytes_in_use() - before, static_cast<size_t>((*cache)->TotalBytes()));
  EXPECT_EQ((*cache)->layout().num_blocks, 4);
}

TEST(KvCacheDomain, HostMemoryWhenTheCpuRunsAttention) {
  auto store = testing::SmallModel(Architecture::kQwen2);
  auto m = CompiledModel::Compile(*store, Fp32On("cpu"));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ((*m)->kv_cache_domain().id(), HostMemory().id());
  ExpectAllocatedIn(**m, HostMemory());
  EXPECT_FALSE((*m)->AllocateKvCache(0).ok());
}

// testaccel-mm runs decomposed attention's matmuls, but the KV write and
// the gather (the nodes that address the cache) stay on the CPU.
TEST(KvCacheDomain, HostMemoryWhenOnlyAttentionsMatmulsRunElsewhere) {
  auto store = testing::SmallModel(Architecture::kQwen2);
  auto m = CompiledModel::Compile(*store, Fp32On("testaccel-mm"));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(BackendOf(**m, OpKind::kAttnScores), "testaccel-mm");
  EXPECT_EQ(BackendOf(**m, OpKind::kGatherKv), "cpu");
  EXPECT_EQ(BackendOf(**m, OpKind::kKvWrite), "cpu");
  EXPECT_EQ((*m)->kv_cache_domain().id(), HostMemory().id());
}

TEST(KvCacheDomain, TheAcceleratorsMemoryWhenItRunsAttentionAndTheKvWrite) {
  Backend& accel = AttentionBackend("testaccel-attn", /*writes_kv=*/true);
  ASSERT_NE(accel.domain().id(), HostMemory().id());
  auto store = testing::SmallModel(Architecture::kQwen2);
  auto m = CompiledModel::Compile(*store, Fp32On("testaccel-attn"));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(BackendOf(**m, OpKind::kAttention), "testaccel-attn");
  EXPECT_EQ(BackendOf(**m, OpKind::kKvWrite), "testaccel-attn");
  EXPECT_EQ((*m)->kv_cache_domain().id(), accel.domain().id());
  const size_t host_before = HostMemory().bytes_in_use();
  ExpectAllocatedIn(**m, accel.domain());
  EXPECT_EQ(HostMemory().bytes_in_use(), host_before);

  // It computes with the CPU's kernels, so over its own cache it must give
  // the CPU's logits bit for bit.
  auto cpu = CompiledModel::Compile(*store, Fp32On("cpu"));
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  const std::vector<std::vector<int32_t>> prompts = {{5, 9, 11, 3, 60, 7, 7, 21, 40, 2, 33}};
  testing::DirectRunner on_cpu(**cpu, 1, 32), on_accel(**m, 1, 32);
  const auto a = on_cpu.Prefill(prompts, 4, true);
  const auto b = on_accel.Prefill(prompts, 4, true);
  ASSERT_EQ(a[0].size(), b[0].size());
  EXPECT_EQ(std::memcmp(a[0].data(), b[0].data(), a[0].size() * sizeof(float)), 0);
}

TEST(KvCacheDomain, RefusesAKvWriteInAnotherDomainThanAttention) {
  AttentionBackend("testaccel-attn-only", /*writes_kv=*/false);
  auto store = testing::SmallModel(Architecture::kQwen2);
  auto m = CompiledModel::Compile(*store, Fp32On("testaccel-attn-only"));
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kUnsupported) << m.status().ToString();
  EXPECT_NE(m.status().message().find("KV cache"), std::string::npos) << m.status().message();
}

}  // namespace kv_cache_domain_tests
}  // namespace kiln
