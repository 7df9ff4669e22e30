// `kiln serve`: an OpenAI-compatible HTTP server over one model. It listens
// at once (/health says 503 until the model is loaded), serves until
// SIGTERM or SIGINT, then stops accepting, lets running requests finish
// within --shutdown-timeout and exits 0.
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "bench/model_figures.h"
#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/profile_flags.h"
#include "cli/termination_signals.h"
#include "compiler/compiled_model.h"
#include "core/byte_size.h"
#include "core/log.h"
#include "engine/kv_connector.h"
#include "engine/kv_transfer.h"
#include "engine/model_identity.h"
#include "engine/llm_engine.h"
#ifdef KILN_HAVE_UCX
#include "disagg/ucx_kv_connector.h"
#endif
#include "server/api_server.h"
#include "server/server_options.h"

namespace kiln::cli {
namespace {

struct ServeArgs {
  EngineFlags engine;
  server::ServerOptions server;
  std::string max_body_size = "16MiB";
  bool no_access_log = false;
  uint64_t seed = 0;
  ProfileFlags profiling;
  std::string kv_listen;
  std::string kv_peer;
};

// Checks the prefill/decode flags before anything loads.
Status CheckRoleFlags(const ServeArgs& a) {
  const std::string& role = a.server.role;
  if (role == "both") {
    if (!a.kv_listen.empty() || !a.kv_peer.empty()) {
      return InvalidArgument("--kv-listen and --kv-peer need --role decode or --role prefill");
    }
    return Status::Ok();
  }
#ifndef KILN_HAVE_UCX
  return Unsupported(
      "--role {}: this kiln was built without UCX (install libucx-dev, scripts/setup.sh, and rebuild)", role);
#else
  if (role == "decode" && (a.kv_listen.empty() || !a.kv_peer.empty())) {
    return InvalidArgument("--role decode takes --kv-listen HOST:PORT (where prefill instances connect)");
  }
  if (role == "prefill" && (a.kv_peer.empty() || !a.kv_listen.empty())) {
    return InvalidArgument("--role prefill takes --kv-peer HOST:PORT (the decode instance's --kv-listen)");
  }
  return Status::Ok();
#endif
}

// Gives a prefill or decode instance's engine its connector, after the
// handshake with the peer (a prefill instance's start fails when the
// decode instance runs another model, block size or KV dtype).
Status AttachKvConnector(const ServeArgs& a, const EngineOptions& engine_options, LLMEngine& engine) {
#ifdef KILN_HAVE_UCX
  KILN_ASSIGN_OR_RETURN(std::string model_hash, ModelIdentityHash(engine_options));
  disagg::UcxKvConnectorOptions o;
  o.listen = a.kv_listen;
  o.peer = a.kv_peer;
  o.identity = engine.KvIdentity(std::move(model_hash));
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<KvConnector> connector, disagg::CreateUcxKvConnector(o));
  return engine.AttachKvConnector(std::move(connector), a.server.kv_transfer_timeout_seconds,
                                  a.server.kv_send_per_layer);
#else
  return Unsupported("--role {}: this kiln was built without UCX", a.server.role);
#endif
}

// Each open connection holds a descriptor; the usual soft limit of 1024
// would refuse connections long before --max-concurrent-connections.
void RaiseOpenFileLimit(int connections) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  const rlim_t wanted = static_cast<rlim_t>(connections) * 2 + 256;  // sockets waiting in the backlog too
  if (limit.rlim_cur >= wanted) return;
  limit.rlim_cur = limit.rlim_max == RLIM_INFINITY ? wanted : std::min(wanted, limit.rlim_max);
  if (setrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur < wanted) {
    KILN_LOG_WARN("open files are limited to {}; fewer than {} connections may be served at once",
                  limit.rlim_cur, connections);
  }
}

Status RunServe(const ServeArgs& a) {
  // Termination signals are taken by the watcher thread alone, so they are
  // blocked before any thread starts (resolving an artifact's flags already
  // starts the backends' worker threads): every thread inherits the mask.
  BlockTerminationSignals();
#ifdef KILN_HAVE_UCX
  if (a.server.role == "decode") disagg::AllowListenerAddressReuse();
#endif
  KILN_ASSIGN_OR_RETURN(EngineOptions engine_options, a.engine.Resolve());
  if (engine_options.model.empty() && engine_options.load_format != "dummy") {
    return InvalidArgument("no model: give -m PATH (a Hugging Face folder or a .gguf file)");
  }
  if (a.seed != 0) engine_options.seed = a.seed;
  KILN_RETURN_IF_ERROR(CheckRoleFlags(a));
  // KV transfers send one block table per sequence, so the sliding-window
  // layers stay in the full pool.
  if (a.server.role != "both") engine_options.kv_window_free = false;
  server::ServerOptions options = a.server;
  Expected<ByteSize> max_body_size = ParseByteSize(a.max_body_size);
  if (!max_body_size.ok()) {
    return InvalidArgument("--max-body-size {}: {}", a.max_body_size, max_body_size.status().message());
  }
  options.max_body_size = static_cast<size_t>(max_body_size->bytes);
  options.access_log = !a.no_access_log;
  if (options.served_model_name.empty()) {
    options.served_model_name = !engine_options.model.empty() ? server::DefaultServedModelName(engine_options.model)
                                                              : engine_options.preset;
  }
  KILN_RETURN_IF_ERROR(options.Validate());

  // A client that goes away must not kill the server with SIGPIPE; the
  // failed write reports it.
  ::signal(SIGPIPE, SIG_IGN);
  RaiseOpenFileLimit(options.max_concurrent_connections);

  server::ApiServer api(options);
  KILN_RETURN_IF_ERROR(api.Bind());
  KILN_LOG_INFO("listening on http://{}:{} as model \"{}\"{}; loading the model", options.host, api.port(),
                options.served_model_name, options.api_key.empty() ? "" : " (API key required)");

  Status load_status;
  int threads = 0;  // for the profile's roofline
  bench::WeightArithmetic arithmetic = bench::WeightArithmetic::kFp32;
  {
    const double timeout = options.shutdown_timeout_seconds;
    TerminationSignalWatcher watcher([&api, timeout](const char* signal) {
      KILN_LOG_INFO("received {}: no longer accepting; letting running requests finish (up to {} s)", signal,
                    timeout);
      api.Shutdown(timeout);
      KILN_LOG_INFO("every request has ended; closing connections");
    });
    std::thread loader([&] {
      auto engine = LLMEngine::Create(engine_options);
      if (!engine.ok()) {
        load_status = engine.status();
        KILN_LOG_ERROR("cannot load the model: {}", load_status.ToString());
        api.Shutdown(0);
        return;
      }
      if (options.role != "both") {
        Status attached = AttachKvConnector(a, engine_options, **engine);
        if (!attached.ok()) {
          load_status = attached;
          KILN_LOG_ERROR("--role {}: {}", options.role, load_status.ToString());
          api.Shutdown(0);
          return;
        }
      }
      threads = (*engine)->compiled_model().report().threads;
      arithmetic = bench::DescribeModel((*engine)->compiled_model(), engine_options.kv_cache_dtype).arithmetic;
      StartProfiling(a.profiling);
      api.AttachEngine(std::move(engine).value());
      KILN_LOG_INFO("ready: http://{}:{}/v1 serves \"{}\"", options.host, api.port(), options.served_model_name);
    });
    api.Serve();
    loader.join();
  }
  KILN_LOG_INFO("stopped");
  if (load_status.ok()) KILN_RETURN_IF_ERROR(FinishProfiling(a.profiling, threads, arithmetic));
  return load_status;
}

}  // namespace

void RegisterServe(CLI::App& app) {
  auto* cmd = app.add_subcommand("serve", "Serve a model over an OpenAI-compatible HTTP API");
  auto args = std::make_shared<ServeArgs>();
  ServeArgs& a = *args;
  AddEngineFlags(cmd, &a.engine);
  const std::string group = "Server";
  server::ServerOptions& o = a.server;
  cmd->add_option("--host", o.host, "Address to listen on")->capture_default_str()->group(group);
  cmd->add_option("--port", o.port, "Port to listen on (0: a free one, printed at start)")
      ->capture_default_str()
      ->group(group);
  cmd->add_option("--served-model-name", o.served_model_name,
                  "The model's name in the API (default: the model folder's or file's name)")
      ->group(group);
  cmd->add_option("--api-key", o.api_key,
                  "Require \"Authorization: Bearer KEY\" on every endpoint but /health and /metrics")
      ->envname("KILN_API_KEY")
      ->group(group);
  cmd->add_option("--max-body-size", a.max_body_size, "Larger request bodies get 413 (bytes, or e.g. 64KiB, 16MiB)")
      ->capture_default_str()
      ->group(group);
  cmd->add_option("--max-concurrent-connections", o.max_concurrent_connections,
                  "Connections served at once, open streams included: each holds a thread while open; more "
                  "wait for a free one")
      ->capture_default_str()
      ->group(group);
  cmd->add_option("--max-queued-requests", o.max_queued_requests,
                  "Generation requests accepted but not yet started; beyond this, 503 with Retry-After")
      ->capture_default_str()
      ->group(group);
  cmd->add_option("--shutdown-timeout", o.shutdown_timeout_seconds,
                  "On SIGTERM or SIGINT: seconds running requests get to finish before they are aborted")
      ->capture_default_str()
      ->group(group);
  cmd->add_flag("--no-access-log", a.no_access_log, "Do not log a line per request")->group(group);
  cmd->add_option("--seed", a.seed, "Seeds the requests that give no seed (0: random at start)")->group(group);
  const std::string pd = "Prefill/decode disaggregation";
  cmd->add_option("--role", o.role,
                  "prefill: run prompts and send their KV blocks to the decode instance (--kv-peer); decode: "
                  "take KV blocks from prefill instances (--kv-listen) into the prefix cache; both: neither")
      ->capture_default_str()
      ->group(pd);
  cmd->add_option("--kv-listen", a.kv_listen, "With --role decode: HOST:PORT where prefill instances connect (UCX)")
      ->group(pd);
  cmd->add_option("--kv-peer", a.kv_peer, "With --role prefill: the decode instance's --kv-listen HOST:PORT")
      ->group(pd);
  cmd->add_option("--kv-transfer-timeout", o.kv_transfer_timeout_seconds,
                  "Seconds a decode instance holds the blocks of a transfer that stopped arriving before freeing "
                  "them; and a prefill instance waits for its blocks to be acknowledged")
      ->capture_default_str()
      ->group(pd);
  cmd->add_option("--kv-send-per-layer", o.kv_send_per_layer,
                  "With --role prefill: send each KV block layer by layer during the pass that computes it, "
                  "each layer as soon as it is written (true), or whole blocks after the pass (false)")
      ->capture_default_str()
      ->group(pd);
  AddProfileFlags(cmd, &a.profiling);
  cmd->callback([args]() {
    Status s = RunServe(*args);
    if (!s.ok()) {
      fmt::print(stderr, "kiln serve: {}\n", s.ToString());
      SetExitCode(1);
    }
  });
}

}  // namespace kiln::cli
