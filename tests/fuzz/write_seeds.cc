// Writes the protocol seed corpora (tests/fuzz/corpus/{client_message,worker_message}/) from our
// own encoders: one message of each kind, with realistic fields. The file-format corpora are real
// files (tests/fuzz/make-corpus.sh). Usage: fuzz_write_seeds CORPUS_DIR
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include "comm/client_codec.h"
#include "comm/worker_message.h"

using namespace tpserve;

namespace {

void Write(const std::filesystem::path& dir, const std::string& name, const std::string& bytes) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary) << bytes;
}

proto::GenerateRequest Generate() {
  proto::GenerateRequest g;
  g.prompt_kind = proto::PromptKind::kChat;
  g.chat = {{"system", "Be brief."}, {"user", "What is the capital of France?"}};
  g.sampling.temperature = 0.7f;
  g.sampling.top_k = 40;
  g.sampling.top_p = 0.9f;
  g.sampling.seed = 42;
  g.sampling.has_seed = true;
  g.sampling.logit_bias = {{7, -100.0f}};
  g.sampling.num_logprobs = 2;
  g.max_tokens = 64;
  g.stop = {"\n\n"};
  g.stop_token_ids = {2};
  g.n = 2;
  g.prompt_logprobs = true;
  g.user = "alice";
  return g;
}

void ClientMessages(const std::filesystem::path& dir) {
  proto::ClientMessage m;
  m.request_id = 7;
  m.api_key = "key";
  m.kind = proto::ClientMessageKind::kGenerate;
  m.generate = Generate();
  Write(dir, "generate_chat", proto::EncodeClientMessage(m));
  m.generate.prompt_kind = proto::PromptKind::kTokenIds;
  m.generate.prompt_ids = {1, 504, 2365, 6354, 16438};
  Write(dir, "generate_ids", proto::EncodeClientMessage(m));
  m.generate.beam = {4, 0.5f, EarlyStopping::kNever};
  Write(dir, "generate_beam", proto::EncodeClientMessage(m));
  m.kind = proto::ClientMessageKind::kTokenize;
  m.tokenize.prompt_text = "Hello, world";
  Write(dir, "tokenize", proto::EncodeClientMessage(m));
  m.kind = proto::ClientMessageKind::kDetokenize;
  m.detokenize.token_ids = {504, 2365};
  Write(dir, "detokenize", proto::EncodeClientMessage(m));
  m.kind = proto::ClientMessageKind::kCancel;
  Write(dir, "cancel", proto::EncodeClientMessage(m));

  proto::ServerMessage s;
  s.request_id = 7;
  s.kind = proto::ServerMessageKind::kChunk;
  s.chunk.token_ids = {504, 2365};
  s.chunk.text = " Paris.";
  s.chunk.logprobs = {{-0.1f, {{504, -0.1f}}}, {-0.2f, {{2365, -0.2f}}}};
  Write(dir, "chunk", proto::EncodeServerMessage(s));
  s.kind = proto::ServerMessageKind::kFinish;
  s.finish.usage = {12, 2, 8};
  s.finish.seed = 42;
  s.finish.beam_score = -0.5;
  Write(dir, "finish", proto::EncodeServerMessage(s));
  s.kind = proto::ServerMessageKind::kPromptLogprobs;
  s.prompt_logprobs.token_ids = {1, 504, 2365};
  s.prompt_logprobs.logprobs = {{-3.0f, {}}, {-1.0f, {}}};
  Write(dir, "prompt_logprobs", proto::EncodeServerMessage(s));
  s.kind = proto::ServerMessageKind::kStats;
  s.stats.blocks_total = 100;
  Write(dir, "stats", proto::EncodeServerMessage(s));
}

void WorkerMessages(const std::filesystem::path& dir) {
  HelloMessage hello;
  hello.model.file_size = 1000;
  hello.model.sha256 = std::string(32, 'x');
  hello.tp_size = 2;
  hello.num_blocks = 256;
  hello.block_size = 16;
  hello.max_model_len = 8192;
  hello.vocab_size = 49152;
  hello.hostname = "node0";
  Write(dir, "hello", EncodeWorkerMessage(WorkerMessage(hello)));
  hello.draft_model = ModelFingerprint{500, std::string(32, 'd')};
  Write(dir, "hello_draft_model", EncodeWorkerMessage(WorkerMessage(hello)));
  StepPlan plan;
  plan.step_id = 3;
  SequencePlan seq;
  seq.seq_id = 1;
  seq.num_cached = 16;
  seq.token_ids = {504, 2365, 6354};
  seq.block_table = {0, 1};
  seq.needs_token = true;
  seq.sampling.temperature = 0.8f;
  seq.sampling.num_logprobs = 2;
  seq.penalty_tokens = {504};
  plan.sequences = {seq, seq};
  plan.sequences[1].seq_id = 2;
  plan.block_copies = {{0, 5}};
  Write(dir, "step_plan_message", EncodeWorkerMessage(WorkerMessage(plan)));
  Write(dir, "step_plan", EncodeStepPlan(plan));
  StepResult result;
  result.step_id = 3;
  result.sequences = {{1, 504, -0.5f, {{504, -0.5f}, {7, -2.0f}}, {}}};
  Write(dir, "step_result", EncodeStepResult(result));
  // Speculation by a draft model: catch-up and proposals asked for, and the proposals coming back.
  plan.sequences[0].draft_model = true;
  plan.sequences[0].draft_catch_up = {17, 18, 19};
  plan.sequences[0].num_proposals = 4;
  plan.sequences[1].token_ids = {504, 2365};
  plan.sequences[1].num_draft_tokens = 1;
  Write(dir, "step_plan_draft_model", EncodeWorkerMessage(WorkerMessage(plan)));
  result.proposals = {{1, {504, 7, 7, 9}}};
  Write(dir, "step_result_proposals", EncodeWorkerMessage(WorkerMessage(result)));
  Write(dir, "heartbeat", EncodeWorkerMessage(WorkerMessage(HeartbeatMessage{5, 1700000000000000, false})));
  Write(dir, "error", EncodeWorkerMessage(WorkerMessage(ErrorMessage{StatusCode::kInternal, "boom", 3, true})));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: fuzz_write_seeds CORPUS_DIR\n";
    return 2;
  }
  const std::filesystem::path root = argv[1];
  ClientMessages(root / "client_message");
  WorkerMessages(root / "worker_message");
  return 0;
}
