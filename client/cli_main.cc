// tpserve: the command-line client, and `tpserve serve` (coordinator + one local worker group).
//
//   tpserve generate [--server tcp://127.0.0.1:5555] (--prompt T | --prompt-ids 1,2,3 | --chat T)
//       [--max-tokens N] [--temperature T] [--top-k K] [--top-p P] [--min-p P] [--seed S]
//       [--repetition-penalty R] [--stop S]... [--ignore-eos] [--n N] [--logprobs N] [--no-stream]
//       [--print-ids] [--json] [--prompt-logprobs] [--api-key K]
//   tpserve chat   [--server E] [--system S] [--max-tokens N] [--temperature T] [--seed S]
//   tpserve batch  [--server E] (--prompt T)... [--chat] [--max-tokens N] [...generate flags]
//       all prompts as concurrent requests on one connection; prints each answer and throughput
//   tpserve health [--server E]          tpserve stats [--server E]
//   tpserve serve  --model M [--tp N] [--port 5555] [--worker-port 5556] [--threads N] [--kv-mb MB]
//
// generate: text streams to stdout as it is final; --print-ids prints the generated ids
// space-separated on one line (the output of `tpserve-run --print-ids`); --json prints one JSON
// object per sample. --prompt-logprobs then prints the logprob of every prompt token after the
// first (and its top --logprobs alternatives), one line each ("prompt I ID LOGPROB [ID:LOGPROB]..."),
// or with --json one object {"prompt_logprobs":[{"token_id","logprob","top"}...]}. Exit code 1 and
// the typed error on stderr when the server refuses. `tpserve keys ...`: client/keys_command.h.
// The API key is --api-key, else $TPSERVE_API_KEY (as for the Python client).
// Without --seed the server draws a fresh seed per request; each sample's summary line on stderr
// and its JSON object ("seed") report it, and --seed with that value replays the request.
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <chrono>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "client/client.h"
#include "client/keys_command.h"
#include "client/serve_command.h"
#include "common/command_line.h"

namespace tpserve {
namespace {

struct CliFlags {
  ClientOptions client;
  proto::GenerateRequest request;
  std::vector<std::string> prompts;  // every --prompt (generate: the last; batch: each its own request)
  std::vector<std::string> chat;     // every --chat: user turns
  std::vector<int32_t> prompt_ids;
  std::string system;
  bool print_ids = false;
  bool json = false;
  bool as_chat = false;
  bool no_stream = false;
};

// --server and --api-key (default $TPSERVE_API_KEY, which keeps the key out of `ps` listings).
void AddConnectionFlags(CLI::App* command, CliFlags& f) {
  command->add_option("--server", f.client.server, "the coordinator's client endpoint")->capture_default_str();
  command->add_option("--api-key", f.client.api_key, "the key, when the server requires one")->envname("TPSERVE_API_KEY");
  command->add_option("--keys", f.client.keys_dir, "CURVE key directory (`tpserve keys init`)");
  command->add_option("--key-name", f.client.key_name, "CURVE: this client's key name");
  command->add_option_function<double>(
             "--timeout-s",
             [&f](double seconds) { f.client.timeout = std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)); },
             "a reply's longest wait (default 60)")
      ->check(Interval(0, 1e9, false, true));
}

// The request flags of generate, chat and batch (the server checks their ranges).
void AddRequestFlags(CLI::App* command, CliFlags& f) {
  proto::GenerateRequest& r = f.request;
  command->add_option("--prompt", f.prompts, "prompt text (batch: repeat it, one request each)");
  command->add_option("--chat", f.chat, "a user turn, rendered in the model's chat format (repeatable)");
  command->add_option("--prompt-ids", f.prompt_ids, "prompt as token ids: 1,2,3")->delimiter(',');
  command->add_option("--system", f.system, "system message of a chat");
  command->add_option("--max-tokens", r.max_tokens, "tokens to generate")->capture_default_str();
  command->add_option("--temperature", r.sampling.temperature, "0: greedy");
  command->add_option("--top-k", r.sampling.top_k, "0: off");
  command->add_option("--top-p", r.sampling.top_p, "1: off");
  command->add_option("--min-p", r.sampling.min_p, "0: off");
  command->add_option("--repetition-penalty", r.sampling.repetition_penalty, "1: off");
  command->add_option("--presence-penalty", r.sampling.presence_penalty, "0: off");
  command->add_option("--frequency-penalty", r.sampling.frequency_penalty, "0: off");
  command->add_option("--seed", r.sampling.seed, "sampling seed (default: drawn by the server and reported)")
      ->each([&r](const std::string&) { r.sampling.has_seed = true; });
  command->add_option("--stop", r.stop, "stop string (repeatable)");
  command->add_flag("--ignore-eos", r.ignore_eos, "keep going past EOS");
  command->add_option("--n", r.n, "samples of the prompt");
  command->add_option("--logprobs", r.sampling.num_logprobs, "top-N logprobs per token");
  command->add_flag("--no-stream", f.no_stream, "one chunk at the end instead of streaming");
  command->add_flag("--print-ids", f.print_ids, "print the generated ids space-separated on one line");
  command->add_flag("--json", f.json, "print one JSON object per sample");
  command->add_flag("--as-chat", f.as_chat, "batch: send each --prompt as a chat user turn");
  command->add_flag("--prompt-logprobs", r.prompt_logprobs, "also print every prompt token's logprob");
  command->add_option_function<std::string>(
      "--speculative",
      [&r](const std::string& text) {
        StatusOr<proto::SpeculativeRequest> parsed = proto::ParseSpeculativeRequest(text);
        if (!parsed.ok()) throw CLI::ValidationError("--speculative", parsed.status().message());
        r.speculative = *parsed;
      },
      "speculative decoding: off, ngram:K or draft:K (default: the server's); the tokens are the same either way");
  command->add_option("--beam-width", r.beam.width, "beam search with this many hypotheses (returns --n of them)")
      ->check(CLI::Range(0, kMaxBeamWidth));
  command->add_option("--length-penalty", r.beam.length_penalty, "beam search: score = logprob / length^penalty")
      ->capture_default_str();
  command->add_option("--early-stopping", r.beam.early_stopping, "beam search: false, true or never")
      ->transform(CLI::CheckedTransformer(std::map<std::string, EarlyStopping>{
          {"false", EarlyStopping::kHeuristic}, {"true", EarlyStopping::kWhenFull}, {"never", EarlyStopping::kNever}}));
}

// The prompt of a generate request from --prompt, --chat or --prompt-ids; false when none was given.
bool SetPrompt(CliFlags& f) {
  proto::GenerateRequest& r = f.request;
  if (!f.chat.empty()) {
    r.prompt_kind = proto::PromptKind::kChat;
    for (const std::string& text : f.chat) r.chat.push_back({"user", text});
  } else if (!f.prompt_ids.empty()) {
    r.prompt_kind = proto::PromptKind::kTokenIds;
    r.prompt_ids = f.prompt_ids;
  } else if (!f.prompts.empty()) {
    r.prompt_kind = proto::PromptKind::kText;
    r.prompt_text = f.prompts.back();
  } else {
    return false;
  }
  return true;
}

std::string SampleJson(size_t sample, const GenerateResult& result, bool beam) {
  const proto::Finish& finish = result.finish[sample];
  nlohmann::ordered_json j;
  j["sample"] = sample;
  j["text"] = result.text[sample];
  j["token_ids"] = result.token_ids[sample];
  j["finish_reason"] = proto::FinishReasonName(finish.reason);
  j["usage"] = {{"prompt_tokens", finish.usage.prompt_tokens},
                {"completion_tokens", finish.usage.completion_tokens},
                {"cached_prompt_tokens", finish.usage.cached_prompt_tokens}};
  j["ttft_ms"] = finish.ttft_ms;
  j["tpot_ms"] = finish.tpot_ms;
  j["seed"] = finish.seed;
  j["speculative"] = {{"draft_tokens", finish.num_draft_tokens}, {"accepted_tokens", finish.num_accepted_tokens}};
  if (beam) j["beam"] = {{"score", finish.beam_score}, {"cumulative_logprob", finish.cumulative_logprob}};
  return j.dump(-1, ' ', /*ensure_ascii=*/false, nlohmann::ordered_json::error_handler_t::replace);
}

int Fail(const Status& status) {
  std::cerr << "tpserve: " << status.ToString() << "\n";
  return 1;
}

// The prompt's tokens and the logprob of each after the first (see the file comment for the format).
void PrintPromptLogprobs(const proto::PromptLogprobs& prompt, bool json) {
  const std::streamsize precision = std::cout.precision(9);  // a float's bits survive the round trip
  if (json) std::cout << "{\"prompt_logprobs\":[";
  for (size_t i = 0; i < prompt.token_ids.size(); ++i) {
    const proto::TokenLogprobs* lp = i == 0 || i > prompt.logprobs.size() ? nullptr : &prompt.logprobs[i - 1];
    if (json) {
      std::cout << (i ? "," : "") << "{\"token_id\":" << prompt.token_ids[i] << ",\"logprob\":";
      if (lp == nullptr) {
        std::cout << "null,\"top\":[]}";
        continue;
      }
      std::cout << lp->logprob << ",\"top\":[";
      for (size_t k = 0; k < lp->top.size(); ++k) {
        std::cout << (k ? "," : "") << "{\"token_id\":" << lp->top[k].token_id << ",\"logprob\":" << lp->top[k].logprob
                  << "}";
      }
      std::cout << "]}";
    } else {
      std::cout << "prompt " << i << " " << prompt.token_ids[i] << " ";
      if (lp == nullptr) {
        std::cout << "-\n";
        continue;
      }
      std::cout << lp->logprob;
      for (const TokenLogprob& t : lp->top) std::cout << " " << t.token_id << ":" << t.logprob;
      std::cout << "\n";
    }
  }
  std::cout << (json ? "]}\n" : "") << std::flush;
  std::cout.precision(precision);
}

int Generate(CliFlags& flags) {
  if (!SetPrompt(flags)) {
    std::cerr << "tpserve generate: one of --prompt, --prompt-ids, --chat is required\nRun with --help for the flags.\n";
    return 2;
  }
  proto::GenerateRequest request = flags.request;
  if (request.prompt_kind == proto::PromptKind::kChat && !flags.system.empty()) {
    request.chat.insert(request.chat.begin(), proto::ChatMessage{"system", flags.system});
  }
  StatusOr<std::unique_ptr<Client>> client = Client::Connect(flags.client);
  if (!client.ok()) return Fail(client.status());
  const bool stream_text = !flags.print_ids && !flags.json && flags.request.n <= 1;
  auto on_chunk = [&](const proto::TokenChunk& chunk) {
    if (stream_text) std::cout << chunk.text << std::flush;
    return true;
  };
  StatusOr<GenerateResult> result = (*client)->Generate(request, on_chunk);
  if (!result.ok()) {
    if (stream_text) std::cout << "\n";
    return Fail(result.status());
  }
  for (size_t s = 0; s < result->token_ids.size(); ++s) {
    const proto::Finish& finish = result->finish[s];
    if (flags.json) {
      std::cout << SampleJson(s, *result, request.beam.enabled()) << std::endl;
    } else if (flags.print_ids) {
      for (size_t i = 0; i < result->token_ids[s].size(); ++i) std::cout << (i ? " " : "") << result->token_ids[s][i];
      std::cout << std::endl;
    } else if (stream_text) {
      std::cout << std::endl;
    } else {
      std::cout << result->text[s] << std::endl;
    }
    std::fprintf(stderr, "[%s] %u prompt tokens (%u cached), %u generated; TTFT %.1f ms, TPOT %.1f ms; seed %llu\n",
                 proto::FinishReasonName(finish.reason), finish.usage.prompt_tokens,
                 finish.usage.cached_prompt_tokens, finish.usage.completion_tokens, finish.ttft_ms, finish.tpot_ms,
                 static_cast<unsigned long long>(finish.seed));
  }
  if (result->has_prompt_logprobs) PrintPromptLogprobs(result->prompt_logprobs, flags.json);
  return 0;
}

int Chat(const CliFlags& flags) {
  StatusOr<std::unique_ptr<Client>> client = Client::Connect(flags.client);
  if (!client.ok()) return Fail(client.status());
  std::vector<proto::ChatMessage> messages;
  if (!flags.system.empty()) messages.push_back({"system", flags.system});
  const bool is_tty = isatty(STDIN_FILENO);
  std::string line;
  while (true) {
    if (is_tty) std::cout << "> " << std::flush;
    if (!std::getline(std::cin, line)) break;
    if (line.empty()) continue;
    if (line == "/quit" || line == "/exit") break;
    messages.push_back({"user", line});
    proto::GenerateRequest request = flags.request;
    request.prompt_kind = proto::PromptKind::kChat;
    request.chat = messages;
    StatusOr<GenerateResult> result = (*client)->Generate(request, [](const proto::TokenChunk& chunk) {
      std::cout << chunk.text << std::flush;
      return true;
    });
    std::cout << "\n";
    if (!result.ok()) return Fail(result.status());
    messages.push_back({"assistant", result->text[0]});
  }
  return 0;
}

// Every prompt as its own request, all in flight at once on one connection.
int Batch(const CliFlags& flags) {
  if (flags.prompts.empty()) {
    std::cerr << "tpserve batch: give at least one --prompt\nRun with --help for the flags.\n";
    return 2;
  }
  StatusOr<std::unique_ptr<Client>> client = Client::Connect(flags.client);
  if (!client.ok()) return Fail(client.status());
  const auto start = std::chrono::steady_clock::now();
  std::map<uint64_t, size_t> index_of;
  for (size_t i = 0; i < flags.prompts.size(); ++i) {
    proto::GenerateRequest request = flags.request;
    request.n = 1;
    if (flags.as_chat) {
      request.prompt_kind = proto::PromptKind::kChat;
      request.chat.clear();
      if (!flags.system.empty()) request.chat.push_back({"system", flags.system});
      request.chat.push_back({"user", flags.prompts[i]});
    } else {
      request.prompt_kind = proto::PromptKind::kText;
      request.prompt_text = flags.prompts[i];
    }
    StatusOr<uint64_t> id = (*client)->Start(request);
    if (!id.ok()) return Fail(id.status());
    index_of[*id] = i;
  }
  std::vector<std::string> text(flags.prompts.size());
  std::vector<proto::Finish> finish(flags.prompts.size());
  size_t num_done = 0;
  int exit_code = 0;
  while (num_done < flags.prompts.size()) {
    StatusOr<proto::ServerMessage> m = (*client)->Receive(flags.client.timeout);
    if (!m.ok()) return Fail(m.status());
    auto it = index_of.find(m->request_id);
    if (it == index_of.end()) continue;
    if (m->kind == proto::ServerMessageKind::kChunk) {
      text[it->second] += m->chunk.text;
    } else if (m->kind == proto::ServerMessageKind::kFinish) {
      finish[it->second] = m->finish;
      ++num_done;
    } else if (m->kind == proto::ServerMessageKind::kError) {
      std::cerr << "request " << it->second << ": " << StatusFromError(m->error).ToString() << "\n";
      exit_code = 1;
      ++num_done;
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  uint64_t num_tokens = 0;
  double ttft_sum = 0, tpot_sum = 0;
  for (size_t i = 0; i < flags.prompts.size(); ++i) {
    num_tokens += finish[i].usage.completion_tokens;
    ttft_sum += finish[i].ttft_ms;
    tpot_sum += finish[i].tpot_ms;
    std::string oneline = text[i];
    for (char& c : oneline) c = (c == '\n') ? ' ' : c;
    std::cout << "[" << i << "] " << flags.prompts[i] << " →" << oneline << "\n";
  }
  const double n = static_cast<double>(flags.prompts.size());
  std::printf("batch: %zu concurrent requests, %llu tokens in %.2f s: %.1f tokens/s; mean TTFT %.1f ms, mean TPOT %.1f ms\n",
              flags.prompts.size(), static_cast<unsigned long long>(num_tokens), seconds, num_tokens / seconds,
              ttft_sum / n, tpot_sum / n);
  return exit_code;
}

int Health(const CliFlags& flags) {
  StatusOr<std::unique_ptr<Client>> client = Client::Connect(flags.client);
  if (!client.ok()) return Fail(client.status());
  StatusOr<proto::HealthReply> h = (*client)->Health();
  if (!h.ok()) return Fail(h.status());
  std::cout << "ok: " << (h->ok ? "true" : "false") << "\nmodel: " << h->model_name
            << "\nworker_groups: " << h->num_worker_groups << "\ndraining: " << (h->draining ? "true" : "false")
            << "\nvocab_size: " << h->vocab_size << "\ncontext_length: " << h->context_length
            << "\nkv_tokens: " << h->kv_tokens << "\nkv_dtype: " << h->kv_dtype << "\n";
  return h->ok ? 0 : 1;
}

int Stats(const CliFlags& flags) {
  StatusOr<std::unique_ptr<Client>> client = Client::Connect(flags.client);
  if (!client.ok()) return Fail(client.status());
  StatusOr<proto::StatsReply> s = (*client)->Stats();
  if (!s.ok()) return Fail(s.status());
  std::cout << "waiting: " << s->num_waiting << "\nrunning: " << s->num_running << "\nblocks_used: " << s->blocks_used
            << "\nblocks_free: " << s->blocks_free << "\nblocks_cached: " << s->blocks_cached
            << "\nblocks_total: " << s->blocks_total << "\nprefix_hit_rate: " << s->prefix_hit_rate
            << "\nkv_waste: " << s->kv_waste << "\ntokens_per_second: " << s->tokens_per_second
            << "\nrequests_total: " << s->num_requests_total << "\nrequests_finished: " << s->num_requests_finished
            << "\nrequests_rejected: " << s->num_requests_rejected
            << "\nmessages_dropped: " << s->num_messages_dropped << "\nworker_groups: " << s->num_worker_groups
            << "\nsteps: " << s->num_steps_total << "\ngenerated_tokens: " << s->num_generated_tokens
            << "\npreemptions: " << s->num_preemptions << "\nreplays: " << s->num_replays
            << "\nwaiting_for_group: " << s->num_requests_waiting_for_group
            << "\nspec_draft_tokens: " << s->num_draft_tokens << "\nspec_accepted_tokens: " << s->num_accepted_tokens
            << "\nspec_verify_steps: " << s->num_verify_steps << "\n";
  return 0;
}

int Main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "serve") return RunServeCommand(argc, argv);  // flags of its own
  if (argc >= 2 && std::string(argv[1]) == "keys") return RunKeysCommand(argc, argv);
  CommandLine app("tpserve: the command-line client of a tpserve coordinator, and `tpserve serve` (coordinator + "
                  "one local worker group; tpserve serve --help).",
                  "tpserve");
  app.require_subcommand(1);
  CliFlags flags;
  flags.request.max_tokens = 64;
  CLI::App* generate = app.add_subcommand("generate", "one request: text streams to stdout as it is final; exit 1 "
                                          "and the typed error on stderr when the server refuses");
  CLI::App* chat = app.add_subcommand("chat", "an interactive chat in the model's chat format (/quit ends it)");
  CLI::App* batch = app.add_subcommand("batch", "every --prompt as a concurrent request on one connection; prints "
                                       "each answer and the throughput");
  CLI::App* health = app.add_subcommand("health", "the server's health (exit 0 when a worker group serves)");
  CLI::App* stats = app.add_subcommand("stats", "the server's counters");
  app.add_subcommand("serve", "coordinator + `mpirun -np TP tpserve-worker` on this host (see tpserve serve --help)");
  app.add_subcommand("keys", "CURVE keys: tpserve keys init DIR | add-client DIR NAME | add-worker DIR NAME");
  for (CLI::App* command : {generate, chat, batch, health, stats}) AddConnectionFlags(command, flags);
  for (CLI::App* command : {generate, chat, batch}) AddRequestFlags(command, flags);
  if (std::optional<int> exit_code = app.ParseOrExitCode(argc, argv)) return *exit_code;
  flags.request.stream = !flags.no_stream;
  if (generate->parsed()) return Generate(flags);
  if (chat->parsed()) return Chat(flags);
  if (batch->parsed()) return Batch(flags);
  if (health->parsed()) return Health(flags);
  return Stats(flags);
}

}  // namespace
}  // namespace tpserve

int main(int argc, char** argv) { return tpserve::Main(argc, argv); }
