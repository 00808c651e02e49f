// tpserve-http: the OpenAI-compatible HTTP gateway in front of a coordinator.
//
//   tpserve-http --coordinator tcp://HOST:PORT [--port 8000] [--host 127.0.0.1] [--api-key K]... [--insecure]
//       [--served-model-name NAME] [--coordinator-api-key K] [--threads 2] [--max-body-bytes N]
//
// SIGTERM/SIGINT stop it (exit 0).
#include <csignal>
#include <iostream>

#include <CLI/CLI.hpp>

#include "client/http/gateway.h"

namespace {

tpserve::http::Gateway* g_gateway = nullptr;

void OnSignal(int) {
  if (g_gateway != nullptr) g_gateway->Stop();  // io_context::stop is safe to call from a handler
}

}  // namespace

int main(int argc, char** argv) {
  tpserve::http::GatewayOptions options;
  CLI::App app{"tpserve-http: the OpenAI-compatible HTTP gateway in front of a tpserve coordinator"};
  app.add_option("--coordinator", options.coordinator, "the coordinator's client endpoint")->required();
  app.add_option("--host", options.host, "address to bind (loopback unless told otherwise)")->capture_default_str();
  app.add_option("--port", options.port, "port to bind (0: any free one, printed)")->capture_default_str();
  app.add_option("--api-key", options.api_keys, "accepted Bearer key on /v1 routes (repeat for several)")
      ->envname("TPSERVE_API_KEY");
  app.add_flag("--insecure", options.insecure, "serve a non-loopback --host without --api-key");
  app.add_option("--coordinator-api-key", options.coordinator_api_key,
                 "key sent to the coordinator (default: the first --api-key)");
  app.add_option("--keys", options.keys_dir, "CURVE key directory (tpserve keys init): coordinator.pub, clients/NAME.key");
  app.add_option("--key-name", options.key_name, "which clients/NAME.key (default: the only one, or default)");
  app.add_option("--served-model-name", options.served_model_name, "model name in replies (default: the coordinator's)");
  app.add_option("--threads", options.num_threads, "I/O threads")->capture_default_str()->check(CLI::Range(1, 64));
  app.add_option("--max-body-bytes", options.max_body_bytes, "largest request body (413 beyond)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (options.coordinator_api_key.empty() && !options.api_keys.empty()) options.coordinator_api_key = options.api_keys[0];

  std::signal(SIGPIPE, SIG_IGN);
  auto gateway = tpserve::http::Gateway::Create(options);
  if (!gateway.ok()) {
    std::cerr << "tpserve-http: " << gateway.status().ToString() << "\n";
    return 1;
  }
  g_gateway = gateway->get();
  struct sigaction action = {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  std::cout << "tpserve-http: listening on http://" << options.host << ":" << (*gateway)->port()
            << " (coordinator " << options.coordinator << ", " << options.num_threads << " I/O threads)" << std::endl;
  (*gateway)->Run();
  g_gateway = nullptr;
  return 0;
}
