// `kiln router`: one OpenAI-compatible endpoint in front of several
// `kiln serve` replicas, routing by prompt-prefix affinity and load. It
// serves until SIGTERM or SIGINT, then stops accepting, lets requests in
// flight finish within --shutdown-timeout and exits 0.
#include <signal.h>

#include <atomic>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/termination_signals.h"
#include "core/byte_size.h"
#include "core/log.h"
#include "router/router_server.h"

namespace kiln::cli {
namespace {

struct RouterArgs {
  router::RouterOptions options;
  std::string max_body_size = "16MiB";
};

Status RunRouter(const RouterArgs& a) {
  router::RouterOptions options = a.options;
  Expected<ByteSize> max_body_size = ParseByteSize(a.max_body_size);
  if (!max_body_size.ok()) {
    return InvalidArgument("--max-body-size {}: {}", a.max_body_size, max_body_size.status().message());
  }
  options.max_body_size = static_cast<size_t>(max_body_size->bytes);
  KILN_RETURN_IF_ERROR(options.Validate());

  // A client or backend that goes away must not kill the router with
  // SIGPIPE; the failed write reports it.
  ::signal(SIGPIPE, SIG_IGN);
  BlockTerminationSignals();

  router::RouterServer server(options);
  KILN_RETURN_IF_ERROR(server.Bind());
  if (options.disaggregated()) {
    KILN_LOG_INFO("listening on http://{}:{}, prefill on {} and decode on {} instances", options.host,
                  server.port(), options.prefill.size(), options.decode.size());
  } else {
    KILN_LOG_INFO("listening on http://{}:{}, routing to {} replicas", options.host, server.port(),
                  options.replicas.size());
  }
  {
    const double timeout = options.shutdown_timeout_seconds;
    TerminationSignalWatcher watcher([&server, timeout](const char* signal) {
      KILN_LOG_INFO("received {}: no longer accepting; letting requests in flight finish (up to {} s)", signal,
                    timeout);
      server.Shutdown(timeout);
    });
    server.Serve();
  }
  KILN_LOG_INFO("stopped");
  return Status::Ok();
}

}  // namespace

void RegisterRouter(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "router", "Serve one OpenAI-compatible endpoint in front of several `kiln serve` replicas");
  auto args = std::make_shared<RouterArgs>();
  router::RouterOptions& o = args->options;
  cmd->add_option("--replica", o.replicas,
                  "A `kiln serve` replica's base URL, http://host:port (give once per replica)")
      ->take_all();
  cmd->add_option("--prefill", o.prefill,
                  "Prefill/decode mode: a `kiln serve --role prefill` instance's base URL (give once per instance)")
      ->take_all();
  cmd->add_option("--decode", o.decode,
                  "Prefill/decode mode: a `kiln serve --role decode` instance's base URL: one for every prefill "
                  "instance, or one per --prefill, in the same order")
      ->take_all();
  cmd->add_option("--host", o.host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", o.port, "Port to listen on (0: a free one, printed at start)")
      ->capture_default_str();
  cmd->add_option("--health-interval-ms", o.health_interval_ms,
                  "How often each replica's /health is probed; a failed probe takes it out of rotation")
      ->capture_default_str();
  cmd->add_option(
         "--affinity-chunk", o.affinity_chunk_bytes,
         "Prompt bytes per hashed chunk for prefix affinity (prompts shorter than one chunk go by load)")
      ->capture_default_str();
  cmd->add_option("--affinity-capacity", o.affinity_capacity,
                  "Prompt-prefix chunks remembered (least recently used ones are forgotten)")
      ->capture_default_str();
  cmd->add_option("--load-margin", o.load_margin,
                  "Requests in flight by which the replica holding a prefix may exceed the least loaded one "
                  "and still be picked")
      ->capture_default_str();
  cmd->add_option("--max-attempts", o.max_attempts,
                  "Replicas tried for one request that fails before its first byte")
      ->capture_default_str();
  cmd->add_option("--backend-timeout", o.backend_timeout_seconds,
                  "Seconds a replica may send nothing before the request counts as failed")
      ->capture_default_str();
  cmd->add_option("--max-concurrent-connections", o.max_concurrent_connections,
                  "Client connections served at once, open streams included")
      ->capture_default_str();
  cmd->add_option("--max-body-size", args->max_body_size,
                  "Larger request bodies get 413 (bytes, or e.g. 64KiB)")
      ->capture_default_str();
  cmd->add_option("--shutdown-timeout", o.shutdown_timeout_seconds,
                  "On SIGTERM or SIGINT: seconds requests in flight get to finish")
      ->capture_default_str();
  cmd->callback([args]() {
    Status s = RunRouter(*args);
    if (!s.ok()) {
      fmt::print(stderr, "kiln router: {}\n", s.ToString());
      SetExitCode(1);
    }
  });
}

}  // namespace kiln::cli
