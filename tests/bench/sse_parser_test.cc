// SseParser against hand-built event streams (the HTML standard's examples and llama-server's
// shapes), fed whole, byte by byte and split at every position: the events must be the hand-written ones.
#include "bench/loadgen/sse_parser.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tpserve::loadgen {
namespace {

struct Expected {
  std::string type, data, id;
};

std::vector<SseEvent> FeedPieces(const std::vector<std::string>& pieces) {
  SseParser p;
  std::vector<SseEvent> events;
  for (const std::string& piece : pieces) EXPECT_TRUE(p.Feed(piece, &events).ok());
  return events;
}

void ExpectEvents(const std::string& stream, const std::vector<Expected>& expected) {
  std::vector<std::vector<std::string>> splits = {{stream}};
  std::vector<std::string> bytes;
  for (char c : stream) bytes.push_back(std::string(1, c));
  splits.push_back(bytes);
  for (size_t i = 0; i <= stream.size(); ++i) splits.push_back({stream.substr(0, i), stream.substr(i)});
  for (const auto& pieces : splits) {
    const std::vector<SseEvent> events = FeedPieces(pieces);
    ASSERT_EQ(events.size(), expected.size()) << pieces.size() << " pieces";
    for (size_t i = 0; i < events.size(); ++i) {
      EXPECT_EQ(events[i].type, expected[i].type) << "event " << i;
      EXPECT_EQ(events[i].data, expected[i].data) << "event " << i << ", " << pieces.size() << " pieces";
      EXPECT_EQ(events[i].id, expected[i].id) << "event " << i;
    }
  }
}

TEST(SseParserTest, LlamaServerStream) {
  ExpectEvents(
      "data: {\"content\":\"a\",\"tokens_predicted\":1}\n\n"
      ":\n\n"  // llama-server's keep-alive ping: a comment, no event
      "data: {\"content\":\"b\",\"stop\":true}\n\n",
      {{"message", "{\"content\":\"a\",\"tokens_predicted\":1}", ""}, {"message", "{\"content\":\"b\",\"stop\":true}", ""}});
}

TEST(SseParserTest, MultiLineFieldsAndLineEnds) {
  // Data lines join with '\n'; CRLF, CR and LF all end lines; one space after the colon is dropped.
  ExpectEvents("data: first\r\ndata:second\rdata:  third\n\n", {{"message", "first\nsecond\n third", ""}});
  // Named events, ids that persist, a field with no colon, unknown fields ignored, a BOM at the start.
  ExpectEvents(
      "\xEF\xBB\xBF"
      "event: add\nid: 7\nretry: 10\nfoo: bar\ndata: x\n\n"
      "data\n\n"
      "event: remove\ndata: y\n\n",
      {{"add", "x", "7"}, {"message", "", "7"}, {"remove", "y", "7"}});
  // A block without data is no event; an unterminated event at the end is not dispatched.
  ExpectEvents("event: nothing\nid: 3\n\ndata: cut", {});
}

TEST(SseParserTest, OversizedEventIsRefused) {
  SseParser p;
  std::vector<SseEvent> events;
  const std::string line = "data: " + std::string(1 << 20, 'x') + "\n";
  Status status = OkStatus();
  for (int i = 0; i < 20 && status.ok(); ++i) status = p.Feed(line, &events);
  EXPECT_EQ(status.code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(events.empty());
}

}  // namespace
}  // namespace tpserve::loadgen
