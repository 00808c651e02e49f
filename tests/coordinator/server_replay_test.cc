// The coordinator Server when a worker group is lost: worker_lost, replay of its requests on another
// group or the next one to register, bounded by max_replays. Real ZeroMQ sockets, FakeWorkerGroup leaders
// (server_fixture.h); every wait is on a reply with a deadline.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "tests/coordinator/server_fixture.h"

namespace tpserve {
namespace {

// A group silent for 300 ms (beats every 50 ms) is lost: the tests see a loss within a second.
ServerOptions QuickLoss() {
  ServerOptions options;
  options.heartbeat_timeout = std::chrono::milliseconds(300);
  options.heartbeat_interval = std::chrono::milliseconds(50);
  return options;
}

TEST_F(ServerTest, LostGroupGivesWorkerLostAndServingContinues) {
  ServerOptions options = QuickLoss();
  options.max_replays = 0;
  options.step_timeout = std::chrono::milliseconds(300);
  StartServer(options);
  FakeWorkerGroup& group = AddGroup();
  auto client = NewClient();
  WaitForGroups(*client, 1);
  group.Freeze();
  auto lost = client->Generate(IdsRequest({1, 2}, 50));
  EXPECT_EQ(lost.status().code(), StatusCode::kUnavailable) << lost.status().ToString();
  WaitForGroups(*client, 0);
  AddGroup();
  WaitForGroups(*client, 1);
  auto ok = client->Generate(IdsRequest({1, 2}, 5));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->token_ids[0], FakeReference({1, 2}, {}, 5, kEos, kVocab));
}

// A group whose connection drops mid-step is noticed at the next heartbeat send, long before
// the step deadline.
TEST_F(ServerTest, CrashedGroupIsLostWithoutWaitingForTheStepDeadline) {
  ServerOptions options;
  options.max_replays = 0;
  options.step_timeout = std::chrono::milliseconds(600000);
  options.heartbeat_interval = std::chrono::milliseconds(20);
  StartServer(options);
  FakeWorkerGroupOptions group_options;
  group_options.crash_on_first_step = true;
  AddGroup(group_options);
  auto client = NewClient();
  WaitForGroups(*client, 1);
  const auto start = std::chrono::steady_clock::now();
  auto lost = client->Generate(IdsRequest({1, 2}, 50));
  EXPECT_EQ(lost.status().code(), StatusCode::kUnavailable) << lost.status().ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

// Streams `requests` on `client` while `inject` runs once, after `inject_after` chunks have
// arrived; returns each request's token ids and finish.
struct StreamedRequest {
  proto::GenerateRequest request;
  std::vector<int32_t> ids;
  std::optional<proto::Finish> finish;
  std::optional<proto::ErrorReply> error;
};
void StreamWithFault(Client& client, std::map<uint64_t, StreamedRequest>& requests, int inject_after,
                     const std::function<void()>& inject) {
  int num_chunks = 0, num_ended = 0;
  while (num_ended < static_cast<int>(requests.size())) {
    auto m = client.Receive(kWait);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    StreamedRequest& r = requests.at(m->request_id);
    if (m->kind == proto::ServerMessageKind::kChunk) {
      r.ids.insert(r.ids.end(), m->chunk.token_ids.begin(), m->chunk.token_ids.end());
      if (++num_chunks == inject_after) inject();
    } else if (m->kind == proto::ServerMessageKind::kFinish) {
      r.finish = m->finish;
      ++num_ended;
    } else if (m->kind == proto::ServerMessageKind::kError) {
      r.error = m->error;
      ++num_ended;
    }
  }
}

// Greedy and seeded requests of a given length, half of each.
std::map<uint64_t, StreamedRequest> StartReplayRequests(Client& client, int num_requests) {
  std::map<uint64_t, StreamedRequest> requests;
  std::mt19937 rng(11);
  for (int i = 0; i < num_requests; ++i) {
    StreamedRequest r;
    r.request = IdsRequest(RandomPrompt(rng, 3 + i), 40);
    r.request.ignore_eos = true;
    if (i % 2 == 1) {
      r.request.sampling.temperature = 0.8f;
      r.request.sampling.seed = 1000 + i;
      r.request.sampling.has_seed = true;
    }
    auto id = client.Start(r.request);
    EXPECT_TRUE(id.ok());
    requests[*id] = std::move(r);
  }
  return requests;
}

void ExpectReferenceIds(const std::map<uint64_t, StreamedRequest>& requests, uint32_t num_replays) {
  for (const auto& [id, r] : requests) {
    ASSERT_FALSE(r.error.has_value()) << r.error->message;
    ASSERT_TRUE(r.finish.has_value());
    EXPECT_EQ(r.finish->num_replays, num_replays) << "request " << id;
    SamplingParams sampling = r.request.sampling;
    // ignore_eos: no EOS stops the reference either.
    EXPECT_EQ(r.ids, FakeReference(r.request.prompt_ids, sampling, 40, -1, kVocab)) << "request " << id;
  }
}

// A group lost mid-stream: its requests move to the other group, re-prefill prompt + the tokens
// already streamed, and continue; each client sees exactly the reference tokens, no error, and a
// Finish that counts one replay. No KV block stays in use.
TEST_F(ServerTest, LostGroupsRequestsAreReplayedOnAnotherGroup) {
  ServerOptions options = QuickLoss();
  StartServer(options);
  FakeWorkerGroup& doomed = AddGroup();
  auto client = NewClient();
  WaitForGroups(*client, 1);
  std::map<uint64_t, StreamedRequest> requests = StartReplayRequests(*client, 6);  // all on `doomed`
  StreamWithFault(*client, requests, 30, [&] {
    AddGroup();
    doomed.Freeze();
  });
  ExpectReferenceIds(requests, 1);
  proto::StatsReply stats = WaitIdle(*client);
  EXPECT_EQ(stats.blocks_used, 0u);
  EXPECT_EQ(stats.num_replays, requests.size());
  EXPECT_EQ(stats.num_worker_groups, 1u);
}

// The only group lost: its requests wait (health not ok, stats count them) until a group
// registers, then finish there with the reference tokens.
TEST_F(ServerTest, RequestsWaitForTheNextGroupWhenNoneServes) {
  ServerOptions options = QuickLoss();
  StartServer(options);
  FakeWorkerGroup& doomed = AddGroup();
  auto client = NewClient();
  auto observer = NewClient();
  WaitForGroups(*client, 1);
  std::map<uint64_t, StreamedRequest> requests = StartReplayRequests(*client, 4);
  StreamWithFault(*client, requests, 10, [&] {
    doomed.Freeze();
    WaitForGroups(*observer, 0);
    auto health = observer->Health();
    ASSERT_TRUE(health.ok());
    EXPECT_FALSE(health->ok);
    auto stats = observer->Stats();
    ASSERT_TRUE(stats.ok());
    EXPECT_EQ(stats->num_requests_waiting_for_group, 4u);
    AddGroup();
  });
  ExpectReferenceIds(requests, 1);
  EXPECT_EQ(WaitIdle(*client).blocks_used, 0u);
}

// A group registering again under its routing id (it lost the coordinator and came back): the old
// registration's requests are replayed on the new one, which is not told to shut down.
TEST_F(ServerTest, AGroupRegisteringAgainTakesItsRequestsBack) {
  StartServer();
  FakeWorkerGroupOptions options;
  options.socket.routing_id = "group-a";
  FakeWorkerGroup& before = AddGroup(options);
  auto client = NewClient();
  WaitForGroups(*client, 1);
  std::map<uint64_t, StreamedRequest> requests = StartReplayRequests(*client, 4);
  FakeWorkerGroup* again = nullptr;
  StreamWithFault(*client, requests, 12, [&] {
    before.Freeze();
    again = &AddGroup(options);
  });
  ExpectReferenceIds(requests, 1);
  EXPECT_FALSE(again->got_shutdown());
  EXPECT_EQ(WaitIdle(*client).num_worker_groups, 1u);
}

// Past --max-replays the client gets worker_lost: the group that takes the replays answers their first step
// and then hangs too, so the second loss is one too many. (That group finished the requests first when the
// test froze it from here, once it had seen the replays in the stats, on a loaded machine.)
TEST_F(ServerTest, ReplaysAreBoundedByMaxReplays) {
  ServerOptions options = QuickLoss();
  options.max_replays = 1;
  StartServer(options);
  FakeWorkerGroup& doomed = AddGroup();
  auto client = NewClient();
  WaitForGroups(*client, 1);
  std::map<uint64_t, StreamedRequest> requests = StartReplayRequests(*client, 2);
  FakeWorkerGroupOptions hangs_later;
  hangs_later.freeze_after_steps = 1;
  FakeWorkerGroup* second = nullptr;
  StreamWithFault(*client, requests, 5, [&] {
    second = &AddGroup(hangs_later);
    doomed.Freeze();
  });
  for (const auto& [id, r] : requests) {
    ASSERT_TRUE(r.error.has_value()) << "request " << id;
    EXPECT_EQ(r.error->kind, proto::ErrorKind::kWorkerLost);
  }
  EXPECT_EQ(second->num_steps(), 1);
  const proto::StatsReply stats = WaitIdle(*client);
  EXPECT_EQ(stats.num_replays, 2u);
  EXPECT_EQ(stats.blocks_used, 0u);
}

// A step the group refuses (non-fatal Error with its step id): that request fails with an
// internal error, its blocks are freed, and the group keeps serving.

}  // namespace
}  // namespace tpserve
