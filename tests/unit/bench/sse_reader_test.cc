// Server-sent events split out of arbitrarily fragmented bytes.
#include "bench/sse_reader.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kiln::bench {
namespace sse_reader_tests {

std::vector<std::string> FeedInPieces(const std::string& stream, size_t piece) {
  SseReader reader;
  std::vector<std::string> events;
  for (size_t i = 0; i < stream.size(); i += piece) {
    reader.Feed(std::string_view(stream).substr(i, piece), [&](const std::string& d) { events.push_back(d); });
  }
  return events;
}

TEST(SseReader, SplitsEventsWhateverTheFragmentation) {
  const std::string stream =
      "data: {\"a\":1}\n\n"
      ": a comment\n"
      "event: message\n"
      "data: {\"b\":2}\r\n\r\n"
      "data:first\ndata: second\n\n"
      "data: [DONE]\r\r";
  const std::vector<std::string> expected = {"{\"a\":1}", "{\"b\":2}", "first\nsecond", "[DONE]"};
  for (size_t piece : {1, 2, 3, 7, 1000}) EXPECT_EQ(FeedInPieces(stream, piece), expected) << piece;
}

TEST(SseReader, EventsWithoutDataAreSkippedAndPartialLinesHeld) {
  SseReader reader;
  std::vector<std::string> events;
  auto collect = [&](const std::string& d) { events.push_back(d); };
  reader.Feed("event: ping\n\n", collect);
  EXPECT_TRUE(events.empty());
  reader.Feed("data: partial", collect);
  EXPECT_TRUE(events.empty());
  EXPECT_EQ(reader.pending_bytes(), 13u);
  reader.Feed("\n\n", collect);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0], "partial");
  reader.Feed("data\n\n", collect);  // a field with no colon: empty data
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1], "");
}

}  // namespace sse_reader_tests
}  // namespace kiln::bench
