// kiln_bench_kv_landing: a prefill engine sends each prompt's KV blocks
// over UCX on loopback to a decode-side connector in the same process
// (which only records when messages land), once with whole blocks after the
// pass and once per layer during it. For each prompt, prefilled in one
// pass, it reports the time from the pass's end to its last block landed
// whole (every layer), and from the request's arrival to that landing,
// with the medians over the runs. The pass's end is the request's
// first-token time: the engine takes it after the pass and after handing
// the pass's blocks to the connector (for whole blocks, that includes
// reading them out of the cache), so the first figure is what a prefill
// instance's answer waits for beyond its pass; the second does not depend
// on where the pass's end is taken.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <random>

#include <unistd.h>
#include <vector>

#include "disagg/ucx_kv_connector.h"
#include "engine/llm_engine.h"
#include "format/weight_store.h"

namespace kiln {
namespace {

struct Args {
  EngineOptions engine;
  int prompt_tokens = 512;
  int runs = 7;
  int port = 0;  // 0: one picked from the process id
};

// The decode side: records when each block of a transfer is whole.
class LandingClock {
 public:
  explicit LandingClock(int num_layers) : num_layers_(num_layers) {}

  void Take(KvConnector& connector) {
    KvLanded landed = connector.TakeLanded();
    const double now = EngineClock();
    std::lock_guard<std::mutex> lock(mu_);
    for (const KvBlockPayload& b : landed.blocks) {
      int& layers = layers_[{b.transfer_id, b.block_index}];
      layers += b.layer_end - b.layer_begin;
      if (layers == num_layers_) last_whole_[b.transfer_id] = now;
    }
    for (const KvTransferEnd& e : landed.ends) {
      ended_[e.transfer_id] = e.num_blocks;
      connector.Acknowledge(e.transfer_id, true);
    }
    changed_.notify_all();
  }
  // When the transfer's last block was whole, once its end has landed.
  double WaitLastWhole(uint64_t transfer) {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [&] { return ended_.count(transfer) > 0; });
    return last_whole_[transfer];
  }

 private:
  int num_layers_;
  std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::pair<uint64_t, int32_t>, int> layers_;
  std::map<uint64_t, double> last_whole_;
  std::map<uint64_t, int32_t> ended_;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

Status Run(const Args& a) {
  KILN_ASSIGN_OR_RETURN(LoadedModel model, LoadModel(a.engine));
  const int64_t vocab = model.weights->config().vocab_size;
  std::mt19937 rng(7);
  uint64_t transfer = 0;
  fmt::print("{} prompt tokens, one pass each, {} runs per mode (the first of each mode not counted)\n",
             a.prompt_tokens, a.runs);
  for (bool per_layer : {false, true}) {
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<LLMEngine> engine, LLMEngine::Create(model, a.engine));
    const KvPeerIdentity identity = engine->KvIdentity("kv-landing-bench");
    const std::string address = fmt::format("127.0.0.1:{}", a.port + (per_layer ? 1 : 0));
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<KvConnector> decode,
                          disagg::CreateUcxKvConnector({.listen = address, .identity = identity}));
    LandingClock clock(static_cast<int>(identity.num_layers));
    KvConnector* decode_ptr = decode.get();
    decode->SetLandedCallback([&clock, decode_ptr] { clock.Take(*decode_ptr); });
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<KvConnector> prefill,
                          disagg::CreateUcxKvConnector({.peer = address, .identity = identity}));
    KILN_RETURN_IF_ERROR(engine->AttachKvConnector(std::move(prefill), 30, per_layer));
    std::vector<double> after_pass, after_arrival;
    for (int run = 0; run <= a.runs; ++run) {
      GenerationRequest r;
      std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(vocab - 1));
      for (int i = 0; i < a.prompt_tokens; ++i) r.prompt_ids.push_back(token(rng));
      r.params.temperature = 0;
      r.params.max_tokens = 1;
      r.kv_transfer_id = ++transfer;
      std::vector<GenerationRequest> rs;
      rs.push_back(std::move(r));
      KILN_ASSIGN_OR_RETURN(std::vector<GenerationResult> results, engine->Generate(std::move(rs)));
      const double pass_end = results[0].stats.first_token_time;
      const double landed = clock.WaitLastWhole(transfer);
      if (run == 0) continue;  // warms the connection and the caches
      after_pass.push_back((landed - pass_end) * 1e3);
      after_arrival.push_back((landed - results[0].stats.arrival_time) * 1e3);
    }
    auto runs = [](const std::vector<double>& v) {
      std::string all;
      for (double ms : v) all += fmt::format(" {:.2f}", ms);
      return all;
    };
    fmt::print("{:>12}: last block landed {:.2f} ms after the pass (median; runs:{})\n",
               per_layer ? "per layer" : "whole blocks", Median(after_pass), runs(after_pass));
    fmt::print("{:>12}  and {:.2f} ms after the request's arrival (median; runs:{})\n", "",
               Median(after_arrival), runs(after_arrival));
  }
  return Status::Ok();
}

}  // namespace
}  // namespace kiln

int main(int argc, char** argv) {
  kiln::Args a;
  a.engine.threads = 2;
  a.engine.max_num_batched_tokens = 2048;
  CLI::App app("Time from a prompt's pass to its last KV block landed, per layer against whole blocks");
  app.add_option("-m,--model", a.engine.model, "Model folder or .gguf")->required();
  app.add_option("--load-format", a.engine.load_format, "auto or dummy (generated weights)");
  app.add_option("--preset", a.engine.preset, "With --load-format dummy: a published model's shapes");
  app.add_option("--threads", a.engine.threads)->capture_default_str();
  app.add_option("--prompt-tokens", a.prompt_tokens)->capture_default_str();
  app.add_option("--runs", a.runs)->capture_default_str();
  app.add_option("--port", a.port, "Loopback ports port and port + 1 for the two modes (0: picked from the process id)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  a.engine.max_num_batched_tokens = std::max(a.engine.max_num_batched_tokens, a.prompt_tokens);
  if (a.port == 0) a.port = 20000 + static_cast<int>(getpid() % 20000) * 2 % 20000;
  kiln::Status s = kiln::Run(a);
  if (!s.ok()) {
    fmt::print(stderr, "kiln_bench_kv_landing: {}\n", s.ToString());
    return 1;
  }
  return 0;
}
