// tpserve-bench: a load generator for a running tpserve coordinator (its ZeroMQ protocol or its
// OpenAI HTTP gateway), or for llama.cpp's llama-server as the peer (vLLM `bench serve` metrics).
//
//   tpserve-bench --server tcp://127.0.0.1:P|http://127.0.0.1:P --num-requests N
//       (--concurrency C [--static-batch] | --request-rate R [--burstiness B])
//       [--dataset random|sharegpt-like] [--input-len L] [--output-len O] [--range-ratio r]
//       [--shared-prefix-len P] [--seed S] [--goodput ttft:MS,tpot:MS,e2e:MS] [--json OUT]
//       [--label X] [--max-duration-s S] [--progress-every N] [--token-salt K] [--vocab-size V]
//       [--keys DIR [--key-name NAME]]
//
// The scheme picks the backend (bench/loadgen/load_backend.h): tcp:// is tpserve's client protocol,
// http:// is the openai http backend: POST /v1/completions streamed as SSE, the same endpoint on
// tpserve's gateway (tpserve serve --http-port) and on llama-server. Dataset, arrivals, metrics and
// JSON are the same for both; the JSON's "backend" says which was measured. --vocab-size is needed
// only for a server that does not report its vocabulary (tpserve's gateway): the same V and --seed
// give the same prompts as the tcp:// run.
// --token-salt changes the prompts' token ids but not their lengths (same shape, no prefix-cache
// hits on an earlier run's prompts).
// Closed loop (--concurrency) or open loop (--request-rate: Poisson, or gamma with --burstiness).
// Prints the vLLM-style result table on stdout, progress on stderr, and writes JSON with --json.
// Only loopback servers (127.x.x.x, localhost, [::1]) are accepted: this tool floods its
// target. Exit 0 when the run finished (failed requests are counted, not fatal), 1 when it could not
// run, 2 for a bad command line (tpserve-bench --help: every flag).
#include <climits>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "bench/loadgen/arrival.h"
#include "bench/loadgen/dataset.h"
#include "bench/loadgen/openai_http_backend.h"
#include "bench/loadgen/report.h"
#include "bench/loadgen/runner.h"
#include "bench/loadgen/tpserve_backend.h"
#include "common/command_line.h"

namespace tpserve::loadgen {
namespace {

constexpr int32_t kMaxRequests = 100000;
constexpr double kMaxDurationS = 3600;

struct Flags {
  std::string server, dataset = "random", json, goodput;
  std::string keys_dir, key_name;  // CURVE, for a tcp:// server
  int32_t vocab_size = 0;  // --vocab-size (0: the server's)
  RunDescription run;
  DatasetOptions data;
  bool is_static = false;
  double max_duration_s = 600;
  int64_t progress_every = 0;  // 0: about 20 lines per run
};

constexpr std::string_view kTpserveScheme = "tcp://", kHttpScheme = "http://";

bool IsLoopback(const std::string& endpoint) {
  const std::string prefix(endpoint.rfind(kTpserveScheme, 0) == 0 ? kTpserveScheme : kHttpScheme);
  if (endpoint.rfind(prefix, 0) != 0) return false;
  const size_t colon = endpoint.rfind(':');
  if (colon == std::string::npos || colon < prefix.size()) return false;
  const std::string host = endpoint.substr(prefix.size(), colon - prefix.size());
  return host.rfind("127.", 0) == 0 || host == "localhost" || host == "[::1]";
}

StatusOr<GoodputTargets> ParseGoodput(const std::string& spec) {
  GoodputTargets t;
  size_t pos = 0;
  while (pos < spec.size()) {
    size_t comma = spec.find(',', pos);
    if (comma == std::string::npos) comma = spec.size();
    const std::string item = spec.substr(pos, comma - pos);
    const size_t colon = item.find(':');
    if (colon == std::string::npos) return InvalidArgument("--goodput item '" + item + "' is not NAME:MS");
    char* rest = nullptr;
    const double ms = std::strtod(item.c_str() + colon + 1, &rest);
    if (*rest != '\0' || !(ms > 0)) return InvalidArgument("--goodput '" + item + "': MS must be a positive number");
    const std::string name = item.substr(0, colon);
    if (name == "ttft") {
      t.ttft_ms = ms;
    } else if (name == "tpot") {
      t.tpot_ms = ms;
    } else if (name == "e2e" || name == "e2el") {
      t.e2e_ms = ms;
    } else {
      return InvalidArgument("--goodput: unknown metric '" + name + "' (ttft, tpot, e2e)");
    }
    pos = comma + 1;
  }
  return t;
}

// The flags CLI11 checks alone; the rest (request rate, dataset, goodput, which flags go together) are
// read into strings and finished by FinishFlags.
struct RawFlags {
  std::string request_rate, goodput;
};

void AddFlags(CLI::App& app, Flags& f, RawFlags& raw) {
  app.add_option("--server", f.server, "tcp://127.0.0.1:P (tpserve's ZeroMQ protocol) or http://127.0.0.1:P "
                 "(OpenAI /v1/completions: tpserve's gateway or llama-server); loopback only")->required();
  app.add_option("--vocab-size", f.vocab_size, "the model's vocabulary, for an http:// server that does not report it "
                 "(tpserve's gateway)")->check(CLI::Range(1, INT32_MAX));
  app.add_option("--num-requests", f.data.num_requests, "requests in the run")->check(CLI::Range(1, kMaxRequests))
      ->capture_default_str();
  app.add_option("--concurrency", f.run.concurrency, "closed loop: requests in flight")->check(CLI::Range(1, 4096));
  app.add_flag("--static-batch", f.is_static, "closed loop in waves: the next batch starts when all finished");
  app.add_option("--request-rate", raw.request_rate, "open loop: requests per second (> 0, or inf)");
  app.add_option("--burstiness", f.run.burstiness, "open loop: gamma shape (1: Poisson)")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--dataset", f.dataset, "random or sharegpt-like")->capture_default_str();
  app.add_option("--input-len", f.data.input_len, "prompt tokens (default: the dataset's)")->check(CLI::Range(1, 1 << 20));
  app.add_option("--output-len", f.data.output_len, "output tokens (default: the dataset's)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--range-ratio", f.data.range_ratio, "lengths vary in [L(1-r), L(1+r)]; in [0, 1)")
      ->check(Interval(0, 1, true, false))->capture_default_str();
  app.add_option("--shared-prefix-len", f.data.shared_prefix_len, "tokens every prompt starts with")
      ->check(CLI::Range(0, 1 << 20))->capture_default_str();
  app.add_option("--seed", f.data.seed, "dataset and arrivals seed")->check(CLI::Range(uint64_t{0}, uint64_t{1} << 53))
      ->capture_default_str();
  app.add_option("--token-salt", f.data.token_salt, "changes the prompts' ids, not their lengths")
      ->check(CLI::Range(uint64_t{0}, uint64_t{1} << 53));
  app.add_option("--goodput", raw.goodput, "SLOs for goodput: ttft:MS,tpot:MS,e2e:MS");
  app.add_option("--json", f.json, "also write the results as JSON here");
  app.add_option("--keys", f.keys_dir, "CURVE key directory for a tcp:// server (tpserve keys init)");
  app.add_option("--key-name", f.key_name, "which clients/NAME.key under --keys (default: the only one, or default)");
  app.add_option("--label", f.run.label, "the run's label in the report");
  app.add_option("--max-duration-s", f.max_duration_s, "stop the run after this long")
      ->check(Interval(0, kMaxDurationS, false, true))->capture_default_str();
  app.add_option("--progress-every", f.progress_every, "progress line every N requests (default: ~20 per run)")
      ->check(CLI::Range(int64_t{1}, int64_t{kMaxRequests}));
}

Status FinishFlags(const RawFlags& raw, Flags& f) {
  if (!IsLoopback(f.server)) {
    return InvalidArgument("--server must be a loopback address: tcp://127.0.0.1:P (tpserve) or http://127.0.0.1:P (OpenAI API)");
  }
  if (raw.request_rate == "inf") {
    f.run.request_rate = INFINITY;
  } else if (!raw.request_rate.empty()) {
    char* rest = nullptr;
    f.run.request_rate = std::strtod(raw.request_rate.c_str(), &rest);
    if (*rest != '\0' || !(f.run.request_rate > 0)) return InvalidArgument("--request-rate must be > 0 or inf");
  }
  if (!raw.goodput.empty()) {
    ASSIGN_OR_RETURN(f.run.goodput, ParseGoodput(raw.goodput));
  }
  const bool closed = f.run.concurrency > 0, open = f.run.request_rate > 0;
  if (closed == open) return InvalidArgument("give exactly one of --concurrency and --request-rate");
  if (f.is_static && !closed) return InvalidArgument("--static-batch needs --concurrency");
  ASSIGN_OR_RETURN(f.data.kind, ParseDatasetKind(f.dataset));
  f.run.mode = open ? "open" : (f.is_static ? "static" : "closed");
  return OkStatus();
}

StatusOr<std::unique_ptr<LoadBackend>> MakeBackend(const Flags& f) {
  if (f.server.rfind(kTpserveScheme, 0) == 0) {
    ASSIGN_OR_RETURN(std::unique_ptr<TpserveBackend> backend, TpserveBackend::Connect(f.server, f.keys_dir, f.key_name));
    return std::unique_ptr<LoadBackend>(std::move(backend));
  }
  if (!f.keys_dir.empty()) return InvalidArgument("--keys is for a tcp:// server (CURVE); an http:// server has none");
  ASSIGN_OR_RETURN(std::unique_ptr<OpenAiHttpBackend> backend, OpenAiHttpBackend::Create(f.server, f.vocab_size));
  return std::unique_ptr<LoadBackend>(std::move(backend));
}

int Main(int argc, char** argv) {
  CommandLine app("tpserve-bench: a load generator for a running tpserve coordinator (tcp://) or an OpenAI API "
                  "server (http://: tpserve's gateway, llama.cpp's llama-server), with vLLM `bench serve` metrics. Exit 0 when the run finished (failed "
                  "requests are counted), 1 when it could not run, 2 for a bad command line.",
                  "tpserve-bench");
  Flags f;
  f.run.request_rate = 0;
  RawFlags raw;
  AddFlags(app, f, raw);
  if (std::optional<int> exit_code = app.ParseOrExitCode(argc, argv)) return *exit_code;
  if (Status finished = FinishFlags(raw, f); !finished.ok()) {
    std::cerr << "tpserve-bench: " << finished.message() << "\nRun with --help for the flags.\n";
    return 2;
  }
  StatusOr<std::unique_ptr<LoadBackend>> backend = MakeBackend(f);
  if (!backend.ok()) {
    std::cerr << "tpserve-bench: " << backend.status().ToString() << "\n";
    return 1;
  }
  StatusOr<ServerInfo> info = (*backend)->Info();
  if (!info.ok()) {
    std::cerr << "tpserve-bench: server " << f.server << " is not ready: " << info.status().ToString() << "\n";
    return 1;
  }
  f.data.vocab_size = info->vocab_size;
  f.data.max_model_len = info->context_length;
  StatusOr<std::vector<BenchRequest>> requests = MakeDataset(f.data);
  if (!requests.ok()) {
    std::cerr << "tpserve-bench: " << requests.status().message() << "\n";
    return 1;
  }

  RunOptions options;
  options.mode = f.run.mode == "open" ? LoadMode::kOpen : f.is_static ? LoadMode::kStatic : LoadMode::kClosed;
  options.concurrency = f.run.concurrency;
  options.max_duration_s = f.max_duration_s;
  options.progress_every = f.progress_every > 0 ? f.progress_every : std::max<int64_t>(1, f.data.num_requests / 20);
  if (options.mode == LoadMode::kOpen) {
    options.arrival_s = ArrivalTimes(f.data.num_requests, f.run.request_rate, f.run.burstiness, f.data.seed + 1);
  }
  f.run.server = f.server;
  f.run.backend = f.server.rfind(kTpserveScheme, 0) == 0 ? "tpserve" : "openai-http";
  f.run.dataset = DatasetKindName(f.data.kind);
  f.run.num_requests = f.data.num_requests;
  f.run.input_len = f.data.input_len;
  f.run.output_len = f.data.output_len;
  f.run.range_ratio = f.data.range_ratio;
  f.run.shared_prefix_len = f.data.shared_prefix_len;
  f.run.seed = f.data.seed;
  std::cerr << "tpserve-bench: " << f.data.num_requests << " requests (" << f.run.dataset << ") to " << f.server
            << " (" << f.run.backend << "), model " << info->model_name << "\n";

  StatusOr<LoadResult> result = RunLoad(backend->get(), *requests, options);
  if (!result.ok()) {
    std::cerr << "tpserve-bench: run failed: " << result.status().ToString() << "\n";
    return 1;
  }
  Summary summary = Summarize(result->records, f.run.goodput);
  summary.kv = SummarizeKv(result->kv_samples);
  std::cout << FormatReport(f.run, summary) << std::flush;
  for (const RequestRecord& r : result->records) {
    if (!r.ok) {
      std::cerr << "tpserve-bench: first failure: " << r.error << "\n";
      break;
    }
  }
  if (!f.json.empty()) {
    std::ofstream out(f.json);
    out << ReportJson(f.run, summary).Dump() << "\n";
    if (!out) {
      std::cerr << "tpserve-bench: cannot write " << f.json << "\n";
      return 1;
    }
  }
  return 0;
}

}  // namespace
}  // namespace tpserve::loadgen

int main(int argc, char** argv) { return tpserve::loadgen::Main(argc, argv); }
