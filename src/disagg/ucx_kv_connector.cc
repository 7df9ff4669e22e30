// One thread owns the UCX worker (single-threaded mode) and every
// endpoint: it sends what the engine queued, receives framed messages, and
// runs the handshake. Other threads only queue work and wait on results.
//
// A message on a stream: an 12-byte frame (u32 kind, u64 body length)
// then the body, whose layout kv_transfer.h defines.
#include "disagg/ucx_kv_connector.h"

#include <netdb.h>
#include <sys/socket.h>
#include <ucp/api/ucp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <list>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "core/log.h"

namespace kiln::disagg {
namespace {

enum class Kind : uint32_t { kHello = 1, kBlock = 2, kEnd = 3, kAck = 4 };

using Clock = std::chrono::steady_clock;
constexpr auto kReconnectInterval = std::chrono::seconds(1);

constexpr size_t kFrameBytes = 12;
// Bodies beyond this are refused as corrupt before anything is allocated.
constexpr uint64_t kMaxBody = uint64_t{1} << 32;

std::vector<uint8_t> Frame(Kind kind, uint64_t body_bytes) {
  std::vector<uint8_t> frame(kFrameBytes);
  const auto k = static_cast<uint32_t>(kind);
  std::memcpy(frame.data(), &k, 4);
  std::memcpy(frame.data() + 4, &body_bytes, 8);
  return frame;
}

std::vector<uint8_t> AckBody(uint64_t transfer_id, bool ok) {
  std::vector<uint8_t> body(9);
  std::memcpy(body.data(), &transfer_id, 8);
  body[8] = ok ? 1 : 0;
  return body;
}

Expected<sockaddr_storage> ResolveAddress(const std::string& host_port, socklen_t* length) {
  const size_t colon = host_port.rfind(':');
  if (colon == std::string::npos || colon + 1 == host_port.size()) {
    return InvalidArgument("KV address '{}': expected host:port", host_port);
  }
  std::string host = host_port.substr(0, colon);
  const std::string port = host_port.substr(colon + 1);
  if (host.empty()) host = "0.0.0.0";
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &found);
  if (rc != 0 || found == nullptr) {
    return InvalidArgument("KV address '{}': {}", host_port, gai_strerror(rc));
  }
  sockaddr_storage addr{};
  std::memcpy(&addr, found->ai_addr, found->ai_addrlen);
  *length = found->ai_addrlen;
  freeaddrinfo(found);
  return addr;
}

class UcxKvConnector : public KvConnector {
 public:
  explicit UcxKvConnector(UcxKvConnectorOptions options) : options_(std::move(options)) {}
  ~UcxKvConnector() override { Shutdown(); }

  Status Start();

  // Send only queues the message for the connector's thread.
  bool SendsPerLayer() const override { return true; }
  void Send(KvBlockPayload block) override {
    Queue(Kind::kBlock, SerializeBlock(block));
  }
  void EndTransfer(const KvTransferEnd& end) override { Queue(Kind::kEnd, SerializeTransferEnd(end)); }

  Status WaitAcknowledged(uint64_t transfer_id, double timeout_seconds) override {
    std::unique_lock<std::mutex> lock(mu_);
    const bool done = changed_.wait_for(lock, std::chrono::duration<double>(timeout_seconds), [&] {
      return acks_.count(transfer_id) > 0 || !peer_error_.empty();
    });
    auto it = acks_.find(transfer_id);
    if (it != acks_.end()) {
      const bool ok = it->second;
      acks_.erase(it);
      if (ok) return Status::Ok();
      return Status(StatusCode::kResourceExhausted,
                    fmt::format("the decode instance at {} could not take the KV blocks", options_.peer));
    }
    if (!peer_error_.empty()) return Status(StatusCode::kIoError, peer_error_);
    (void)done;
    // Its acknowledgement, should it still come, is dropped on arrival.
    abandoned_.insert(transfer_id);
    return Status(StatusCode::kIoError, fmt::format("the decode instance at {} acknowledged no KV transfer "
                                                    "within {} s",
                                                    options_.peer, timeout_seconds));
  }

  KvLanded TakeLanded() override {
    std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(landed_, {});
  }

  void Acknowledge(uint64_t transfer_id, bool ok) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = transfer_conn_.find(transfer_id);
    if (it == transfer_conn_.end()) return;
    outgoing_.push_back({it->second, Kind::kAck, AckBody(transfer_id, ok)});
    transfer_conn_.erase(it);
  }

  void SetLandedCallback(std::function<void()> callback) override {
    std::lock_guard<std::mutex> lock(mu_);
    on_landed_ = std::move(callback);
  }

 private:
  // A connection's receive side: the frame, then the body.
  struct Receive {
    uint8_t frame[kFrameBytes];
    std::vector<uint8_t> body;
    void* request = nullptr;
    bool in_body = false;
  };
  struct Connection {
    uint64_t id = 0;
    ucp_ep_h ep = nullptr;
    bool failed = false;
    bool accepted = false;  // its handshake matched
    bool greeted = false;   // a handshake came from the peer
    Receive receive;
    bool receive_posted = false;
  };
  struct Outgoing {
    uint64_t connection = 0;  // 0: the prefill side's one peer
    Kind kind;
    std::vector<uint8_t> body;
  };
  struct InFlight {
    std::vector<uint8_t> bytes;
    void* request = nullptr;
  };

  void Queue(Kind kind, std::vector<uint8_t> body) {
    std::lock_guard<std::mutex> lock(mu_);
    outgoing_.push_back({0, kind, std::move(body)});
  }

  // --- The worker thread.
  void Run();
  void SendNow(Connection& c, Kind kind, std::vector<uint8_t> body);
  void SendBytes(Connection& c, std::vector<uint8_t> bytes);
  // Posts receives and handles what completed; false when nothing did.
  bool PollReceive(Connection& c);
  void HandleMessage(Connection& c, Kind kind, std::vector<uint8_t> body);
  void Fail(Connection& c, const std::string& why);
  static void OnConnectionRequest(ucp_conn_request_h request, void* arg);
  static void OnEndpointError(void* arg, ucp_ep_h ep, ucs_status_t status);
  ucp_ep_params_t EndpointParams(Connection* c);
  void Shutdown();
  // The prefill side: an endpoint to the peer, and the handshake sent.
  Status Connect();

  UcxKvConnectorOptions options_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_listener_h listener_ = nullptr;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  // The prefill side completed its first handshake (later losses reconnect).
  std::atomic<bool> connected_{false};
  Clock::time_point next_reconnect_{};

  // Worker thread only.
  std::unordered_map<uint64_t, std::unique_ptr<Connection>> connections_;
  uint64_t next_connection_ = 1;
  std::list<InFlight> in_flight_;

  // Shared.
  std::mutex mu_;
  std::condition_variable changed_;
  std::deque<Outgoing> outgoing_;
  KvLanded landed_;
  std::function<void()> on_landed_;
  std::unordered_map<uint64_t, uint64_t> transfer_conn_;  // decode side: whom to acknowledge
  std::unordered_map<uint64_t, bool> acks_;               // prefill side
  std::unordered_set<uint64_t> abandoned_;                // prefill side: waits that timed out
  bool handshake_done_ = false;
  std::string handshake_error_;
  std::string peer_error_;  // the prefill side's peer is gone
};

ucp_ep_params_t UcxKvConnector::EndpointParams(Connection* c) {
  ucp_ep_params_t p{};
  p.field_mask = UCP_EP_PARAM_FIELD_ERR_HANDLER | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  p.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  p.err_handler.cb = &UcxKvConnector::OnEndpointError;
  p.err_handler.arg = c;
  return p;
}

void UcxKvConnector::OnConnectionRequest(ucp_conn_request_h request, void* arg) {
  auto* self = static_cast<UcxKvConnector*>(arg);
  auto c = std::make_unique<Connection>();
  Connection* raw = c.get();
  ucp_ep_params_t p = self->EndpointParams(raw);
  p.field_mask |= UCP_EP_PARAM_FIELD_CONN_REQUEST;
  p.conn_request = request;
  ucp_ep_h ep = nullptr;
  const ucs_status_t status = ucp_ep_create(self->worker_, &p, &ep);
  if (status != UCS_OK) {
    KILN_LOG_WARN("KV connector: could not accept a connection: {}", ucs_status_string(status));
    return;
  }
  raw->id = self->next_connection_++;
  raw->ep = ep;
  self->connections_[raw->id] = std::move(c);
  KILN_LOG_INFO("KV connector: a prefill instance connected");
}

void UcxKvConnector::OnEndpointError(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* c = static_cast<Connection*>(arg);
  c->failed = true;
  // Attempts to reconnect to an absent peer fail quietly, once a second.
  if (c->greeted) KILN_LOG_WARN("KV connector: connection lost: {}", ucs_status_string(status));
}

Status UcxKvConnector::Start() {
  if (options_.listen.empty() == options_.peer.empty()) {
    return InvalidArgument("KV connector: give exactly one of --kv-listen and --kv-peer");
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_STREAM;
  ucp_config_t* config = nullptr;
  ucs_status_t status = ucp_config_read(nullptr, nullptr, &config);
  if (status != UCS_OK) return Status(StatusCode::kIoError, fmt::format("UCX: {}", ucs_status_string(status)));
  status = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  if (status != UCS_OK) return Status(StatusCode::kIoError, fmt::format("UCX: {}", ucs_status_string(status)));
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SINGLE;
  status = ucp_worker_create(context_, &wp, &worker_);
  if (status != UCS_OK) return Status(StatusCode::kIoError, fmt::format("UCX: {}", ucs_status_string(status)));

  socklen_t length = 0;
  if (!options_.listen.empty()) {
    KILN_ASSIGN_OR_RETURN(sockaddr_storage addr, ResolveAddress(options_.listen, &length));
    ucp_listener_params_t lp{};
    lp.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
    lp.sockaddr.addr = reinterpret_cast<const sockaddr*>(&addr);
    lp.sockaddr.addrlen = length;
    lp.conn_handler.cb = &UcxKvConnector::OnConnectionRequest;
    lp.conn_handler.arg = this;
    status = ucp_listener_create(worker_, &lp, &listener_);
    if (status != UCS_OK) {
      return Status(StatusCode::kIoError,
                    fmt::format("KV connector: cannot listen on {}: {}", options_.listen, ucs_status_string(status)));
    }
    KILN_LOG_INFO("KV connector: listening for prefill instances on {} (UCX)", options_.listen);
    thread_ = std::thread([this] { Run(); });
    return Status::Ok();
  }

  KILN_RETURN_IF_ERROR(Connect());
  thread_ = std::thread([this] { Run(); });

  // The decode instance may still be loading its model: the worker thread
  // tries again every second until it answers or the time is up.
  std::unique_lock<std::mutex> lock(mu_);
  const bool answered =
      changed_.wait_for(lock, std::chrono::duration<double>(options_.connect_timeout_seconds),
                        [&] { return handshake_done_ || !handshake_error_.empty(); });
  if (!handshake_error_.empty()) return InvalidArgument("{}", handshake_error_);
  if (!answered) {
    return Status(StatusCode::kIoError,
                  fmt::format("KV connector: no handshake from the decode instance at {} within {} s "
                              "(is it running with --role decode --kv-listen {}?)",
                              options_.peer, options_.connect_timeout_seconds, options_.peer));
  }
  KILN_LOG_INFO("KV connector: connected to the decode instance at {} (UCX)", options_.peer);
  connected_.store(true);
  return Status::Ok();
}

Status UcxKvConnector::Connect() {
  socklen_t length = 0;
  KILN_ASSIGN_OR_RETURN(sockaddr_storage addr, ResolveAddress(options_.peer, &length));
  auto c = std::make_unique<Connection>();
  ucp_ep_params_t p = EndpointParams(c.get());
  p.field_mask |= UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR;
  p.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
  p.sockaddr.addr = reinterpret_cast<const sockaddr*>(&addr);
  p.sockaddr.addrlen = length;
  ucp_ep_h ep = nullptr;
  const ucs_status_t status = ucp_ep_create(worker_, &p, &ep);
  if (status != UCS_OK) {
    return Status(StatusCode::kIoError,
                  fmt::format("KV connector: cannot connect to {}: {}", options_.peer, ucs_status_string(status)));
  }
  c->id = 0;
  c->ep = ep;
  Connection* raw = c.get();
  connections_[0] = std::move(c);
  SendNow(*raw, Kind::kHello, SerializeIdentity(options_.identity));
  return Status::Ok();
}

void UcxKvConnector::SendBytes(Connection& c, std::vector<uint8_t> bytes) {
  if (c.failed) return;
  in_flight_.push_back({std::move(bytes), nullptr});
  InFlight& f = in_flight_.back();
  ucp_request_param_t p{};
  ucs_status_ptr_t r = ucp_stream_send_nbx(c.ep, f.bytes.data(), f.bytes.size(), &p);
  if (r == nullptr) {
    in_flight_.pop_back();
  } else if (UCS_PTR_IS_ERR(r)) {
    in_flight_.pop_back();
    Fail(c, fmt::format("KV connector: send failed: {}", ucs_status_string(UCS_PTR_STATUS(r))));
  } else {
    f.request = r;
  }
}

void UcxKvConnector::SendNow(Connection& c, Kind kind, std::vector<uint8_t> body) {
  SendBytes(c, Frame(kind, body.size()));
  SendBytes(c, std::move(body));
}

bool UcxKvConnector::PollReceive(Connection& c) {
  bool any = false;
  while (!c.failed) {
    Receive& rx = c.receive;
    if (!c.receive_posted) {
      void* buffer = rx.in_body ? static_cast<void*>(rx.body.data()) : static_cast<void*>(rx.frame);
      const size_t size = rx.in_body ? rx.body.size() : kFrameBytes;
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      p.flags = UCP_STREAM_RECV_FLAG_WAITALL;
      size_t received = 0;
      ucs_status_ptr_t r = ucp_stream_recv_nbx(c.ep, buffer, size, &received, &p);
      if (UCS_PTR_IS_ERR(r)) {
        Fail(c, fmt::format("KV connector: receive failed: {}", ucs_status_string(UCS_PTR_STATUS(r))));
        return any;
      }
      rx.request = r;
      c.receive_posted = true;
    }
    if (rx.request != nullptr) {
      size_t received = 0;
      const ucs_status_t status = ucp_stream_recv_request_test(rx.request, &received);
      if (status == UCS_INPROGRESS) return any;
      ucp_request_free(rx.request);
      rx.request = nullptr;
      if (status != UCS_OK) {
        Fail(c, fmt::format("KV connector: receive failed: {}", ucs_status_string(status)));
        return any;
      }
    }
    c.receive_posted = false;
    any = true;
    if (!rx.in_body) {
      uint64_t body_bytes = 0;
      std::memcpy(&body_bytes, rx.frame + 4, 8);
      if (body_bytes > kMaxBody) {
        Fail(c, fmt::format("KV connector: a message of {} bytes from the peer; not a kiln KV stream", body_bytes));
        return any;
      }
      rx.body.assign(body_bytes, 0);
      rx.in_body = true;
      if (body_bytes > 0) continue;
    }
    uint32_t kind = 0;
    std::memcpy(&kind, rx.frame, 4);
    rx.in_body = false;
    HandleMessage(c, static_cast<Kind>(kind), std::exchange(rx.body, {}));
  }
  return any;
}

void UcxKvConnector::HandleMessage(Connection& c, Kind kind, std::vector<uint8_t> body) {
  const bool decode = !options_.listen.empty();
  switch (kind) {
    case Kind::kHello: {
      c.greeted = true;
      auto there = DeserializeIdentity(body);
      Status same = there.ok() ? CheckSameIdentity(options_.identity, *there) : there.status();
      if (decode) {
        SendNow(c, Kind::kHello, SerializeIdentity(options_.identity));  // the peer judges too
        c.accepted = same.ok();
        if (!same.ok()) KILN_LOG_WARN("KV connector: refusing a prefill instance: {}", same.message());
        return;
      }
      std::lock_guard<std::mutex> lock(mu_);
      if (same.ok()) {
        handshake_done_ = true;
        if (connected_.load() && !peer_error_.empty()) {
          KILN_LOG_INFO("KV connector: reconnected to the decode instance at {}", options_.peer);
        }
        peer_error_.clear();
      } else {
        handshake_error_ = fmt::format("the decode instance at {} refused the handshake: {}", options_.peer,
                                       same.message());
        if (connected_.load()) peer_error_ = handshake_error_;  // a restarted peer that differs
      }
      changed_.notify_all();
      return;
    }
    case Kind::kBlock:
    case Kind::kEnd: {
      if (!decode || !c.accepted) return;  // a peer that differs sends nothing we take
      std::function<void()> wake;
      if (kind == Kind::kBlock) {
        auto block = DeserializeBlock(body);
        if (!block.ok()) {
          KILN_LOG_WARN("KV connector: {}", block.status().ToString());
          return;
        }
        std::lock_guard<std::mutex> lock(mu_);
        transfer_conn_[block->transfer_id] = c.id;
        landed_.blocks.push_back(std::move(block).value());
        wake = on_landed_;
      } else {
        auto end = DeserializeTransferEnd(body);
        if (!end.ok()) {
          KILN_LOG_WARN("KV connector: {}", end.status().ToString());
          return;
        }
        std::lock_guard<std::mutex> lock(mu_);
        transfer_conn_[end->transfer_id] = c.id;
        landed_.ends.push_back(*end);
        wake = on_landed_;
      }
      if (wake) wake();
      return;
    }
    case Kind::kAck: {
      if (decode || body.size() != 9) return;
      uint64_t id = 0;
      std::memcpy(&id, body.data(), 8);
      std::lock_guard<std::mutex> lock(mu_);
      if (abandoned_.erase(id) > 0) return;
      acks_[id] = body[8] != 0;
      changed_.notify_all();
      return;
    }
  }
  Fail(c, fmt::format("KV connector: unknown message kind {}", static_cast<uint32_t>(kind)));
}

void UcxKvConnector::Fail(Connection& c, const std::string& why) {
  if (!c.failed) KILN_LOG_WARN("{}", why);
  c.failed = true;
}

void UcxKvConnector::Run() {
  int idle = 0;
  while (!stop_.load()) {
    bool busy = ucp_worker_progress(worker_) != 0;
    std::deque<Outgoing> outgoing;
    {
      std::lock_guard<std::mutex> lock(mu_);
      outgoing.swap(outgoing_);
    }
    for (Outgoing& o : outgoing) {
      auto it = connections_.find(o.connection);
      if (it != connections_.end()) SendNow(*it->second, o.kind, std::move(o.body));
      busy = true;
    }
    for (auto it = in_flight_.begin(); it != in_flight_.end();) {
      const ucs_status_t status = ucp_request_check_status(it->request);
      if (status == UCS_INPROGRESS) {
        ++it;
        continue;
      }
      ucp_request_free(it->request);
      it = in_flight_.erase(it);
      busy = true;
    }
    for (auto it = connections_.begin(); it != connections_.end();) {
      Connection& c = *it->second;
      if (PollReceive(c)) busy = true;
      if (c.failed) {
        if (options_.listen.empty()) {
          std::lock_guard<std::mutex> lock(mu_);
          if (peer_error_.empty()) {
            peer_error_ = fmt::format("the connection to the decode instance at {} is lost{}", options_.peer,
                                      connected_.load() ? " (reconnecting)" : "");
          }
          // No late acknowledgement comes over a lost connection.
          abandoned_.clear();
          changed_.notify_all();
        }
        if (c.receive.request != nullptr) {
          ucp_request_cancel(worker_, c.receive.request);
          ucp_request_free(c.receive.request);
          c.receive.request = nullptr;
        }
        ucp_request_param_t p{};
        p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        p.flags = UCP_EP_CLOSE_FLAG_FORCE;
        ucs_status_ptr_t r = ucp_ep_close_nbx(c.ep, &p);
        if (r != nullptr && !UCS_PTR_IS_ERR(r)) ucp_request_free(r);
        it = connections_.erase(it);
        continue;
      }
      ++it;
    }
    // A prefill instance whose decode instance is not there (yet, or any
    // more) tries again every second, so that one still loading, or
    // restarted, is found.
    if (!options_.peer.empty() && connections_.empty() && Clock::now() >= next_reconnect_) {
      next_reconnect_ = Clock::now() + kReconnectInterval;
      Status again = Connect();
      if (!again.ok()) KILN_LOG_WARN("{}", again.message());
    }
    // Poll hard while there is traffic; back off to a millisecond when idle
    // rather than hold a core.
    if (busy) {
      idle = 0;
    } else if (++idle > 100) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
}

void UcxKvConnector::Shutdown() {
  if (thread_.joinable()) {
    stop_.store(true);
    thread_.join();
  }
  if (worker_ != nullptr) {
    for (auto& [id, c] : connections_) {
      if (c->receive.request != nullptr) {
        ucp_request_cancel(worker_, c->receive.request);
        ucp_request_free(c->receive.request);
      }
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      p.flags = UCP_EP_CLOSE_FLAG_FORCE;
      ucs_status_ptr_t r = ucp_ep_close_nbx(c->ep, &p);
      if (r != nullptr && !UCS_PTR_IS_ERR(r)) {
        while (ucp_request_check_status(r) == UCS_INPROGRESS) ucp_worker_progress(worker_);
        ucp_request_free(r);
      }
    }
    connections_.clear();
    for (InFlight& f : in_flight_) {
      ucp_request_cancel(worker_, f.request);
      ucp_request_free(f.request);
    }
    in_flight_.clear();
    if (listener_ != nullptr) ucp_listener_destroy(listener_);
    ucp_worker_destroy(worker_);
    worker_ = nullptr;
  }
  if (context_ != nullptr) {
    ucp_cleanup(context_);
    context_ = nullptr;
  }
}

}  // namespace

void AllowListenerAddressReuse() { setenv("UCX_TCP_CM_REUSEADDR", "y", /*overwrite=*/0); }

Expected<std::unique_ptr<KvConnector>> CreateUcxKvConnector(const UcxKvConnectorOptions& options) {
  auto connector = std::make_unique<UcxKvConnector>(options);
  KILN_RETURN_IF_ERROR(connector->Start());
  return std::unique_ptr<KvConnector>(std::move(connector));
}

}  // namespace kiln::disagg
