#include "coordinator/stop_string_matcher.h"

#include <gtest/gtest.h>

#include <random>

namespace tpserve {
namespace {

// Reference: scanning the whole text byte by byte, the first stop string to complete (the one
// starting earliest among those ending at that byte) cuts the text where it starts.
std::string CutAtStop(const std::string& text, const std::vector<std::string>& stops, bool* stopped) {
  for (size_t end = 1; end <= text.size(); ++end) {
    size_t best = std::string::npos;
    for (const auto& s : stops) {
      if (!s.empty() && s.size() <= end && text.compare(end - s.size(), s.size(), s) == 0) {
        best = std::min(best, end - s.size());
      }
    }
    if (best != std::string::npos) {
      *stopped = true;
      return text.substr(0, best);
    }
  }
  *stopped = false;
  return text;
}

TEST(StopStringMatcherTest, HoldsBackPossibleStartAndCutsAtMatch) {
  StopStringMatcher m({"END"});
  EXPECT_EQ(m.Push("hello E"), "hello ");
  EXPECT_EQ(m.Push("N"), "");
  EXPECT_EQ(m.Push("X more"), "ENX more");
  EXPECT_EQ(m.Push(" EN"), " ");
  EXPECT_EQ(m.Push("D tail"), "");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.Push("after"), "");
  EXPECT_EQ(m.Flush(), "");
}

TEST(StopStringMatcherTest, FlushReleasesHeldText) {
  StopStringMatcher m({"\n\n"});
  EXPECT_EQ(m.Push("line\n"), "line");
  EXPECT_FALSE(m.stopped());
  EXPECT_EQ(m.Flush(), "\n");
}

TEST(StopStringMatcherTest, NoStopsPassesEverythingThrough) {
  StopStringMatcher m({});
  EXPECT_EQ(m.Push("abc"), "abc");
  EXPECT_EQ(m.Flush(), "");
}

// Random texts over a tiny alphabet, split into random pieces: the concatenation of everything
// released equals the reference cut, whatever the split (pieces of 1..4 bytes; a real decoder
// yields one token's text per push).
TEST(StopStringMatcherTest, MatchesWholeTextReferenceUnderRandomSplits) {
  std::mt19937 rng(1234);
  const std::string alphabet = "abc";
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<std::string> stops;
    int num_stops = rng() % 3;
    for (int s = 0; s < num_stops; ++s) {
      std::string stop;
      int len = 1 + rng() % 4;
      for (int i = 0; i < len; ++i) stop += alphabet[rng() % alphabet.size()];
      stops.push_back(stop);
    }
    std::string text;
    int len = rng() % 24;
    for (int i = 0; i < len; ++i) text += alphabet[rng() % alphabet.size()];
    StopStringMatcher m(stops);
    std::string out;
    size_t pos = 0;
    while (pos < text.size()) {
      size_t piece = 1 + rng() % 4;
      out += m.Push(std::string_view(text).substr(pos, piece));
      pos += piece;
    }
    out += m.Flush();
    bool stopped = false;
    std::string expected = CutAtStop(text, stops, &stopped);
    ASSERT_EQ(out, expected) << "trial " << trial << " text " << text;
    ASSERT_EQ(m.stopped(), stopped);
  }
}

}  // namespace
}  // namespace tpserve
