// The HTTP load generator against a stub OpenAI-compatible server that
// streams fixed chunks with known delays: the measured times are checked
// against those delays (lower bounds, and loose upper ones), the request
// bodies against the options, and failures are counted with messages.
#include "bench/serve_benchmark.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

namespace kiln::bench {
namespace serve_benchmark_tests {

constexpr double kFirstDelay = 0.15;  // before the first chunk
constexpr double kChunkDelay = 0.03;  // between the following chunks
constexpr int kChunks = 6;            // chunks with text

void Sleep(double seconds) {
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}

std::string Chunk(const nlohmann::json& j) {
  return "data: " + j.dump() + "\n\n";
}

class StubServer {
 public:
  StubServer() {
    server_.Get("/v1/models", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"object":"list","data":[{"id":"stub-model","object":"model"}]})", "application/json");
    });
    auto stream = [this](bool chat) {
      return [this, chat](const httplib::Request& req, httplib::Response& res) {
        {
          std::lock_guard<std::mutex> lock(mu_);
          bodies_.push_back(nlohmann::json::parse(req.body, nullptr, false));
        }
        res.set_chunked_content_provider("text/event-stream", [chat](size_t, httplib::DataSink& sink) {
          Sleep(kFirstDelay);
          for (int i = 0; i < kChunks; ++i) {
            if (i > 0) Sleep(kChunkDelay);
            nlohmann::json choice = chat ? nlohmann::json{{"index", 0}, {"delta", {{"content", "tok"}}}}
                                         : nlohmann::json{{"index", 0}, {"text", "tok"}};
            std::string c = Chunk({{"object", "text_completion"}, {"choices", {choice}}});
            if (!sink.write(c.data(), c.size())) return false;
          }
          std::string usage =
              Chunk({{"choices", nlohmann::json::array()},
                     {"usage", {{"prompt_tokens", 11}, {"completion_tokens", kChunks}, {"total_tokens", 11 + kChunks}}}});
          std::string done = "data: [DONE]\n\n";
          sink.write(usage.data(), usage.size());
          sink.write(done.data(), done.size());
          sink.done();
          return true;
        });
      };
    };
    server_.Post("/v1/completions", stream(false));
    server_.Post("/v1/chat/completions", stream(true));
    server_.Post("/v1/broken", [](const httplib::Request&, httplib::Response& res) {
      res.status = 500;
      res.set_content(R"({"error":{"message":"the stub is broken"}})", "application/json");
    });
    server_.Post("/v1/error_event", [](const httplib::Request&, httplib::Response& res) {
      res.set_chunked_content_provider("text/event-stream", [](size_t, httplib::DataSink& sink) {
        std::string e = Chunk({{"error", {{"message", "out of KV blocks"}}}});
        sink.write(e.data(), e.size());
        sink.done();
        return true;
      });
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ~StubServer() {
    server_.stop();
    thread_.join();
  }

  std::string Url(const std::string& path = "") const { return "http://127.0.0.1:" + std::to_string(port_) + path; }
  std::vector<nlohmann::json> Bodies() {
    std::lock_guard<std::mutex> lock(mu_);
    return bodies_;
  }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::vector<nlohmann::json> bodies_;
};

ServeOptions Options(const StubServer& stub, const std::string& path = "") {
  ServeOptions o;
  o.url = stub.Url(path);
  o.concurrency = {1, 2};
  o.num_prompts = 4;
  o.input_len = 7;
  o.output_len = 9;
  o.timeout_seconds = 30;
  return o;
}

TEST(ServeBenchmark, MeasuresTheStubsDelays) {
  StubServer stub;
  int progress_calls = 0;
  auto report = RunServeBenchmark(Options(stub), [&](const ServeProgress& p) {
    ++progress_calls;
    EXPECT_LE(p.done, p.total);
  });
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->model, "stub-model");  // from /v1/models
  EXPECT_EQ(report->endpoint, stub.Url("/v1/completions"));
  EXPECT_EQ(progress_calls, 8);
  ASSERT_EQ(report->levels.size(), 2u);
  for (const ServeLevel& l : report->levels) {
    SCOPED_TRACE(l.concurrency);
    EXPECT_EQ(l.completed, 4);
    EXPECT_EQ(l.failed, 0);
    EXPECT_TRUE(l.errors.empty());
    EXPECT_EQ(l.output_tokens, 4 * kChunks);
    EXPECT_TRUE(l.prompt_tokens_known);
    EXPECT_EQ(l.prompt_tokens, 4 * 11);
    // Each request takes at least the stub's delays; allow a loaded machine
    // plenty above them. Chunks read together (a descheduled client) time
    // as one, so only the medians of the per-chunk times are bounded below.
    EXPECT_GE(l.ttft_s.min, kFirstDelay);
    EXPECT_LT(l.ttft_s.median, kFirstDelay + 5);
    EXPECT_EQ(l.tpot_s.count, 4);
    EXPECT_GE(l.tpot_s.median, kChunkDelay * 0.5);
    EXPECT_LT(l.tpot_s.median, kChunkDelay + 2);
    EXPECT_EQ(l.itl_s.count, 4 * (kChunks - 1));
    EXPECT_GE(l.itl_s.median, kChunkDelay * 0.5);
    EXPECT_GE(l.itl_s.min, 0);
    EXPECT_GE(l.e2e_s.min, kFirstDelay + (kChunks - 1) * kChunkDelay);
    EXPECT_GE(l.e2e_s.min, l.ttft_s.min);
    EXPECT_GT(l.requests_per_s, 0);
    EXPECT_NEAR(l.output_tokens_per_s, static_cast<double>(l.output_tokens) / l.duration_s, 1e-9);
    EXPECT_GT(l.total_tokens_per_s, l.output_tokens_per_s);
    EXPECT_TRUE(l.contention.valid);
  }
  // One request at a time cannot finish 4 sooner than 4 back to back.
  const double one = kFirstDelay + (kChunks - 1) * kChunkDelay;
  EXPECT_GE(report->levels[0].duration_s, 4 * one);
  EXPECT_GE(report->levels[1].duration_s, 2 * one);

  const std::vector<nlohmann::json> bodies = stub.Bodies();
  ASSERT_EQ(bodies.size(), 8u);
  for (const nlohmann::json& b : bodies) {
    ASSERT_TRUE(b.is_object());
    EXPECT_EQ(b["model"], "stub-model");
    EXPECT_EQ(b["max_tokens"], 9);
    EXPECT_EQ(b["stream"], true);
    EXPECT_EQ(b["ignore_eos"], true);
    EXPECT_EQ(b["stream_options"]["include_usage"], true);
    ASSERT_TRUE(b["prompt"].is_string());
    const std::string prompt = b["prompt"];
    EXPECT_EQ(std::count(prompt.begin(), prompt.end(), ' '), 6);  // 7 words
  }

  const std::string table = FormatServeTable(*report);
  EXPECT_NE(table.find("concurrency"), std::string::npos);
  nlohmann::json j = ServeJson(*report);
  ASSERT_EQ(j["results"].size(), 2u);
  for (const char* key : {"concurrency", "completed", "failed", "requests_per_s", "output_tokens_per_s",
                          "total_tokens_per_s", "ttft_s", "tpot_s", "itl_s", "e2e_s", "errors", "contention"}) {
    EXPECT_TRUE(j["results"][0].contains(key)) << key;
  }
  EXPECT_EQ(j["results"][1]["ttft_s"]["count"], 4);
}

TEST(ServeBenchmark, ChatEndpointsAndPoissonArrivals) {
  StubServer stub;
  ServeOptions o = Options(stub, "/v1/chat/completions");
  o.model = "named";
  o.concurrency = {2};
  o.request_rate = 50;
  o.prompt_ids = true;  // sent to chat as text of the ids
  auto report = RunServeBenchmark(o);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_EQ(report->levels.size(), 1u);
  EXPECT_EQ(report->levels[0].completed, 4);
  EXPECT_EQ(report->levels[0].output_tokens, 4 * kChunks);
  EXPECT_GE(report->levels[0].ttft_s.min, kFirstDelay);
  for (const nlohmann::json& b : stub.Bodies()) {
    EXPECT_EQ(b["model"], "named");
    ASSERT_TRUE(b["messages"].is_array());
    EXPECT_EQ(b["messages"][0]["role"], "user");
  }
}

TEST(ServeBenchmark, RandomTokenIdPrompts) {
  StubServer stub;
  ServeOptions o = Options(stub);
  o.concurrency = {1};
  o.num_prompts = 2;
  o.prompt_ids = true;
  o.max_token_id = 50;
  auto report = RunServeBenchmark(o);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->levels[0].completed, 2);
  for (const nlohmann::json& b : stub.Bodies()) {
    ASSERT_TRUE(b["prompt"].is_array());
    EXPECT_EQ(b["prompt"].size(), 7u);
    for (const auto& id : b["prompt"]) {
      EXPECT_GE(id.get<int>(), 0);
      EXPECT_LT(id.get<int>(), 50);
    }
  }
}

TEST(ServeBenchmark, FailuresAreCountedWithTheirMessages) {
  StubServer stub;
  ServeOptions o = Options(stub, "/v1/broken");
  o.concurrency = {2};
  auto broken = RunServeBenchmark(o);
  ASSERT_TRUE(broken.ok()) << broken.status().ToString();
  EXPECT_EQ(broken->levels[0].completed, 0);
  EXPECT_EQ(broken->levels[0].failed, 4);
  ASSERT_EQ(broken->levels[0].errors.size(), 1u);
  EXPECT_NE(broken->levels[0].errors[0].find("HTTP 500"), std::string::npos);
  EXPECT_NE(broken->levels[0].errors[0].find("the stub is broken"), std::string::npos);
  EXPECT_NE(FormatServeTable(*broken).find("HTTP 500"), std::string::npos);

  o = Options(stub, "/v1/error_event");
  o.concurrency = {1};
  auto event = RunServeBenchmark(o);
  ASSERT_TRUE(event.ok());
  EXPECT_EQ(event->levels[0].failed, 4);
  EXPECT_NE(event->levels[0].errors[0].find("out of KV blocks"), std::string::npos);
}

TEST(ServeBenchmark, UnreachableServersFailEachRequest) {
  // A port that was free a moment ago, with nothing listening on it now.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  close(fd);
  ServeOptions o;
  o.url = "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  o.concurrency = {1};
  o.num_prompts = 2;
  o.timeout_seconds = 10;
  auto report = RunServeBenchmark(o);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->levels[0].failed, 2);
  ASSERT_FALSE(report->levels[0].errors.empty());
  EXPECT_NE(report->levels[0].errors[0].find("transport"), std::string::npos);
}

TEST(ServeBenchmark, RejectsBadOptions) {
  ServeOptions o;
  o.url = "ftp://x";
  EXPECT_FALSE(RunServeBenchmark(o).ok());
  o = ServeOptions{};
  o.concurrency = {0};
  EXPECT_FALSE(RunServeBenchmark(o).ok());
  o = ServeOptions{};
  o.concurrency.clear();
  EXPECT_FALSE(RunServeBenchmark(o).ok());
  o = ServeOptions{};
  o.output_len = 0;
  EXPECT_FALSE(RunServeBenchmark(o).ok());
  o = ServeOptions{};
  o.prompts_file = "/nonexistent/prompts.txt";
  EXPECT_FALSE(RunServeBenchmark(o).ok());
}

TEST(ParseHttpUrl, SplitsOriginAndPath) {
  auto u = ParseHttpUrl("http://127.0.0.1:8000/v1/chat/completions");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->origin, "http://127.0.0.1:8000");
  EXPECT_EQ(u->path, "/v1/chat/completions");
  u = ParseHttpUrl("https://example.com/");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->origin, "https://example.com");
  EXPECT_EQ(u->path, "");
  EXPECT_FALSE(ParseHttpUrl("localhost:8000").ok());
  EXPECT_FALSE(ParseHttpUrl("http:///v1").ok());
  EXPECT_FALSE(ParseHttpUrl("gopher://x").ok());
}

TEST(StreamedCompletion, TimesChunksWithText) {
  StreamedCompletion s;
  EXPECT_TRUE(s.OnEvent(R"({"choices":[{"text":""}]})", 0.05));  // empty text: not a token
  EXPECT_TRUE(s.OnEvent(R"({"choices":[{"text":"a"}]})", 0.1));
  EXPECT_TRUE(s.OnEvent(R"({"choices":[{"delta":{"content":"b"}}]})", 0.3));
  EXPECT_TRUE(s.OnEvent(R"({"choices":[{"text":"c"}]})", 0.6));
  EXPECT_TRUE(s.OnEvent("[DONE]", 0.61));
  RequestRecord r = s.Finish(0.7, 200, "");
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_DOUBLE_EQ(r.ttft, 0.1);
  EXPECT_DOUBLE_EQ(r.e2e, 0.7);
  EXPECT_EQ(r.output_tokens, 3);  // no usage: chunks with text
  EXPECT_EQ(r.prompt_tokens, -1);
  ASSERT_EQ(r.itl.size(), 2u);
  EXPECT_NEAR(r.itl[0], 0.2, 1e-12);
  EXPECT_NEAR(r.itl[1], 0.3, 1e-12);
}

TEST(StreamedCompletion, UsageOverridesChunkCounts) {
  StreamedCompletion s;
  s.OnEvent(R"({"choices":[{"text":"two tokens"}]})", 0.1);
  s.OnEvent(R"({"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2}})", 0.2);
  RequestRecord r = s.Finish(0.2, 200, "");
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.output_tokens, 2);
  EXPECT_EQ(r.prompt_tokens, 5);
}

TEST(StreamedCompletion, Failures) {
  StreamedCompletion bad_json;
  EXPECT_FALSE(bad_json.OnEvent("{oops", 0.1));
  EXPECT_FALSE(bad_json.Finish(0.1, 200, "").ok);

  StreamedCompletion nothing;
  nothing.OnEvent("[DONE]", 0.1);
  RequestRecord r = nothing.Finish(0.1, 200, "");
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("without any text"), std::string::npos);

  StreamedCompletion transport;
  transport.OnEvent(R"({"choices":[{"text":"a"}]})", 0.1);
  r = transport.Finish(0.2, 200, "HTTP transport: Read");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error, "HTTP transport: Read");

  StreamedCompletion status;
  EXPECT_FALSE(status.Finish(0.2, 404, "").ok);
}

}  // namespace serve_benchmark_tests
}  // namespace kiln::bench
