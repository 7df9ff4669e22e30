// The KV connector over UCX (ucp streams, connections set up over TCP
// sockets): the decode instance listens, each prefill instance connects.
// The first message each way is the handshake (KvPeerIdentity); a prefill
// instance whose peer differs fails to start, naming what differs, and the
// decode instance ignores a peer that differs.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "engine/kv_connector.h"
#include "engine/kv_transfer.h"

namespace kiln::disagg {

struct UcxKvConnectorOptions {
  // Exactly one of the two: "host:port" to listen on (a decode instance)
  // or to connect to (a prefill instance).
  std::string listen;
  std::string peer;
  KvPeerIdentity identity;
  // How long a prefill instance waits at start for its peer's handshake
  // (trying every second: the decode instance may still be loading).
  double connect_timeout_seconds = 120;
};

// Starts the connector's thread and, for a prefill instance, connects and
// completes the handshake. Errors name the address and what failed.
Expected<std::unique_ptr<KvConnector>> CreateUcxKvConnector(const UcxKvConnectorOptions& options);

// For a decode instance, before any thread starts: its listener may take
// its address again at once, beside the connections a predecessor left in
// TCP TIME_WAIT (SO_REUSEADDR). UCX reads that setting of its connection
// manager only from the environment (UCX_TCP_CM_REUSEADDR; one the user
// set is kept), so it is set there.
void AllowListenerAddressReuse();

}  // namespace kiln::disagg
