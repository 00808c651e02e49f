// Replay between schedulers (Scheduler::ReleaseAll / Adopt): the requests of a lost worker group,
// caught in every state (queued, mid-prefill, mid-decode, samples waiting to fork, a plan in
// flight), finish on another group — with its own empty KV memory, block count and budget — with
// exactly the tokens they produce alone (ReferenceOutput, which never touches blocks).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <vector>

#include "coordinator/scheduler.h"
#include "tests/coordinator/scheduler_harness.h"

namespace tpserve {
namespace {

using testing_coordinator::Config;
using testing_coordinator::Iota;
using testing_coordinator::ReferenceOutput;
using testing_coordinator::Request;
using testing_coordinator::S;
using Harness = testing_coordinator::SchedulerHarness;

TEST(SchedulerReplayTest, ReleasedRequestsFinishOnAnotherSchedulerWithTheirOwnTokens) {
  SchedulerConfig lost_config = Config(16);
  lost_config.enable_prefix_caching = true;
  Harness lost(lost_config, 64);
  std::vector<ScheduleRequest> requests = {Request(1, Iota(9, 0), 12), Request(2, Iota(21, 3), 10),
                                           Request(3, Iota(7, 40), 8, /*n=*/3), Request(4, Iota(30, 5), 6),
                                           Request(5, Iota(20, 60), 8, /*n=*/2)};
  requests[1].sampling.temperature = 0.7f;
  requests[1].sampling.seed = 99;
  for (const ScheduleRequest& r : requests) lost.Add(r);
  for (int i = 0; i < 4; ++i) lost.Step();  // decodes, a chunked prefill, samples pending their fork
  (void)lost.scheduler().Schedule();        // a plan in flight when the group goes

  std::vector<ReleasedRequest> released = lost.scheduler().ReleaseAll();
  EXPECT_FALSE(lost.scheduler().has_unfinished());
  EXPECT_FALSE(lost.scheduler().has_plan_in_flight());
  lost.ExpectNoLeaks();
  ASSERT_EQ(released.size(), requests.size());
  int num_with_output = 0, num_pending_forks = 0;
  for (const ReleasedRequest& r : released) {
    num_pending_forks += r.has_pending_forks;
    for (const auto& seq : r.sequences) num_with_output += !seq->output_ids.empty();
  }
  EXPECT_GT(num_with_output, 0);    // some were decoding: their output must be re-prefilled
  EXPECT_EQ(num_pending_forks, 1);  // request 5's samples had not forked yet

  SchedulerConfig next_config = Config(24, 6);
  next_config.enable_prefix_caching = true;
  Harness next(next_config, 96);
  for (ReleasedRequest& r : released) {
    const Status adopted = next.scheduler().Adopt(std::move(r));
    ASSERT_TRUE(adopted.ok()) << adopted.ToString();
  }
  next.RunToCompletion();
  next.ExpectNoLeaks();
  for (const ScheduleRequest& r : requests) {
    for (int32_t i = 0; i < r.num_samples; ++i) {
      std::vector<int32_t> streamed = lost.outputs()[S(r.request_id, i)];
      const std::vector<int32_t>& rest = next.outputs()[S(r.request_id, i)];
      streamed.insert(streamed.end(), rest.begin(), rest.end());
      EXPECT_EQ(streamed, ReferenceOutput(S(r.request_id, i), r.prompt_ids, r.stopping, lost_config.max_model_len))
          << "seq " << S(r.request_id, i);
    }
  }
}

// Requests speculating by prompt lookup and by the draft model, released with proposals in flight,
// finish with their own tokens on a group with a draft model and on one without (whose draft
// requests then decode plainly); the new group's draft reads each context from position 0.
TEST(SchedulerReplayTest, SpeculatingRequestsFinishWithTheirOwnTokens) {
  for (bool next_has_draft : {true, false}) {
    SCOPED_TRACE(next_has_draft ? "to a group with a draft model" : "to a group without");
    SchedulerConfig lost_config = Config(32);
    lost_config.has_draft_model = true;
    Harness lost(lost_config, 64);
    lost.worker().SetNextToken(testing_coordinator::FakeRepetitiveToken);
    lost.worker().SetDraftModel(testing_coordinator::FakeRepetitiveToken);  // always right: never paused
    std::vector<ScheduleRequest> requests;
    for (uint64_t id = 1; id <= 4; ++id) {
      ScheduleRequest r = Request(id, {5, 9, 2, 5, 9, 2, static_cast<int32_t>(id)}, 40);
      r.speculative.method = id % 2 == 0 ? SpeculativeMethod::kDraft : SpeculativeMethod::kNgram;
      r.speculative.num_tokens = 3;
      requests.push_back(r);
      lost.Add(r);
    }
    for (int i = 0; i < 6; ++i) lost.Step();
    EXPECT_GT(lost.scheduler().Stats().num_draft_tokens, 0);
    const StepPlan in_flight = lost.scheduler().Schedule();  // proposals asked for, never answered
    EXPECT_TRUE(std::any_of(in_flight.sequences.begin(), in_flight.sequences.end(),
                            [](const SequencePlan& sp) { return sp.num_proposals > 0; }));
    std::vector<ReleasedRequest> released = lost.scheduler().ReleaseAll();
    lost.ExpectNoLeaks();
    for (const ReleasedRequest& r : released) {
      for (const auto& seq : r.sequences) EXPECT_EQ(seq->num_draft_computed, 0) << "seq " << seq->seq_id;
    }

    SchedulerConfig next_config = Config(32);
    next_config.has_draft_model = next_has_draft;
    Harness next(next_config, 64);
    next.worker().SetNextToken(testing_coordinator::FakeRepetitiveToken);
    if (next_has_draft) next.worker().SetDraftModel(testing_coordinator::FakeRepetitiveDraft);
    for (ReleasedRequest& r : released) ASSERT_TRUE(next.scheduler().Adopt(std::move(r)).ok());
    next.RunToCompletion();
    next.ExpectNoLeaks();
    for (const ScheduleRequest& r : requests) {
      std::vector<int32_t> streamed = lost.outputs()[S(r.request_id)];
      const std::vector<int32_t>& rest = next.outputs()[S(r.request_id)];
      streamed.insert(streamed.end(), rest.begin(), rest.end());
      EXPECT_EQ(streamed, ReferenceOutput(S(r.request_id), r.prompt_ids, r.stopping, lost_config.max_model_len,
                                          testing_coordinator::FakeRepetitiveToken))
          << "request " << r.request_id;
    }
    EXPECT_EQ(next.worker().num_draft_reads() > 0, next_has_draft);
  }
}

TEST(SchedulerReplayTest, AdoptRefusesWhatDoesNotFitOrIsAlreadyLive) {
  Harness lost(Config(16), 64);
  lost.Add(Request(1, Iota(9, 0), 40));
  lost.Add(Request(2, Iota(5, 0), 4));
  lost.Step();
  std::vector<ReleasedRequest> released = lost.scheduler().ReleaseAll();
  ASSERT_EQ(released.size(), 2u);

  Harness small(Config(16), 8);  // 8 blocks of 4 tokens: request 1 needs 12
  EXPECT_EQ(small.scheduler().Adopt(std::move(released[0])).code(), StatusCode::kOutOfRange);
  small.Add(Request(2, Iota(3, 0), 2));  // request 2 is live here already
  EXPECT_EQ(small.scheduler().Adopt(std::move(released[1])).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(small.scheduler().num_waiting(), 1);  // nothing was queued
}

}  // namespace
}  // namespace tpserve
