// The HTTP front end in process, on tiny-qwen2 over loopback: health while
// loading, answers equal to the engine's own, stream framing, status codes
// with OpenAI error bodies, the API key, the body limit, the waiting-queue
// bound, client disconnects, and graceful shutdown.
#include "server/api_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "server_test_util.h"
#include "tokenizer/chat_prompt.h"
#include "tokenizer/tokenizer.h"

namespace kiln::server {
namespace api_server_tests {

using nlohmann::json;

// A server on a free loopback port, serving on its own thread.
class TestServer {
 public:
  explicit TestServer(ServerOptions options = ServerOptions(), bool load = true) : api_(Prepare(options)) {
    Status bound = api_.Bind();
    EXPECT_TRUE(bound.ok()) << bound.ToString();
    serve_ = std::thread([this] { api_.Serve(); });
    if (load) Load();
  }
  ~TestServer() { Stop(5); }

  void Load() { api_.AttachEngine(server_test::TinyEngine()); }

  void Stop(double timeout) {
    api_.Shutdown(timeout);
    if (serve_.joinable()) serve_.join();
  }

  httplib::Client Client() const {
    httplib::Client client("127.0.0.1", api_.port());
    client.set_read_timeout(60);
    return client;
  }

  int port() const { return api_.port(); }
  ApiServer& api() { return api_; }
  LLMEngine& engine() { return api_.state().engine_loop()->engine(); }

 private:
  static ServerOptions Prepare(ServerOptions o) {
    o.host = "127.0.0.1";
    o.port = 0;
    if (o.served_model_name.empty()) o.served_model_name = "tiny-qwen2";
    o.access_log = false;
    return o;
  }

  ApiServer api_;
  std::thread serve_;
};

json Body(const httplib::Result& r) { return json::parse(r->body); }

// The "data: " payloads of a stream, checking its framing on the way: every
// event is one data line and a blank line, and [DONE] comes last.
std::vector<std::string> SseData(const std::string& body) {
  std::vector<std::string> events;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    EXPECT_NE(end, std::string::npos) << "unterminated event at byte " << pos;
    if (end == std::string::npos) break;
    std::string event = body.substr(pos, end - pos);
    EXPECT_EQ(event.rfind("data: ", 0), 0u) << event;
    EXPECT_EQ(event.find('\n'), std::string::npos) << event;
    events.push_back(event.substr(6));
    pos = end + 2;
  }
  EXPECT_FALSE(events.empty());
  if (!events.empty()) {
    EXPECT_EQ(events.back(), "[DONE]");
  }
  return events;
}

json UserSays(const std::string& text) { return json::array({{{"role", "user"}, {"content", text}}}); }

std::string ChatBody(json extra = json::object()) {
  json body = {{"model", "tiny-qwen2"}, {"messages", UserSays("Tell me of the king")}, {"temperature", 0}};
  body.update(extra);
  return body.dump();
}

void ExpectError(const httplib::Result& r, int status, const std::string& param, const std::string& words = "") {
  ASSERT_TRUE(r) << "no response: " << httplib::to_string(r.error());
  EXPECT_EQ(r->status, status) << r->body;
  json body = json::parse(r->body, nullptr, false);
  ASSERT_TRUE(body.is_object()) << r->body;
  ASSERT_TRUE(body.contains("error")) << r->body;
  const json& e = body["error"];
  EXPECT_TRUE(e["message"].is_string());
  EXPECT_TRUE(e["type"].is_string());
  EXPECT_TRUE(e.contains("code"));
  if (param.empty()) {
    EXPECT_TRUE(e["param"].is_null()) << r->body;
  } else {
    EXPECT_EQ(e["param"], param) << r->body;
  }
  if (!words.empty()) {
    EXPECT_NE(e["message"].get<std::string>().find(words), std::string::npos) << r->body;
  }
}

// Reads Prometheus text into name{labels} -> value.
std::map<std::string, double> Metrics(const TestServer& server) {
  auto r = server.Client().Get("/metrics");
  std::map<std::string, double> samples;
  if (!r) return samples;
  std::istringstream in(r->body);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    size_t space = line.rfind(' ');
    samples[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  return samples;
}

// A raw connection for what a library client will not do: hang up midway.
int ConnectRaw(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  return fd;
}

void SendRequest(int fd, const std::string& path, const std::string& body) {
  std::string request = "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                        std::to_string(body.size()) + "\r\n\r\n" + body;
  ASSERT_EQ(write(fd, request.data(), request.size()), static_cast<ssize_t>(request.size()));
}

// Waits (boundedly) for a condition the server reaches on its own threads.
template <typename Condition>
bool Eventually(Condition condition) {
  for (int i = 0; i < 1000; ++i) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return condition();
}

TEST(ApiServerTest, HealthIsUnavailableUntilTheModelIsLoaded) {
  TestServer server(ServerOptions(), /*load=*/false);
  auto health = server.Client().Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 503);
  EXPECT_EQ(health->get_header_value("Retry-After"), "1");
  ExpectError(server.Client().Post("/v1/chat/completions", ChatBody(), "application/json"), 503, "", "loading");
  auto metrics = server.Client().Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  auto models = server.Client().Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(Body(models)["data"][0]["id"], "tiny-qwen2");

  server.Load();
  health = server.Client().Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

TEST(ApiServerTest, ChatAnswerIsTheEnginesGreedyOutput) {
  TestServer server;
  auto reference = server_test::TinyEngine();
  ASSERT_TRUE(reference);
  auto prompt = RenderChatPrompt(*reference->tokenizer(), UserSays("Tell me of the king"));
  ASSERT_TRUE(prompt.ok());
  GenerationRequest g;
  g.prompt = *prompt;
  g.add_special_tokens = false;
  g.params.temperature = 0;
  g.params.max_tokens = 24;
  auto expected = reference->Generate({g});
  ASSERT_TRUE(expected.ok());

  auto r = server.Client().Post("/v1/chat/completions", ChatBody({{"max_tokens", 24}}), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
  json body = Body(r);
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(body["model"], "tiny-qwen2");
  EXPECT_EQ(body["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(body["choices"][0]["message"]["content"], (*expected)[0].text);
  EXPECT_EQ(body["choices"][0]["finish_reason"], FinishReasonName((*expected)[0].stats.finish_reason));
  EXPECT_EQ(body["usage"]["prompt_tokens"], (*expected)[0].stats.prompt_tokens);
  EXPECT_EQ(body["usage"]["completion_tokens"], (*expected)[0].stats.completion_tokens);
}

TEST(ApiServerTest, StreamedChunksAddUpToTheWholeAnswer) {
  TestServer server;
  auto whole = server.Client().Post("/v1/chat/completions", ChatBody({{"max_tokens", 20}}), "application/json");
  ASSERT_TRUE(whole);
  ASSERT_EQ(whole->status, 200);
  auto r = server.Client().Post(
      "/v1/chat/completions",
      ChatBody({{"max_tokens", 20}, {"stream", true}, {"stream_options", {{"include_usage", true}}}}),
      "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  std::vector<std::string> events = SseData(r->body);
  ASSERT_GE(events.size(), 4u);
  json first = json::parse(events[0]);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  std::string text;
  std::string id = first["id"];
  json finish, usage;
  for (size_t i = 1; i + 1 < events.size(); ++i) {
    json chunk = json::parse(events[i]);
    EXPECT_EQ(chunk["id"], id);
    if (chunk["choices"].empty()) {
      usage = chunk["usage"];
      EXPECT_EQ(i, events.size() - 2) << "the usage chunk comes last";
      continue;
    }
    EXPECT_TRUE(chunk["usage"].is_null());
    const json& choice = chunk["choices"][0];
    if (!choice["finish_reason"].is_null()) {
      finish = choice;
      continue;
    }
    EXPECT_TRUE(finish.is_null()) << "content after the finish chunk";
    text += choice["delta"]["content"].get<std::string>();
  }
  json expected = Body(whole);
  EXPECT_EQ(text, expected["choices"][0]["message"]["content"]);
  EXPECT_EQ(finish["finish_reason"], expected["choices"][0]["finish_reason"]);
  // Token counts agree; cached tokens differ, as the second request found
  // the first's prompt in the prefix cache.
  EXPECT_EQ(usage["prompt_tokens"], expected["usage"]["prompt_tokens"]);
  EXPECT_EQ(usage["completion_tokens"], expected["usage"]["completion_tokens"]);
  EXPECT_GT(usage["prompt_tokens_details"]["cached_tokens"].get<int>(), 0);
}

TEST(ApiServerTest, CompletionsServeEveryPromptAndChoice) {
  TestServer server;
  json request = {{"prompt", {"The king", "Once upon a time"}}, {"n", 2},         {"max_tokens", 6},
                  {"temperature", 1.0},                         {"seed", 1234},   {"ignore_eos", true}};
  auto a = server.Client().Post("/v1/completions", request.dump(), "application/json");
  auto b = server.Client().Post("/v1/completions", request.dump(), "application/json");
  ASSERT_TRUE(a && b);
  ASSERT_EQ(a->status, 200) << a->body;
  json ja = Body(a), jb = Body(b);
  EXPECT_EQ(ja["object"], "text_completion");
  ASSERT_EQ(ja["choices"].size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(ja["choices"][i]["index"], i);
    EXPECT_EQ(ja["choices"][i]["text"], jb["choices"][i]["text"]) << "a seed reproduces choice " << i;
    EXPECT_EQ(ja["choices"][i]["finish_reason"], "length");
  }
  EXPECT_EQ(ja["usage"]["completion_tokens"], 24);
  auto tokenize = [&](const std::string& text) {
    auto r = server.Client().Post("/tokenize", json({{"prompt", text}}).dump(), "application/json");
    return Body(r)["count"].get<int>();
  };
  EXPECT_EQ(ja["usage"]["prompt_tokens"], tokenize("The king") + tokenize("Once upon a time"));
}

TEST(ApiServerTest, StopStringsEndTheTextBeforeThem) {
  TestServer server;
  json request = {{"prompt", "The king"}, {"max_tokens", 40}, {"temperature", 0}, {"ignore_eos", true}};
  auto whole = server.Client().Post("/v1/completions", request.dump(), "application/json");
  ASSERT_TRUE(whole);
  std::string text = Body(whole)["choices"][0]["text"];
  ASSERT_GE(text.size(), 12u);
  std::string stop = text.substr(8, 3);
  request["stop"] = {stop};
  auto stopped = server.Client().Post("/v1/completions", request.dump(), "application/json");
  ASSERT_TRUE(stopped);
  json body = Body(stopped);
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(body["choices"][0]["text"], text.substr(0, text.find(stop)));
}

// Text held back (here all of it, by a stop string that the output is a
// prefix of) makes events without text; the stream must run on to the end.
TEST(ApiServerTest, StreamsWithHeldBackTextRunToTheEnd) {
  TestServer server;
  json request = {{"prompt", "The king"}, {"max_tokens", 12}, {"temperature", 0}, {"ignore_eos", true}};
  auto whole = server.Client().Post("/v1/completions", request.dump(), "application/json");
  ASSERT_TRUE(whole);
  std::string text = Body(whole)["choices"][0]["text"];
  request["stop"] = {text + "\x01"};
  request["stream"] = true;
  auto r = server.Client().Post("/v1/completions", request.dump(), "application/json");
  ASSERT_TRUE(r);
  std::vector<std::string> events = SseData(r->body);
  std::string streamed;
  std::string finish;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    json chunk = json::parse(events[i]);
    streamed += chunk["choices"][0]["text"].get<std::string>();
    if (!chunk["choices"][0]["finish_reason"].is_null()) finish = chunk["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(streamed, text);
  EXPECT_EQ(finish, "length");
}

TEST(ApiServerTest, BadRequestsGetOpenAiErrors) {
  TestServer server;
  auto post = [&](const std::string& path, const std::string& body) {
    return server.Client().Post(path, body, "application/json");
  };
  ExpectError(post("/v1/chat/completions", "{\"messages\": [}"), 400, "", "not valid JSON");
  ExpectError(post("/v1/chat/completions", ""), 400, "", "empty");
  ExpectError(post("/v1/chat/completions", ChatBody({{"temperature", "warm"}})), 400, "temperature");
  ExpectError(post("/v1/chat/completions", ChatBody({{"messages", 5}})), 400, "messages");
  ExpectError(post("/v1/chat/completions", ChatBody({{"max_tokens", 5000}})), 400, "max_tokens", "context");
  ExpectError(post("/v1/completions", json({{"prompt", std::vector<int>(2000, 5)}}).dump()), 400, "prompt", "context");
  ExpectError(post("/v1/completions", json({{"prompt", {1, 99999}}}).dump()), 400, "prompt", "vocabulary");
  ExpectError(post("/v1/chat/completions", ChatBody({{"model", "gpt-4o"}})), 404, "model", "gpt-4o");
  ExpectError(post("/v1/embeddings", "{}"), 404, "");
  ExpectError(server.Client().Get("/v1/models/other"), 404, "model");
  ExpectError(post("/detokenize", json({{"tokens", {1, -5}}}).dump()), 400, "tokens[1]");
}

TEST(ApiServerTest, AnApiKeyIsRequiredWhenSet) {
  ServerOptions o;
  o.api_key = "sekret";
  TestServer server(o);
  ExpectError(server.Client().Post("/v1/chat/completions", ChatBody({{"max_tokens", 2}}), "application/json"), 401,
              "", "API key");
  ExpectError(server.Client().Get("/v1/models"), 401, "");
  httplib::Client wrong = server.Client();
  wrong.set_bearer_token_auth("sekreT");
  ExpectError(wrong.Get("/v1/models"), 401, "", "incorrect");
  httplib::Client right = server.Client();
  right.set_bearer_token_auth("sekret");
  auto r = right.Post("/v1/chat/completions", ChatBody({{"max_tokens", 2}}), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  // Probes stay open.
  auto health = server.Client().Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

TEST(ApiServerTest, TheChatPageLoadsWithoutTheKeyUnderAStrictPolicy) {
  ServerOptions o;
  o.api_key = "sekret";
  TestServer server(o);
  const std::pair<const char*, const char*> files[] = {
      {"/", "text/html"}, {"/chat.js", "text/javascript"}, {"/chat.css", "text/css"}, {"/favicon.svg", "image/svg"}};
  for (const auto& [path, type] : files) {
    SCOPED_TRACE(path);
    auto r = server.Client().Get(path);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->get_header_value("Content-Type").rfind(type, 0), 0u) << r->get_header_value("Content-Type");
    const std::string csp = r->get_header_value("Content-Security-Policy");
    EXPECT_NE(csp.find("default-src 'none'"), std::string::npos) << csp;
    EXPECT_NE(csp.find("script-src 'self';"), std::string::npos) << csp;
    EXPECT_EQ(csp.find("unsafe"), std::string::npos) << csp;
    EXPECT_EQ(r->get_header_value("X-Content-Type-Options"), "nosniff");
    EXPECT_FALSE(r->body.empty());
  }
  auto page = server.Client().Get("/");
  ASSERT_TRUE(page);
  EXPECT_NE(page->body.find("<script src=\"/chat.js\""), std::string::npos);
  // The page's files are open, and nothing else: the API and other paths
  // still need the key, and the page's paths only for reading.
  ExpectError(server.Client().Get("/v1/models"), 401, "");
  ExpectError(server.Client().Get("/chat.jsx"), 401, "");
  ExpectError(server.Client().Get("/chatxjs"), 401, "");
  ExpectError(server.Client().Post("/", "{}", "application/json"), 401, "");
  httplib::Client right = server.Client();
  right.set_bearer_token_auth("sekret");
  ExpectError(right.Get("/chatxjs"), 404, "");
}

TEST(ApiServerTest, BodiesOverTheLimitGet413) {
  ServerOptions o;
  o.max_body_size = 4096;
  TestServer server(o);
  std::string big = ChatBody({{"padding", std::string(10000, 'x')}});
  ExpectError(server.Client().Post("/v1/chat/completions", big, "application/json"), 413, "", "4096");
  // Chunked, so that the size is not declared up front.
  httplib::Client client = server.Client();
  auto chunked = client.Post(
      "/v1/chat/completions",
      [&](size_t offset, httplib::DataSink& sink) {
        if (offset < big.size()) {
          sink.write(big.data() + offset, std::min<size_t>(1000, big.size() - offset));
        } else {
          sink.done();
        }
        return true;
      },
      "application/json");
  ExpectError(chunked, 413, "", "4096");
  // A body within the limit still works.
  auto r = server.Client().Post("/v1/chat/completions", ChatBody({{"max_tokens", 2}}), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

TEST(ApiServerTest, AFullQueueGets503WithRetryAfter) {
  ServerOptions o;
  o.max_queued_requests = 3;
  TestServer server(o);
  WaitingLimit& waiting = server.api().state().waiting();
  ASSERT_TRUE(waiting.TryAcquire(2));  // two requests waiting
  auto r = server.Client().Post("/v1/completions", json({{"prompt", "x"}, {"max_tokens", 2}, {"n", 2}}).dump(),
                                "application/json");
  ExpectError(r, 503, "", "waiting");
  EXPECT_EQ(r->get_header_value("Retry-After"), "1");
  EXPECT_EQ(Body(r)["error"]["code"], "queue_full");
  r = server.Client().Post("/v1/completions", json({{"prompt", "x"}, {"max_tokens", 2}}).dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << "one place was left";
  waiting.Release(2);
  EXPECT_EQ(waiting.count(), 0) << "every place taken by a request is given back";
}

TEST(ApiServerTest, AClientThatHangsUpAbortsItsRequest) {
  TestServer server;
  const std::string long_request =
      json({{"prompt", "The king"}, {"max_tokens", 1000}, {"ignore_eos", true}, {"stream", true}}).dump();
  int fd = ConnectRaw(server.port());
  SendRequest(fd, "/v1/completions", long_request);
  char buffer[512];
  ASSERT_GT(read(fd, buffer, sizeof(buffer)), 0);  // the stream has started
  close(fd);
  // Non-streaming: hang up without reading anything.
  fd = ConnectRaw(server.port());
  SendRequest(fd, "/v1/completions", json({{"prompt", "Once"}, {"max_tokens", 1000}, {"ignore_eos", true}}).dump());
  ASSERT_TRUE(Eventually([&] { return server.api().state().num_requests() == 1; }));
  close(fd);

  EXPECT_TRUE(Eventually([&] {
    auto m = Metrics(server);
    return m["kiln_request_finished_total{reason=\"abort\"}"] == 2 && m["kiln_kv_cache_blocks_used"] == 0 &&
           m["kiln_num_requests_running"] == 0;
  }));
  EXPECT_TRUE(Eventually([&] { return server.api().state().num_requests() == 0; }));
  EXPECT_EQ(server.api().state().waiting().count(), 0);
}

TEST(ApiServerTest, ShutdownLetsRunningStreamsFinish) {
  TestServer server;
  std::unique_ptr<httplib::Result> stream;
  std::thread client([&] {
    stream = std::make_unique<httplib::Result>(server.Client().Post(
        "/v1/completions",
        json({{"prompt", "The king"}, {"max_tokens", 600}, {"ignore_eos", true}, {"stream", true}, {"n", 4}}).dump(),
        "application/json"));
  });
  ASSERT_TRUE(Eventually([&] { return server.api().state().num_requests() == 1; }));
  server.api().Shutdown(60);
  client.join();
  ASSERT_TRUE(stream && *stream);
  EXPECT_EQ((*stream)->status, 200);
  std::vector<std::string> events = SseData((*stream)->body);
  int finished = 0;
  for (const std::string& e : events) {
    if (e != "[DONE]" && json::parse(e)["choices"][0]["finish_reason"] == "length") finished += 1;
  }
  EXPECT_EQ(finished, 4) << "every choice ran to max_tokens";
  // No longer accepting.
  httplib::Client late = server.Client();
  late.set_connection_timeout(2);
  EXPECT_FALSE(late.Get("/health"));
  server.Stop(0);
}

TEST(ApiServerTest, ShutdownAbortsWhatOutlastsTheTimeout) {
  TestServer server;
  std::unique_ptr<httplib::Result> whole;
  std::thread client([&] {
    whole = std::make_unique<httplib::Result>(server.Client().Post(
        "/v1/completions", json({{"prompt", "The king"}, {"max_tokens", 1000}, {"ignore_eos", true}, {"n", 8}}).dump(),
        "application/json"));
  });
  ASSERT_TRUE(Eventually([&] { return server.api().state().num_requests() == 1; }));
  server.api().Shutdown(0);
  client.join();
  ASSERT_TRUE(whole);
  ExpectError(*whole, 503, "", "shutting down");
  EXPECT_TRUE(Eventually([&] { return server.engine().Counters().kv_blocks_used == 0; }));
  server.Stop(0);
}

TEST(ApiServerTest, TokenizeAndDetokenizeRoundTrip) {
  TestServer server;
  auto t = server.Client().Post("/tokenize", json({{"prompt", "Hello world"}, {"add_special_tokens", false}}).dump(),
                                "application/json");
  ASSERT_TRUE(t);
  ASSERT_EQ(t->status, 200) << t->body;
  json tokens = Body(t);
  EXPECT_EQ(tokens["count"], tokens["tokens"].size());
  EXPECT_EQ(tokens["max_model_len"], 1024);
  auto d = server.Client().Post("/detokenize", json({{"tokens", tokens["tokens"]}}).dump(), "application/json");
  ASSERT_TRUE(d);
  EXPECT_EQ(Body(d)["prompt"], "Hello world");
  auto chat = server.Client().Post("/tokenize", json({{"messages", UserSays("Hi")}}).dump(), "application/json");
  ASSERT_TRUE(chat);
  EXPECT_GT(Body(chat)["count"].get<int>(), 5);  // the template's markers and the system message
}

}  // namespace api_server_tests
}  // namespace kiln::server
