// Server option checks, the default served model name and access log lines.
#include "server/server_options.h"

#include <gtest/gtest.h>

#include "server/access_log.h"

namespace kiln::server {
namespace server_options_tests {

TEST(ServerOptionsTest, DefaultServedModelNameIsTheFolderOrFileName) {
  EXPECT_EQ(DefaultServedModelName("../shared/models/tiny-qwen2"), "tiny-qwen2");
  EXPECT_EQ(DefaultServedModelName("../shared/models/tiny-qwen2/"), "tiny-qwen2");
  EXPECT_EQ(DefaultServedModelName("models/gguf/tiny-llama-q8_0.gguf"), "tiny-llama-q8_0");
  EXPECT_EQ(DefaultServedModelName("qwen"), "qwen");
  EXPECT_FALSE(DefaultServedModelName("/").empty());
  EXPECT_FALSE(DefaultServedModelName(".").empty());
  EXPECT_NE(DefaultServedModelName("."), ".");
}

TEST(ServerOptionsTest, ValidateNamesTheFlag) {
  ServerOptions o;
  EXPECT_TRUE(o.Validate().ok());
  o.port = 70000;
  EXPECT_NE(o.Validate().message().find("--port"), std::string::npos);
  o = ServerOptions();
  o.max_queued_requests = 0;
  EXPECT_NE(o.Validate().message().find("--max-queued-requests"), std::string::npos);
  o = ServerOptions();
  o.max_concurrent_connections = 0;
  EXPECT_NE(o.Validate().message().find("--max-concurrent-connections"), std::string::npos);
  o = ServerOptions();
  o.shutdown_timeout_seconds = -1;
  EXPECT_NE(o.Validate().message().find("--shutdown-timeout"), std::string::npos);
  o = ServerOptions();
  o.max_body_size = 10;
  EXPECT_NE(o.Validate().message().find("--max-body-size"), std::string::npos);
}

TEST(AccessLogTest, LinesCarryIdStatusTokensAndLatency) {
  AccessRecord r;
  r.start_time = 1.0;
  r.request_id = "cmpl-abc";
  r.prompt_tokens = 5;
  r.completion_tokens = 16;
  std::string line = AccessLine(r, "127.0.0.1", 4242, "POST", "/v1/completions", 200, 1.25);
  EXPECT_EQ(line, "127.0.0.1:4242 \"POST /v1/completions\" 200 id=cmpl-abc prompt_tokens=5 completion_tokens=16 "
                  "latency=0.250s");
  AccessRecord bare;
  EXPECT_EQ(AccessLine(bare, "::1", 1, "GET", "/x\n\"y", 404, 0), "::1:1 \"GET /x\\x0a\\x22y\" 404");
}

}  // namespace server_options_tests
}  // namespace kiln::server
