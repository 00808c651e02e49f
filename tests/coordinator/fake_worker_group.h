// FakeWorkerGroup: a worker-group leader on a thread, speaking the real coordinator↔leader
// protocol (comm/worker_message.h) over ZeroMQ, with a fake "model" whose KV cache is paged like
// the real one: each plan's tokens are written into the slots its block table names, and a
// sequence's next token is FakeNextToken(all tokens at positions 0..p read back through the
// block table); prompt logprobs likewise (tests/coordinator/fake_prompt_logprobs.h). So a wrong
// block table, a bad prefix-cache hit or a missed copy-on-write changes the output, and FakeReference (no paging at all) is an independent reference for what a
// request must produce.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "comm/worker_message.h"
#include "comm/zmq_transport.h"
#include "tests/coordinator/fake_prompt_logprobs.h"

namespace tpserve::testing {

// Deterministic next token of a sequence: a hash of all its tokens, mixed with the seed and the
// sample index when sampling (temperature > 0), as a real seeded sampler depends on them.
inline int32_t FakeNextToken(const std::vector<int32_t>& tokens, const SamplingParams& sampling,
                             uint32_t sample_index, int32_t vocab_size) {
  uint64_t h = 1469598103934665603ull;
  for (int32_t t : tokens) h = (h ^ static_cast<uint32_t>(t)) * 1099511628211ull;
  if (!sampling.is_greedy()) {
    h ^= (sampling.seed + 0x9e3779b97f4a7c15ull * (sample_index + 1));
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
  }
  return static_cast<int32_t>(h % static_cast<uint64_t>(vocab_size));
}

// What a request (prompt, greedy or seeded) must produce: tokens until EOS (included) or max.
inline std::vector<int32_t> FakeReference(std::vector<int32_t> tokens, const SamplingParams& sampling,
                                          int32_t max_tokens, int32_t eos_id, int32_t vocab_size) {
  std::vector<int32_t> out;
  for (int32_t i = 0; i < max_tokens; ++i) {
    int32_t t = FakeNextToken(tokens, sampling, static_cast<uint32_t>(i), vocab_size);
    out.push_back(t);
    tokens.push_back(t);
    if (t == eos_id) break;
  }
  return out;
}

struct FakeWorkerGroupOptions {
  int32_t num_blocks = 256;
  int32_t block_size = 16;
  int32_t max_model_len = 1024;
  int32_t vocab_size = 64;
  int32_t poison_token = -1;  // a plan carrying this token id is refused with a non-fatal Error
  bool crash_on_first_step = false;  // close the connection instead of answering the first plan
  int64_t freeze_after_steps = -1;    // >= 0: answer that many plans, then Freeze (a group that hangs later)
  SocketOptions socket;               // e.g. CURVE client keys
};

class FakeWorkerGroup {
 public:
  FakeWorkerGroup(const std::string& endpoint, const FakeWorkerGroupOptions& options)
      : options_(options),
        pool_(static_cast<size_t>(options.num_blocks) * options.block_size, -1),
        thread_([this, endpoint] { Serve(endpoint); }) {}
  ~FakeWorkerGroup() {
    stop_.store(true);
    thread_.join();
  }

  // Stops answering steps and heartbeats (a hung group), without closing the connection.
  void Freeze() { frozen_.store(true); }
  bool got_shutdown() const { return got_shutdown_.load(); }
  int64_t num_steps() const { return num_steps_.load(); }
  // Waits (bounded) for the thread to see a Shutdown; true if it did.
  bool WaitShutdown(std::chrono::milliseconds timeout) const {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!got_shutdown_.load() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));  // polling a flag, bounded
    }
    return got_shutdown_.load();
  }

 private:
  int32_t& Slot(const SequencePlan& seq, int32_t pos) {
    int32_t block = seq.block_table.at(static_cast<size_t>(pos / options_.block_size));
    return pool_.at(static_cast<size_t>(block) * options_.block_size + pos % options_.block_size);
  }

  bool IsPoisoned(const StepPlan& plan) const {
    for (const SequencePlan& seq : plan.sequences) {
      for (int32_t t : seq.token_ids) {
        if (t == options_.poison_token) return true;
      }
    }
    return false;
  }

  StepResult Execute(const StepPlan& plan) {
    for (const auto& [src, dst] : plan.block_copies) {
      for (int32_t i = 0; i < options_.block_size; ++i) {
        pool_.at(static_cast<size_t>(dst) * options_.block_size + i) =
            pool_.at(static_cast<size_t>(src) * options_.block_size + i);
      }
    }
    StepResult result;
    result.step_id = plan.step_id;
    for (const SequencePlan& seq : plan.sequences) {
      for (size_t i = 0; i < seq.token_ids.size(); ++i) Slot(seq, seq.num_cached + static_cast<int32_t>(i)) = seq.token_ids[i];
      if (seq.prompt_logprobs) {
        result.prompt_logprobs.push_back(FakeScoreChunk(seq, [&](int32_t pos) { return Slot(seq, pos); }));
      }
      if (!seq.needs_token) continue;
      const int32_t num_tokens = seq.num_cached + static_cast<int32_t>(seq.token_ids.size());
      std::vector<int32_t> tokens(static_cast<size_t>(num_tokens));
      for (int32_t p = 0; p < num_tokens; ++p) tokens[p] = Slot(seq, p);
      // One row per sampled position: the last 1 + num_draft_tokens, each seeing the tokens up to it.
      for (int32_t j = 0; j <= seq.num_draft_tokens; ++j) {
        const std::vector<int32_t> seen(tokens.begin(), tokens.end() - (seq.num_draft_tokens - j));
        SequenceResult r;
        r.seq_id = seq.seq_id;
        r.token_id = FakeNextToken(seen, seq.sampling, seq.sample_index + static_cast<uint32_t>(j), options_.vocab_size);
        r.logprob = -0.5f;
        r.top_logprobs = FakeTopLogprobs(seq.sampling.num_logprobs);
        result.sequences.push_back(std::move(r));
      }
    }
    ++num_steps_;
    return result;
  }

  void Serve(const std::string& endpoint) {
    zmq::context_t context(1);
    auto socket = ZmqSocket::Connect(context, zmq::socket_type::dealer, endpoint, options_.socket);
    if (!socket.ok()) return;
    HelloMessage hello;
    hello.tp_size = 1;
    hello.num_blocks = options_.num_blocks;
    hello.block_size = options_.block_size;
    hello.max_model_len = options_.max_model_len;
    hello.vocab_size = options_.vocab_size;
    hello.hostname = "fake";
    if (!(*socket)->Send({EncodeWorkerMessage(hello)}, std::chrono::milliseconds(1000)).ok()) return;
    while (!stop_.load()) {
      StatusOr<Frames> frames = (*socket)->Receive(std::chrono::milliseconds(10));
      if (!frames.ok() || frames->empty() || frozen_.load()) continue;
      StatusOr<WorkerMessage> message = DecodeWorkerMessage(frames->back());
      if (!message.ok()) continue;
      if (auto* plan = std::get_if<StepPlan>(&*message)) {
        if (options_.crash_on_first_step) return;  // the socket closes: the connection drops
        if (IsPoisoned(*plan)) {
          ErrorMessage error;
          error.code = StatusCode::kInvalidArgument;
          error.message = "poisoned plan";
          error.step_id = plan->step_id;
          (void)(*socket)->Send({EncodeWorkerMessage(error)}, std::chrono::milliseconds(1000));
          continue;
        }
        (void)(*socket)->Send({EncodeWorkerMessage(Execute(*plan))}, std::chrono::milliseconds(1000));
        if (num_steps_.load() == options_.freeze_after_steps) Freeze();
      } else if (auto* heartbeat = std::get_if<HeartbeatMessage>(&*message)) {
        HeartbeatMessage echo = *heartbeat;
        echo.is_echo = true;
        (void)(*socket)->Send({EncodeWorkerMessage(echo)}, std::chrono::milliseconds(1000));
      } else if (std::holds_alternative<ShutdownMessage>(*message)) {
        got_shutdown_.store(true);
        return;
      }
    }
  }

  FakeWorkerGroupOptions options_;
  std::vector<int32_t> pool_;  // [num_blocks * block_size] token id held by each KV slot
  std::atomic<bool> stop_{false};
  std::atomic<bool> frozen_{false};
  std::atomic<bool> got_shutdown_{false};
  std::atomic<int64_t> num_steps_{0};
  std::thread thread_;  // last: starts after the members it uses
};

}  // namespace tpserve::testing
