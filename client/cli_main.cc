// tpserve: the command-line client, and `tpserve serve` (coordinator + one local worker group).
//
//   tpserve generate [--server tcp://127.0.0.1:5555] (--prompt T | --prompt-ids 1,2,3 | --chat T)
//       [--max-tokens N] [--temperature T] [--top-k K] [--top-p P] [--min-p P] [--seed S]
//       [--repetition-penalty R] [--stop S]... [--ignore-eos] [--n N] [--logprobs N] [--no-stream]
//       [--print-ids] [--json] [--api-key K]
//   tpserve chat   [--server E] [--system S] [--max-tokens N] [--temperature T] [--seed S]
//   tpserve batch  [--server E] (--prompt T)... [--chat] [--max-tokens N] [...generate flags]
//       all prompts as concurrent requests on one connection; prints each answer and throughput
//   tpserve health [--server E]          tpserve stats [--server E]
//   tpserve serve  --model M [--tp N] [--port 5555] [--worker-port 5556] [--threads N] [--kv-mb MB]
//
// generate: text streams to stdout as it is final; --print-ids prints the generated ids
// space-separated on one line (the output of `tpserve-run --print-ids`); --json prints one JSON
// object per sample. Exit code 1 and the typed error on stderr when the server refuses.
// The API key is --api-key, else $TPSERVE_API_KEY (as for the Python client).
// Without --seed the server draws a fresh seed per request; each sample's summary line on stderr
// and its JSON object ("seed") report it, and --seed with that value replays the request.
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "client/client.h"
#include "client/serve_command.h"

namespace tpserve {
namespace {

struct CliFlags {
  ClientOptions client;
  proto::GenerateRequest request;
  bool has_prompt = false;
  bool print_ids = false;
  bool json = false;
  bool as_chat = false;
  std::string system;
  std::vector<std::string> prompts;  // every --prompt (batch)
};

const char kUsage[] =
    "usage: tpserve generate [--server E] (--prompt T | --prompt-ids 1,2 | --chat T) [--max-tokens N]\n"
    "                        [--temperature T] [--top-k K] [--top-p P] [--min-p P] [--seed S]\n"
    "                        [--repetition-penalty R] [--presence-penalty P] [--frequency-penalty P]\n"
    "                        [--stop S]... [--ignore-eos] [--n N] [--logprobs N] [--no-stream]\n"
    "                        [--system S] [--print-ids] [--json] [--api-key K]\n"
    "       tpserve batch [--server E] (--prompt T)... [--as-chat] [--max-tokens N] [generate flags]\n"
    "       tpserve chat [--server E] [--system S] [--max-tokens N] [--temperature T] [--seed S]\n"
    "       tpserve health [--server E]\n"
    "       tpserve stats [--server E]\n"
    "       tpserve serve --model M [--tp N] [--port P] [--worker-port P] [--threads N] [--kv-mb MB]\n";

StatusOr<double> ParseNumber(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0') return InvalidArgument(flag + ": not a number: " + text);
  return v;
}

StatusOr<std::vector<int32_t>> ParseIds(const std::string& text) {
  std::vector<int32_t> ids;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 0 || v > INT32_MAX) return InvalidArgument("bad token id: " + item);
    ids.push_back(static_cast<int32_t>(v));
  }
  return ids;
}

StatusOr<CliFlags> ParseCliFlags(int argc, char** argv, int first) {
  CliFlags f;
  f.request.max_tokens = 64;
  // The key may come from the environment, out of `ps` listings; --api-key overrides it.
  if (const char* key = std::getenv("TPSERVE_API_KEY")) f.client.api_key = key;
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> StatusOr<std::string> {
      if (i + 1 >= argc) return InvalidArgument(arg + " needs a value");
      return std::string(argv[++i]);
    };
    auto number = [&]() -> StatusOr<double> {
      ASSIGN_OR_RETURN(std::string v, value());
      return ParseNumber(arg, v);
    };
    if (arg == "--server") {
      ASSIGN_OR_RETURN(f.client.server, value());
    } else if (arg == "--api-key") {
      ASSIGN_OR_RETURN(f.client.api_key, value());
    } else if (arg == "--prompt") {
      f.request.prompt_kind = proto::PromptKind::kText;
      ASSIGN_OR_RETURN(f.request.prompt_text, value());
      f.prompts.push_back(f.request.prompt_text);
      f.has_prompt = true;
    } else if (arg == "--chat") {
      f.request.prompt_kind = proto::PromptKind::kChat;
      ASSIGN_OR_RETURN(std::string text, value());
      f.request.chat.push_back({"user", text});
      f.has_prompt = true;
    } else if (arg == "--prompt-ids") {
      f.request.prompt_kind = proto::PromptKind::kTokenIds;
      ASSIGN_OR_RETURN(std::string text, value());
      ASSIGN_OR_RETURN(f.request.prompt_ids, ParseIds(text));
      f.has_prompt = true;
    } else if (arg == "--system") {
      ASSIGN_OR_RETURN(f.system, value());
    } else if (arg == "--max-tokens") {
      ASSIGN_OR_RETURN(double v, number());
      f.request.max_tokens = static_cast<uint32_t>(v);
    } else if (arg == "--temperature") {
      ASSIGN_OR_RETURN(double v, number());
      f.request.sampling.temperature = static_cast<float>(v);
    } else if (arg == "--top-k") {
      ASSIGN_OR_RETURN(double v, number());
      f.request.sampling.top_k = static_cast<int32_t>(v);
    } else if (arg == "--top-p") {
      ASSIGN_OR_RETURN(double v, number());
      f.request.sampling.top_p = static_cast<float>(v);
    } else if (arg == "--min-p") {
      ASSIGN_OR_RETURN(double v, number());
      f.request.sampling.min_p = static_cast<float>(v);
    } else if (arg == "--repetition-penalty") {
      ASSIGN_OR_RETURN(double v, number());
      f.request.sampling.repetition_penalty = static_cast<float>(v);
    } else if (arg == "--presence-penalty") {
      ASSIGN_OR_RETURN(double v, number());
      f.request.sampling.presence_penalty = static_cast<float>(v);
    } else if (arg == "--frequency-penalty") {
      ASSIGN_OR_RETURN(double v, number());
      f.request.sampling.frequency_penalty = static_cast<float>(v);
    } else if (arg == "--seed") {
      ASSIGN_OR_RETURN(std::string v, value());
      f.request.sampling.seed = std::strtoull(v.c_str(), nullptr, 10);
      f.request.sampling.has_seed = true;
    } else if (arg == "--stop") {
      ASSIGN_OR_RETURN(std::string v, value());
      f.request.stop.push_back(v);
    } else if (arg == "--ignore-eos") {
      f.request.ignore_eos = true;
    } else if (arg == "--n") {
      ASSIGN_OR_RETURN(double v, number());
      f.request.n = static_cast<uint32_t>(v);
    } else if (arg == "--logprobs") {
      ASSIGN_OR_RETURN(double v, number());
      f.request.sampling.num_logprobs = static_cast<int32_t>(v);
    } else if (arg == "--no-stream") {
      f.request.stream = false;
    } else if (arg == "--print-ids") {
      f.print_ids = true;
    } else if (arg == "--json") {
      f.json = true;
    } else if (arg == "--as-chat") {
      f.as_chat = true;
    } else {
      return InvalidArgument("unknown flag " + arg);
    }
  }
  return f;
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

int Fail(const Status& status) {
  std::cerr << "tpserve: " << status.ToString() << "\n";
  return 1;
}

int Generate(const CliFlags& flags) {
  if (!flags.has_prompt) {
    std::cerr << "tpserve generate: one of --prompt, --prompt-ids, --chat is required\n" << kUsage;
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
      std::cout << "{\"sample\":" << s << ",\"text\":" << JsonString(result->text[s]) << ",\"token_ids\":[";
      for (size_t i = 0; i < result->token_ids[s].size(); ++i) std::cout << (i ? "," : "") << result->token_ids[s][i];
      std::cout << "],\"finish_reason\":\"" << proto::FinishReasonName(finish.reason)
                << "\",\"usage\":{\"prompt_tokens\":" << finish.usage.prompt_tokens
                << ",\"completion_tokens\":" << finish.usage.completion_tokens
                << ",\"cached_prompt_tokens\":" << finish.usage.cached_prompt_tokens << "},\"ttft_ms\":" << finish.ttft_ms
                << ",\"tpot_ms\":" << finish.tpot_ms << ",\"seed\":" << finish.seed << "}" << std::endl;
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
    std::cerr << "tpserve batch: give at least one --prompt\n";
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
            << "\nvocab_size: " << h->vocab_size << "\ncontext_length: " << h->context_length << "\n";
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
            << "\npreemptions: " << s->num_preemptions << "\n";
  return 0;
}

int Main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << kUsage;
    return 2;
  }
  const std::string command = argv[1];
  if (command == "serve") return RunServeCommand(argc, argv);
  if (command == "--help" || command == "-h" || command == "help") {
    std::cout << kUsage;
    return 0;
  }
  StatusOr<CliFlags> flags = ParseCliFlags(argc, argv, 2);
  if (!flags.ok()) {
    std::cerr << "tpserve: " << flags.status().message() << "\n" << kUsage;
    return 2;
  }
  if (command == "generate") return Generate(*flags);
  if (command == "chat") return Chat(*flags);
  if (command == "batch") return Batch(*flags);
  if (command == "health") return Health(*flags);
  if (command == "stats") return Stats(*flags);
  std::cerr << "tpserve: unknown command " << command << "\n" << kUsage;
  return 2;
}

}  // namespace
}  // namespace tpserve

int main(int argc, char** argv) { return tpserve::Main(argc, argv); }
