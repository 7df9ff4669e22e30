// The router in process over stand-in backends (cpp-httplib servers on
// loopback) that fail in exact ways: a backend that closes before the first
// byte has the request retried elsewhere, one that fails mid-stream ends the
// stream with an error event, and a backend's own errors pass through.
#include "router/router_server.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

namespace kiln::router {
namespace router_server_tests {

// A backend on a free loopback port, healthy, with the given completion route.
class StandInBackend {
 public:
  explicit StandInBackend(httplib::Server::Handler completion) {
    server_.Get("/health", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"status":"ok"})", "application/json");
    });
    server_.Post("/v1/completions", [this, completion](const httplib::Request& req, httplib::Response& res) {
      ++hits_;
      completion(req, res);
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~StandInBackend() {
    server_.stop();
    thread_.join();
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int hits() const { return hits_.load(); }

 private:
  httplib::Server server_;
  int port_ = -1;
  std::atomic<int> hits_{0};
  std::thread thread_;
};

// The router over `replicas`, serving on a thread until destroyed.
class RunningRouter {
 public:
  explicit RunningRouter(std::vector<std::string> replicas) {
    RouterOptions options;
    options.port = 0;
    options.replicas = std::move(replicas);
    options.health_interval_ms = 50;
    server_ = std::make_unique<RouterServer>(options);
    EXPECT_TRUE(server_->Bind().ok());
    thread_ = std::thread([this] { server_->Serve(); });
    // Serve() probes every backend before it accepts.
    httplib::Client client("127.0.0.1", server_->port());
    for (int i = 0; i < 200; ++i) {
      auto res = client.Get("/health");
      if (res && res->status == 200) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  ~RunningRouter() {
    server_->Shutdown(5);
    thread_.join();
  }

  httplib::Result Post(const std::string& body) {
    httplib::Client client("127.0.0.1", server_->port());
    client.set_read_timeout(30, 0);
    return client.Post("/v1/completions", body, "application/json");
  }

  std::string Metrics() {
    httplib::Client client("127.0.0.1", server_->port());
    auto res = client.Get("/metrics");
    return res ? res->body : "";
  }

 private:
  std::unique_ptr<RouterServer> server_;
  std::thread thread_;
};

// Sends the status line and headers, then closes: the backend "died" before
// the first byte of its answer.
void CloseAfterHeaders(const httplib::Request&, httplib::Response& res) {
  res.set_chunked_content_provider("application/json", [](size_t, httplib::DataSink&) { return false; });
}

void AnswerOk(const httplib::Request& req, httplib::Response& res) {
  res.set_content(R"({"object":"text_completion","echo":)" + nlohmann::json(req.body).dump() + "}",
                  "application/json");
}

TEST(RouterServer, RetriesOnAnotherReplicaWhenTheFirstClosesBeforeAnyByte) {
  StandInBackend dying(CloseAfterHeaders);
  StandInBackend healthy(AnswerOk);
  RunningRouter router({dying.url(), healthy.url()});
  const std::string body = R"({"prompt":"hello","max_tokens":3})";
  // Equal loads take turns, so within two requests the dying one is picked first.
  for (int i = 0; i < 2; ++i) {
    httplib::Result res = router.Post(body);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200);
    EXPECT_EQ(res->get_header_value("x-kiln-replica"), healthy.url());
    // The body reached the backend unchanged.
    EXPECT_EQ(nlohmann::json::parse(res->body)["echo"], body);
  }
  EXPECT_GE(dying.hits(), 1);
  EXPECT_NE(router.Metrics().find("kiln_router_retries_total " + std::to_string(dying.hits())),
            std::string::npos)
      << router.Metrics();
}

TEST(RouterServer, AStreamCutMidwayEndsWithAnErrorEvent) {
  StandInBackend cut([](const httplib::Request&, httplib::Response& res) {
    auto calls = std::make_shared<int>(0);
    res.set_chunked_content_provider("text/event-stream", [calls](size_t, httplib::DataSink& sink) {
      if ((*calls)++ > 0) {
        // Dies after its first event has reached the client (a failure
        // before then would be retried, as nothing was sent).
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        return false;
      }
      const std::string event = "data: {\"choices\":[{\"text\":\"a\"}]}\n\n";
      sink.write(event.data(), event.size());
      return true;
    });
  });
  RunningRouter router({cut.url()});
  httplib::Result res = router.Post(R"({"prompt":"hello","stream":true})");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/event-stream");
  const std::string& text = res->body;
  EXPECT_EQ(text.rfind("data: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: {\"error\":", 0), 0u) << text;
  EXPECT_NE(text.find("\"code\":\"backend_failed\""), std::string::npos) << text;
  EXPECT_EQ(cut.hits(), 1);  // begun streams are never retried
  EXPECT_NE(router.Metrics().find("kiln_router_stream_errors_total 1"), std::string::npos);
}

TEST(RouterServer, AStreamThatDiesAfterItsRolePreambleIsRetried) {
  const std::string role =
      "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},"
      "\"finish_reason\":null}]}\n\n";
  const std::string whole =
      role + "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"b\"}}]}\n\n" + "data: [DONE]\n\n";
  // Queued, then killed: only the preamble was sent.
  StandInBackend dying([role](const httplib::Request&, httplib::Response& res) {
    auto calls = std::make_shared<int>(0);
    res.set_chunked_content_provider("text/event-stream", [role, calls](size_t, httplib::DataSink& sink) {
      if ((*calls)++ > 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        return false;
      }
      sink.write(role.data(), role.size());
      return true;
    });
  });
  StandInBackend healthy([whole](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider("text/event-stream", [whole](size_t, httplib::DataSink& sink) {
      sink.write(whole.data(), whole.size());
      sink.done();
      return true;
    });
  });
  RunningRouter router({dying.url(), healthy.url()});
  for (int i = 0; i < 2; ++i) {  // equal loads take turns: the dying one goes first once
    httplib::Result res = router.Post(R"({"messages":[],"stream":true})");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200);
    EXPECT_EQ(res->body, whole);  // one stream, the preamble once
    EXPECT_EQ(res->get_header_value("x-kiln-replica"), healthy.url());
  }
  EXPECT_GE(dying.hits(), 1);
}

TEST(RouterServer, PassesTheBackendsErrorsThrough) {
  StandInBackend refusing([](const httplib::Request&, httplib::Response& res) {
    res.status = 400;
    res.set_content(R"({"error":{"message":"bad","param":"max_tokens"}})", "application/json");
  });
  RunningRouter router({refusing.url()});
  httplib::Result res = router.Post("{}");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_EQ(res->body, R"({"error":{"message":"bad","param":"max_tokens"}})");
  EXPECT_EQ(refusing.hits(), 1);
}

TEST(RouterServer, GivesUpWithABadGatewayWhenEveryReplicaFails) {
  StandInBackend a(CloseAfterHeaders);
  StandInBackend b(CloseAfterHeaders);
  RunningRouter router({a.url(), b.url()});
  httplib::Result res = router.Post("{}");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 502);
  nlohmann::json error = nlohmann::json::parse(res->body)["error"];
  EXPECT_EQ(error["code"], "backend_unavailable");
  EXPECT_EQ(error["type"], "server_error");
  EXPECT_EQ(a.hits() + b.hits(), 2);  // each replica once
}

}  // namespace router_server_tests
}  // namespace kiln::router
