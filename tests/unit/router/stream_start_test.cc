// Which stream events count as the stream having begun.
#include "router/stream_start.h"

#include <gtest/gtest.h>

namespace kiln::router {
namespace stream_start_tests {

constexpr const char* kRole =
    "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},"
    "\"logprobs\":null,\"finish_reason\":null}]}\n\n";

TEST(StreamHasBegun, NotUntilAnEventIsComplete) {
  EXPECT_FALSE(StreamHasBegun(""));
  EXPECT_FALSE(StreamHasBegun("data: {\"choices\":[{\"text\":\"a\"}]}\n"));
  EXPECT_TRUE(StreamHasBegun("data: {\"choices\":[{\"text\":\"a\"}]}\n\n"));
}

TEST(StreamHasBegun, TheRolePreambleDoesNotCount) {
  EXPECT_FALSE(StreamHasBegun(kRole));
  // Two choices (n = 2) each announce their role.
  EXPECT_FALSE(StreamHasBegun(std::string(kRole) + kRole));
  EXPECT_FALSE(
      StreamHasBegun(std::string(kRole) + "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi"));
}

TEST(StreamHasBegun, OutputDoes) {
  const std::string role = kRole;
  EXPECT_TRUE(
      StreamHasBegun(role + "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n"));
  EXPECT_TRUE(StreamHasBegun(
      role + "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"));
  EXPECT_TRUE(StreamHasBegun(role + "data: {\"choices\":[{\"delta\":{\"tool_calls\":[]}}]}\n\n"));
  EXPECT_TRUE(StreamHasBegun("data: {\"error\":{\"message\":\"x\"}}\n\n"));
  EXPECT_TRUE(StreamHasBegun("data: [DONE]\n\n"));
  EXPECT_TRUE(StreamHasBegun(": a comment\n\n"));
}

}  // namespace stream_start_tests
}  // namespace kiln::router
