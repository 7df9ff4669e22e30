// Backend URLs and the router's flags, and the text used for affinity.
#include "router/router_options.h"

#include <gtest/gtest.h>

#include "router/affinity_text.h"

namespace kiln::router {
namespace router_options_tests {

TEST(ParseBackendUrl, HostAndPort) {
  Expected<BackendAddress> a = ParseBackendUrl("http://127.0.0.1:8001/");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 8001);
  EXPECT_EQ(a->url, "http://127.0.0.1:8001");
  Expected<BackendAddress> b = ParseBackendUrl("http://replica");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->port, 80);
}

TEST(ParseBackendUrl, RefusesWhatItCannotServe) {
  for (const char* url : {"127.0.0.1:8001", "https://a:1", "http://a:0", "http://a:99999", "http://a:x",
                          "http://:80", "http://a:1/v1"}) {
    Expected<BackendAddress> a = ParseBackendUrl(url);
    EXPECT_FALSE(a.ok()) << url;
    if (!a.ok()) {
      EXPECT_NE(a.status().message().find(url), std::string::npos) << a.status().message();
    }
  }
}

TEST(RouterOptions, ValidateNamesTheFlag) {
  RouterOptions o;
  EXPECT_NE(o.Validate().message().find("--replica"), std::string::npos);
  o.replicas = {"http://a:1", "http://a:1/"};
  EXPECT_NE(o.Validate().message().find("twice"), std::string::npos);
  o.replicas = {"http://a:1", "http://b:1"};
  EXPECT_TRUE(o.Validate().ok());
  o.max_attempts = 0;
  EXPECT_NE(o.Validate().message().find("--max-attempts"), std::string::npos);
}

TEST(RouterOptions, PrefillDecodeModeNeedsBothSidesPairedUp) {
  RouterOptions o;
  o.prefill = {"http://p:1"};
  EXPECT_NE(o.Validate().message().find("--decode"), std::string::npos);
  o.decode = {"http://d:1"};
  EXPECT_TRUE(o.Validate().ok());
  EXPECT_TRUE(o.disaggregated());
  o.prefill = {"http://p:1", "http://p:2", "http://p:3"};
  EXPECT_TRUE(o.Validate().ok());  // one decode instance takes every prefill instance's KV
  o.decode = {"http://d:1", "http://d:2"};
  EXPECT_NE(o.Validate().message().find("one per --prefill"), std::string::npos);
  o.decode = {"http://d:1", "http://d:2", "http://p:1"};
  EXPECT_NE(o.Validate().message().find("twice"), std::string::npos);
  o.decode = {"http://d:1"};
  o.replicas = {"http://r:1"};
  EXPECT_NE(o.Validate().message().find("not both"), std::string::npos);
}

TEST(AffinityText, CompletionPrompt) {
  EXPECT_EQ(AffinityText(R"({"prompt": "hello"})", ApiKind::kCompletion), "hello");
  EXPECT_EQ(AffinityText(R"({"prompt": ["a", "b"]})", ApiKind::kCompletion), "ab");
  EXPECT_EQ(AffinityText(R"({"prompt": [1, 2]})", ApiKind::kCompletion), "1 2 ");
  EXPECT_EQ(AffinityText("not json", ApiKind::kCompletion), "");
  EXPECT_EQ(AffinityText(R"([1])", ApiKind::kCompletion), "");
}

TEST(AffinityText, ChatMessagesInOrder) {
  const std::string a = AffinityText(
      R"({"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": [{"type": "text", "text": "U"}]}]})",
      ApiKind::kChat);
  EXPECT_EQ(a, "system\nS\nuser\nU\n");
  // A conversation that continues shares the earlier text as its prefix.
  const std::string b = AffinityText(
      R"({"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}, {"role": "assistant", "content": "A"}]})",
      ApiKind::kChat);
  EXPECT_EQ(b.rfind(a, 0), 0u);
  EXPECT_EQ(AffinityText(R"({"messages": 3})", ApiKind::kChat), "");
}

}  // namespace router_options_tests
}  // namespace kiln::router
