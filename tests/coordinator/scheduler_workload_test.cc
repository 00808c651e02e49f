// Seeded random workloads: requests of mixed lengths with shared prefixes, n > 1 samples, staggered
// arrivals and cancellations, run under tight and roomy KV memory with each scheduling option.
// Whatever the preemptions, chunking and cache hits, every finished sample must produce exactly
// the tokens it produces alone, and no block may leak.
#include <gtest/gtest.h>

#include <random>

#include "tests/coordinator/scheduler_harness.h"

namespace tpserve {
namespace {

using testing_coordinator::Config;
using testing_coordinator::Request;
using testing_coordinator::SchedulerHarness;

struct WorkloadCase {
  const char* name;
  SchedulerConfig config;
  int32_t num_blocks;
  bool expect_preemptions;
  KvGroups groups = {};
};

struct WorkloadOutcome {
  int64_t num_preemptions = 0;
  int64_t prefix_hit_tokens = 0;
  int64_t num_copies = 0;
  int64_t num_window_releases = 0;
  uint64_t plan_digest = 0;
};

WorkloadOutcome RunWorkload(const WorkloadCase& c, uint32_t seed) {
  std::mt19937 rng(seed);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::vector<std::vector<int32_t>> prefixes;
  for (int i = 0; i < 3; ++i) {
    std::vector<int32_t> p(uniform(4, 14));
    for (int32_t& t : p) t = uniform(1, 999);
    prefixes.push_back(p);
  }
  SchedulerHarness h(c.config, c.num_blocks, c.groups);
  constexpr int kNumRequests = 40;
  int next_request = 1;
  int steps = 0;
  while ((next_request <= kNumRequests || h.scheduler().has_unfinished()) && steps < 5000) {
    // Requests arrive in bursts between steps.
    while (next_request <= kNumRequests && uniform(0, 2) != 0) {
      std::vector<int32_t> prompt;
      if (uniform(0, 3) != 0) prompt = prefixes[uniform(0, 2)];
      const int tail = uniform(prompt.empty() ? 1 : 0, 14);
      for (int i = 0; i < tail; ++i) prompt.push_back(uniform(1, 999));
      const int n_choice = uniform(0, 5);
      ScheduleRequest r = Request(next_request, prompt, uniform(1, 16), n_choice == 5 ? 3 : n_choice == 4 ? 2 : 1);
      r.priority = uniform(0, 2);
      r.stopping.eos_token_id = 7;
      r.stopping.ignore_eos = uniform(0, 1) == 1;
      if (uniform(0, 3) == 0) r.stopping.stop_token_ids = {uniform(1, 999), uniform(1, 999)};
      h.Add(r);
      ++next_request;
    }
    // Now and then a client goes away.
    if (uniform(0, 19) == 0 && next_request > 1) {
      (void)h.scheduler().AbortRequest(static_cast<uint64_t>(uniform(1, next_request - 1)));
    }
    h.Step();
    ++steps;
    if (::testing::Test::HasFatalFailure()) break;
  }
  EXPECT_FALSE(h.scheduler().has_unfinished()) << c.name << " seed " << seed << " stuck";
  h.ExpectReferenceOutputs();
  h.ExpectNoLeaks();
  const SchedulerStats stats = h.scheduler().Stats();
  return {stats.num_preemptions, stats.blocks.prefix_hit_tokens, stats.blocks.num_copies,
          stats.blocks.num_window_releases, h.plan_digest()};
}

std::vector<WorkloadCase> Cases() {
  std::vector<WorkloadCase> cases;
  SchedulerConfig tight = Config(/*budget=*/32, /*max_num_seqs=*/8);
  tight.max_queue = 1000;
  tight.max_model_len = 64;
  tight.enable_prefix_caching = true;
  cases.push_back({"tight_prefix_chunked", tight, /*num_blocks=*/16, true});

  SchedulerConfig no_chunk = tight;
  no_chunk.enable_prefix_caching = false;
  no_chunk.enable_chunked_prefill = false;
  cases.push_back({"tight_no_prefix_no_chunking", no_chunk, 16, true});

  SchedulerConfig priority = tight;
  priority.enable_priority = true;
  priority.prefill_chunk = 7;
  cases.push_back({"priority_small_chunks", priority, 24, false});

  SchedulerConfig roomy = tight;
  roomy.max_num_batched_tokens = 64;
  roomy.max_num_seqs = 32;
  cases.push_back({"roomy", roomy, 512, false});

  // Layer groups: two sliding (window 6) around a full one; sliding pages are released as sequences
  // pass them, prefix hits need the window before their first recomputed token.
  KvGroups window;
  window.sliding = {true, false, true};
  window.window = 6;
  cases.push_back({"tight_prefix_chunked_window", tight, /*num_blocks=*/36, true, window});
  SchedulerConfig window_chunks = tight;
  window_chunks.prefill_chunk = 5;
  cases.push_back({"window_small_chunks", window_chunks, 48, false, window});
  return cases;
}

TEST(SchedulerWorkloadTest, EveryOutputMatchesItsSoloRunAndNothingLeaks) {
  for (const WorkloadCase& c : Cases()) {
    WorkloadOutcome total;
    for (uint32_t seed = 1; seed <= 4; ++seed) {
      SCOPED_TRACE(std::string(c.name) + " seed " + std::to_string(seed));
      const WorkloadOutcome o = RunWorkload(c, seed);
      total.num_preemptions += o.num_preemptions;
      total.prefix_hit_tokens += o.prefix_hit_tokens;
      total.num_copies += o.num_copies;
      total.num_window_releases += o.num_window_releases;
      if (std::string(c.name) == "roomy") {
        EXPECT_EQ(o.num_preemptions, 0);
      }
    }
    if (c.expect_preemptions) {
      EXPECT_GT(total.num_preemptions, 0) << c.name;
    }
    if (c.config.enable_prefix_caching) {
      EXPECT_GT(total.prefix_hit_tokens, 0) << c.name;
    }
    EXPECT_GT(total.num_copies, 0) << c.name;  // n > 1 samples diverge in every case
    EXPECT_EQ(total.num_window_releases > 0, c.groups.num_sliding() > 0) << c.name;
  }
}

TEST(SchedulerWorkloadTest, SameInputsSamePlans) {
  const WorkloadCase c = Cases()[0];
  const WorkloadOutcome a = RunWorkload(c, 11);
  const WorkloadOutcome b = RunWorkload(c, 11);
  EXPECT_EQ(a.plan_digest, b.plan_digest);
  const WorkloadOutcome other = RunWorkload(c, 12);
  EXPECT_NE(a.plan_digest, other.plan_digest);
}

}  // namespace
}  // namespace tpserve
