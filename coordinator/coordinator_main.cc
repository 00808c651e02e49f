// tpserve-coordinator: the coordinator process. Opens the model file for its config and tokenizer
// only (the weights stay with the workers), binds the client and worker endpoints and serves until
// SIGTERM/SIGINT, which drains: new requests are refused, running ones finish, exit code 0.
//
//   tpserve-coordinator --model M [--host 0.0.0.0] [--port 5555] [--worker-port 5556]
//       [--max-num-seqs 64] [--max-batched-tokens 512] [--max-queue 256] [--max-model-len N]
//       [--no-prefix-caching] [--api-key K]... [--step-timeout-ms 60000] [--client-timeout-ms 30000]
//       [--metrics-port P] [--metrics-host 127.0.0.1]
// --metrics-port serves GET /metrics (Prometheus text) over HTTP; off without it.
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include "comm/model_fingerprint.h"
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

void Usage() {
  std::cerr << "usage: tpserve-coordinator --model M [--host H] [--port P] [--worker-port P]\n"
               "  [--max-num-seqs N] [--max-batched-tokens N] [--max-queue N] [--max-model-len N]\n"
               "  [--no-prefix-caching] [--api-key K]... [--step-timeout-ms MS] [--client-timeout-ms MS]\n"
               "  [--keys DIR (CURVE: `tpserve keys init DIR`)] [--insecure (bind a non-loopback host without keys)]\n"
               "  [--metrics-port P] [--metrics-host H]   GET /metrics over HTTP (default host 127.0.0.1)\n";
}

StatusOr<Flags> ParseFlags(int argc, char** argv) {
  Flags f;
  f.server.scheduler.max_num_batched_tokens = 512;
  f.server.scheduler.max_model_len = 0;  // 0: the model's context length
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> StatusOr<std::string> {
      if (i + 1 >= argc) return InvalidArgument(arg + " needs a value");
      return std::string(argv[++i]);
    };
    auto int_value = [&]() -> StatusOr<int> {
      ASSIGN_OR_RETURN(std::string v, value());
      char* end = nullptr;
      long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < 0 || n > (1 << 30)) return InvalidArgument(arg + ": bad number " + v);
      return static_cast<int>(n);
    };
    if (arg == "--model") {
      ASSIGN_OR_RETURN(f.model, value());
    } else if (arg == "--host") {
      ASSIGN_OR_RETURN(f.host, value());
    } else if (arg == "--port") {
      ASSIGN_OR_RETURN(f.port, int_value());
    } else if (arg == "--worker-port") {
      ASSIGN_OR_RETURN(f.worker_port, int_value());
    } else if (arg == "--max-num-seqs") {
      ASSIGN_OR_RETURN(f.server.scheduler.max_num_seqs, int_value());
    } else if (arg == "--max-batched-tokens") {
      ASSIGN_OR_RETURN(f.server.scheduler.max_num_batched_tokens, int_value());
    } else if (arg == "--max-queue") {
      ASSIGN_OR_RETURN(f.server.scheduler.max_queue, int_value());
    } else if (arg == "--max-model-len") {
      ASSIGN_OR_RETURN(f.server.scheduler.max_model_len, int_value());
    } else if (arg == "--keys") {
      ASSIGN_OR_RETURN(f.server.keys_dir, value());
    } else if (arg == "--insecure") {
      f.server.insecure = true;
    } else if (arg == "--no-prefix-caching") {
      f.server.scheduler.enable_prefix_caching = false;
    } else if (arg == "--api-key") {
      ASSIGN_OR_RETURN(std::string key, value());
      f.server.api_keys.push_back(key);
    } else if (arg == "--step-timeout-ms") {
      ASSIGN_OR_RETURN(int ms, int_value());
      f.server.step_timeout = std::chrono::milliseconds(ms);
    } else if (arg == "--client-timeout-ms") {
      ASSIGN_OR_RETURN(int ms, int_value());
      f.server.client_timeout = std::chrono::milliseconds(ms);
    } else if (arg == "--metrics-port") {
      ASSIGN_OR_RETURN(f.server.metrics_port, int_value());
    } else if (arg == "--metrics-host") {
      ASSIGN_OR_RETURN(f.server.metrics_host, value());
    } else if (arg == "--help" || arg == "-h") {
      Usage();
      std::exit(0);
    } else {
      return InvalidArgument("unknown flag " + arg);
    }
  }
  if (f.model.empty()) return InvalidArgument("--model is required");
  return f;
}

int Main(int argc, char** argv) {
  StatusOr<Flags> flags = ParseFlags(argc, argv);
  if (!flags.ok()) {
    std::cerr << "tpserve-coordinator: " << flags.status().message() << "\n";
    Usage();
    return 2;
  }
  auto fail = [](const Status& s) {
    std::cerr << "tpserve-coordinator: " << s.ToString() << "\n";
    return 1;
  };
  StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(flags->model);
  if (!file.ok()) return fail(file.status());
  StatusOr<ModelConfig> config = ModelConfigFromGguf(**file);
  if (!config.ok()) return fail(config.status());
  StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::FromGguf(**file);
  if (!tokenizer.ok()) {
    LOG(WARN) << "no tokenizer (" << tokenizer.status().ToString() << "): token-id prompts only";
  }
  StatusOr<ModelFingerprint> fingerprint = ComputeModelFingerprint(flags->model);
  if (!fingerprint.ok()) return fail(fingerprint.status());

  ServerOptions options = flags->server;
  options.client_endpoint = "tcp://" + flags->host + ":" + std::to_string(flags->port);
  options.worker_endpoint = "tcp://" + flags->host + ":" + std::to_string(flags->worker_port);
  options.model_name = config->name.empty() ? flags->model : config->name;
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
