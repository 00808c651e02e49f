// tpserve-coordinator: the coordinator process. Opens the model file for its config and tokenizer
// only (the weights stay with the workers), binds the client and worker endpoints and serves until
// SIGTERM/SIGINT, which drains: new requests are refused, running ones finish, exit code 0.
//
//   tpserve-coordinator --model M [--host 0.0.0.0] [--port 5555] [--worker-port 5556]
//       [--max-num-seqs 64] [--max-batched-tokens 512] [--max-queue 256] [--max-model-len N]
//       [--no-prefix-caching] [--api-key K]... [--step-timeout-ms 60000] [--client-timeout-ms 30000]
//       [--heartbeat-interval-ms 500] [--heartbeat-timeout-ms 2500] [--max-replays 3] [--replay-wait-ms 60000]
//       [--metrics-port P] [--metrics-host 127.0.0.1] [--keys DIR] [--insecure] [--speculative off|ngram:K|draft:K]
// --metrics-port serves GET /metrics (Prometheus text) over HTTP; off without it.
//   (tpserve-coordinator --help: what each flag does)
#include <csignal>
#include <iostream>
#include <optional>
#include <string>

#include "comm/model_fingerprint.h"
#include "common/command_line.h"
#include "common/logging.h"
#include "coordinator/server.h"
#include "model/gguf_file.h"
#include "model/model_config.h"
#include "model/tokenizer.h"

namespace tpserve {
namespace {

Server* g_server = nullptr;

void OnSignal(int) {
  if (g_server != nullptr) g_server->RequestDrain();  // an atomic store: signal-safe
}

struct Flags {
  std::string model;
  std::string host = "127.0.0.1";  // another address needs --keys (or --insecure)
  int port = 5555;
  int worker_port = 5556;
  ServerOptions server;
};

void AddFlags(CLI::App& app, Flags& f) {
  ServerOptions& s = f.server;
  const auto count = CLI::Range(0, 1 << 30);
  app.add_option("--model", f.model, "GGUF file: its config and tokenizer (the weights stay with the workers)")
      ->required();
  app.add_option("--host", f.host, "address of both endpoints (another than loopback needs --keys or --insecure)")
      ->capture_default_str();
  app.add_option("--port", f.port, "client endpoint port")->check(CLI::Range(0, 65535))->capture_default_str();
  app.add_option("--worker-port", f.worker_port, "worker endpoint port")->check(CLI::Range(0, 65535))
      ->capture_default_str();
  app.add_option("--max-num-seqs", s.scheduler.max_num_seqs, "sequences running at once per worker group")
      ->check(count)->capture_default_str();
  app.add_option("--max-batched-tokens", s.scheduler.max_num_batched_tokens, "token budget of one step")
      ->check(count)->capture_default_str();
  app.add_option("--max-queue", s.scheduler.max_queue, "waiting sequences before `overloaded`")->check(count)
      ->capture_default_str();
  app.add_option("--max-queued-tokens", s.scheduler.max_queued_tokens,
                 "waiting prompt tokens (still to prefill) before `overloaded`; 0: no bound")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40))->capture_default_str();
  app.add_option("--max-model-len", s.scheduler.max_model_len, "longest sequence (0: the model's context length)")
      ->check(count);
  app.add_flag("--no-prefix-caching", [&s](int64_t) { s.scheduler.enable_prefix_caching = false; },
               "never reuse cached prompt blocks");
  app.add_option("--api-key", s.api_keys, "a key clients must send (repeatable; none: no check)")
      ->envname("TPSERVE_API_KEY");
  app.add_option("--keys", s.keys_dir, "CURVE key directory (`tpserve keys init DIR`)");
  app.add_flag("--insecure", s.insecure, "bind a non-loopback host without keys");
  app.add_option("--metrics-port", s.metrics_port, "serve GET /metrics (Prometheus text) over HTTP on this port")
      ->check(CLI::Range(0, 65535));
  app.add_option("--metrics-host", s.metrics_host, "the metrics endpoint's address")->capture_default_str();
  app.add_option_function<int>(
         "--step-timeout-ms", [&s](int ms) { s.step_timeout = std::chrono::milliseconds(ms); },
         "a worker group that takes longer for a step is lost")
      ->check(count);
  app.add_option_function<int>(
         "--heartbeat-interval-ms", [&s](int ms) { s.heartbeat_interval = std::chrono::milliseconds(ms); },
         "heartbeats to and from worker groups this often")
      ->check(CLI::Range(1, 1 << 30));
  app.add_option_function<int>(
         "--heartbeat-timeout-ms", [&s](int ms) { s.heartbeat_timeout = std::chrono::milliseconds(ms); },
         "a worker group silent this long (dead, stopped or unreachable leader) is lost")
      ->check(CLI::Range(1, 1 << 30));
  app.add_option("--max-replays", s.max_replays,
                 "re-run a request this many times when its worker group is lost (then worker_lost)")
      ->check(count)->capture_default_str();
  app.add_option_function<std::string>(
         "--speculative",
         [&s](const std::string& text) {
           StatusOr<SpeculativeConfig> parsed = ParseSpeculativeConfig(text);
           if (!parsed.ok()) throw CLI::ValidationError("--speculative", parsed.status().message());
           s.speculative = *parsed;
         },
         "speculative decoding for requests that do not choose: off (default), ngram:K (prompt lookup) or draft:K "
         "(the workers' --draft-model), K proposals per step, 1..16; the tokens are the same either way");
  app.add_option_function<int>(
         "--replay-wait-ms", [&s](int ms) { s.replay_wait = std::chrono::milliseconds(ms); },
         "a request of a lost group waits this long for a group to replay it on")
      ->check(count);
  app.add_option_function<int>(
         "--client-timeout-ms", [&s](int ms) { s.client_timeout = std::chrono::milliseconds(ms); },
         "a client silent this long has its requests cancelled (0: never)")
      ->check(count);
}

int Main(int argc, char** argv) {
  CommandLine app("tpserve-coordinator: the coordinator. Serves clients and worker groups until SIGTERM/SIGINT, "
                  "which drains: new requests are refused, running ones finish, exit code 0.",
                  "tpserve-coordinator");
  Flags flags;
  flags.server.scheduler.max_num_batched_tokens = 512;
  flags.server.scheduler.max_model_len = 0;  // 0: the model's context length
  AddFlags(app, flags);
  if (std::optional<int> exit_code = app.ParseOrExitCode(argc, argv)) return *exit_code;
  auto fail = [](const Status& s) {
    std::cerr << "tpserve-coordinator: " << s.ToString() << "\n";
    return 1;
  };
  StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(flags.model);
  if (!file.ok()) return fail(file.status());
  StatusOr<ModelConfig> config = ModelConfigFromGguf(**file);
  if (!config.ok()) return fail(config.status());
  StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::FromGguf(**file);
  if (!tokenizer.ok()) {
    LOG(WARN) << "no tokenizer (" << tokenizer.status().ToString() << "): token-id prompts only";
  }
  StatusOr<ModelFingerprint> fingerprint = ComputeModelFingerprint(flags.model);
  if (!fingerprint.ok()) return fail(fingerprint.status());

  ServerOptions options = flags.server;
  options.client_endpoint = "tcp://" + flags.host + ":" + std::to_string(flags.port);
  options.worker_endpoint = "tcp://" + flags.host + ":" + std::to_string(flags.worker_port);
  options.model_name = config->name.empty() ? flags.model : config->name;
  options.limits.vocab_size = config->vocab_size;
  options.limits.context_length = config->context_length;
  if (options.scheduler.max_model_len <= 0 || options.scheduler.max_model_len > config->context_length) {
    options.scheduler.max_model_len = config->context_length;
  }
  options.limits.context_length = options.scheduler.max_model_len;
  options.eos_id = config->eos_id;
  options.eot_id = config->eot_id;
  options.model_fingerprint = *fingerprint;
  StatusOr<std::unique_ptr<Server>> server =
      Server::Create(options, tokenizer.ok() ? tokenizer->get() : nullptr);
  if (!server.ok()) return fail(server.status());
  g_server = server->get();
  struct sigaction action = {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  std::cout << "tpserve-coordinator: serving " << options.model_name << " on " << (*server)->client_endpoint()
            << " (workers: " << (*server)->worker_endpoint() << ")";
  if ((*server)->metrics_port() >= 0) {
    std::cout << " (metrics: http://" << options.metrics_host << ":" << (*server)->metrics_port() << "/metrics)";
  }
  std::cout << std::endl;
  Status run = (*server)->Run();
  g_server = nullptr;
  if (!run.ok()) return fail(run);
  return 0;
}

}  // namespace
}  // namespace tpserve

int main(int argc, char** argv) { return tpserve::Main(argc, argv); }
