// The exchange's thread and the hand-over of what it receives.
#include "router/backend_exchange.h"

namespace kiln::router {

BackendExchange::BackendExchange(Backend& backend, std::string method, std::string path,
                                 httplib::Headers headers, std::string body)
    : backend_(backend), client_(backend.Acquire()) {
  thread_ = std::thread([this, method = std::move(method), path = std::move(path),
                         headers = std::move(headers), body = std::move(body)]() mutable {
    Run(std::move(method), std::move(path), std::move(headers), std::move(body));
  });
}

BackendExchange::~BackendExchange() {
  Cancel();
  thread_.join();
}

void BackendExchange::Run(std::string method, std::string path, httplib::Headers headers, std::string body) {
  httplib::Request req;
  req.method = std::move(method);
  req.path = std::move(path);
  req.headers = std::move(headers);
  req.body = std::move(body);
  req.response_handler = [this](const httplib::Response& head) {
    std::lock_guard<std::mutex> lock(mu_);
    has_head_ = true;
    status_ = head.status;
    headers_ = head.headers;
    changed_.notify_all();
    return !canceled_;
  };
  req.content_receiver = [this](const char* data, size_t length, uint64_t, uint64_t) {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.append(data, length);
    received_ += length;
    changed_.notify_all();
    return !canceled_;
  };
  httplib::Response res;
  httplib::Error error = httplib::Error::Success;
  const bool ok = client_->send(req, res, error);
  bool reuse = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    finished_ = true;
    error_ =
        ok ? httplib::Error::Success : (error == httplib::Error::Success ? httplib::Error::Unknown : error);
    if (canceled_ && ok) error_ = httplib::Error::Canceled;
    // Cancel() may be using the connection until it sees finished_; once
    // canceled, the connection stays here until the destructor.
    reuse = ok && !canceled_;
    changed_.notify_all();
  }
  if (reuse) backend_.Release(std::move(client_));
}

void BackendExchange::Wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait_for(lock, timeout, [this] { return finished_ || !pending_.empty(); });
}

std::string BackendExchange::TakeData() {
  std::lock_guard<std::mutex> lock(mu_);
  std::string data;
  data.swap(pending_);
  return data;
}

void BackendExchange::Cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_ || canceled_) return;
  canceled_ = true;
  // Shuts the socket: a read waiting on the backend returns at once.
  client_->stop();
}

bool BackendExchange::finished() const {
  std::lock_guard<std::mutex> lock(mu_);
  return finished_;
}

bool BackendExchange::failed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return finished_ && error_ != httplib::Error::Success;
}

std::string BackendExchange::error() const {
  std::lock_guard<std::mutex> lock(mu_);
  switch (error_) {
    case httplib::Error::Success: return "";
    case httplib::Error::Connection: return "cannot connect";
    case httplib::Error::ConnectionTimeout: return "connecting timed out";
    case httplib::Error::Read: return "the connection closed or timed out while reading the response";
    case httplib::Error::Write: return "the connection closed while sending the request";
    case httplib::Error::Canceled: return "canceled";
    default: return httplib::to_string(error_);
  }
}

bool BackendExchange::connect_failed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return finished_ && (error_ == httplib::Error::Connection || error_ == httplib::Error::ConnectionTimeout);
}

bool BackendExchange::has_head() const {
  std::lock_guard<std::mutex> lock(mu_);
  return has_head_;
}

int BackendExchange::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

std::string BackendExchange::header(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = headers_.find(name);
  return it == headers_.end() ? "" : it->second;
}

size_t BackendExchange::bytes_received() const {
  std::lock_guard<std::mutex> lock(mu_);
  return received_;
}

}  // namespace kiln::router
