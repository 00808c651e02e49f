// tpserve-bench: a load generator for a running tpserve coordinator, or for llama.cpp's llama-server
// as the peer (vLLM `bench serve` metrics).
//
//   tpserve-bench --server tcp://127.0.0.1:P|http://127.0.0.1:P --num-requests N
//       (--concurrency C [--static-batch] | --request-rate R [--burstiness B])
//       [--dataset random|sharegpt-like] [--input-len L] [--output-len O] [--range-ratio r]
//       [--shared-prefix-len P] [--seed S] [--goodput ttft:MS,tpot:MS,e2e:MS] [--json OUT]
//       [--label X] [--max-duration-s S] [--progress-every N] [--token-salt K]
//
// The scheme picks the backend (bench/loadgen/load_backend.h): tcp:// is tpserve's client protocol,
// http:// is llama-server's POST /completion streamed as SSE. Dataset, arrivals, metrics and JSON
// are the same for both; the JSON's "backend" says which was measured.
// --token-salt changes the prompts' token ids but not their lengths (same shape, no prefix-cache
// hits on an earlier run's prompts).
// Closed loop (--concurrency) or open loop (--request-rate: Poisson, or gamma with --burstiness).
// Prints the vLLM-style result table on stdout, progress on stderr, and writes JSON with --json.
// Only loopback servers (127.x.x.x, localhost, [::1]) are accepted: this tool floods its
// target. Exit 0 when the run finished (failed requests are counted, not fatal), 1 otherwise.
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <string_view>

#include "bench/loadgen/arrival.h"
#include "bench/loadgen/dataset.h"
#include "bench/loadgen/llama_server_backend.h"
#include "bench/loadgen/report.h"
#include "bench/loadgen/runner.h"
#include "bench/loadgen/tpserve_backend.h"

namespace tpserve::loadgen {
namespace {

constexpr int32_t kMaxRequests = 100000;
constexpr double kMaxDurationS = 3600;

struct Flags {
  std::string server, dataset = "random", json, goodput;
  RunDescription run;
  DatasetOptions data;
  bool is_static = false;
  double max_duration_s = 600;
  int64_t progress_every = 0;  // 0: about 20 lines per run
};

const char kUsage[] =
    "usage: tpserve-bench --server tcp://127.0.0.1:P|http://127.0.0.1:P --num-requests N\n"
    "         (--concurrency C [--static-batch] | --request-rate R [--burstiness B])\n"
    "         [--dataset random|sharegpt-like] [--input-len L] [--output-len O] [--range-ratio r]\n"
    "         [--shared-prefix-len P] [--seed S] [--goodput ttft:MS,tpot:MS,e2e:MS] [--json OUT]\n"
    "         [--label X] [--max-duration-s S] [--progress-every N] [--token-salt K]\n";

constexpr std::string_view kTpserveScheme = "tcp://", kLlamaServerScheme = "http://";

bool IsLoopback(const std::string& endpoint) {
  const std::string prefix(endpoint.rfind(kTpserveScheme, 0) == 0 ? kTpserveScheme : kLlamaServerScheme);
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

StatusOr<Flags> ParseFlags(int argc, char** argv) {
  Flags f;
  f.run.request_rate = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--static-batch") {
      f.is_static = true;
      continue;
    }
    if (arg == "--help" || arg == "-h") return InvalidArgument("");
    if (i + 1 >= argc) return InvalidArgument(arg + " needs a value");
    const std::string v = argv[++i];
    char* rest = nullptr;
    const double num = std::strtod(v.c_str(), &rest);
    const bool is_num = !v.empty() && *rest == '\0';
    auto need_int = [&](int64_t lo, int64_t hi) -> StatusOr<int64_t> {
      if (!is_num || num != std::floor(num) || num < lo || num > hi) {
        return InvalidArgument(arg + " must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
      }
      return static_cast<int64_t>(num);
    };
    if (arg == "--server") {
      f.server = v;
    } else if (arg == "--num-requests") {
      ASSIGN_OR_RETURN(int64_t x, need_int(1, kMaxRequests));
      f.data.num_requests = static_cast<int32_t>(x);
    } else if (arg == "--concurrency") {
      ASSIGN_OR_RETURN(int64_t x, need_int(1, 4096));
      f.run.concurrency = static_cast<int32_t>(x);
    } else if (arg == "--request-rate") {
      if (v == "inf") {
        f.run.request_rate = INFINITY;
      } else if (!is_num || !(num > 0)) {
        return InvalidArgument("--request-rate must be > 0 or inf");
      } else {
        f.run.request_rate = num;
      }
    } else if (arg == "--burstiness") {
      if (!is_num || !(num > 0)) return InvalidArgument("--burstiness must be > 0");
      f.run.burstiness = num;
    } else if (arg == "--dataset") {
      f.dataset = v;
    } else if (arg == "--input-len") {
      ASSIGN_OR_RETURN(int64_t x, need_int(1, 1 << 20));
      f.data.input_len = static_cast<int32_t>(x);
    } else if (arg == "--output-len") {
      ASSIGN_OR_RETURN(int64_t x, need_int(1, 1 << 20));
      f.data.output_len = static_cast<int32_t>(x);
    } else if (arg == "--range-ratio") {
      if (!is_num || !(num >= 0 && num < 1)) return InvalidArgument("--range-ratio must be in [0, 1)");
      f.data.range_ratio = num;
    } else if (arg == "--shared-prefix-len") {
      ASSIGN_OR_RETURN(int64_t x, need_int(0, 1 << 20));
      f.data.shared_prefix_len = static_cast<int32_t>(x);
    } else if (arg == "--seed") {
      ASSIGN_OR_RETURN(int64_t x, need_int(0, int64_t{1} << 53));
      f.data.seed = static_cast<uint64_t>(x);
    } else if (arg == "--token-salt") {
      ASSIGN_OR_RETURN(int64_t x, need_int(0, int64_t{1} << 53));
      f.data.token_salt = static_cast<uint64_t>(x);
    } else if (arg == "--goodput") {
      ASSIGN_OR_RETURN(f.run.goodput, ParseGoodput(v));
    } else if (arg == "--json") {
      f.json = v;
    } else if (arg == "--label") {
      f.run.label = v;
    } else if (arg == "--max-duration-s") {
      if (!is_num || !(num > 0 && num <= kMaxDurationS)) return InvalidArgument("--max-duration-s must be in (0, 3600]");
      f.max_duration_s = num;
    } else if (arg == "--progress-every") {
      ASSIGN_OR_RETURN(f.progress_every, need_int(1, kMaxRequests));
    } else {
      return InvalidArgument("unknown flag " + arg);
    }
  }
  if (f.server.empty()) return InvalidArgument("--server is required");
  if (!IsLoopback(f.server)) {
    return InvalidArgument("--server must be a loopback address: tcp://127.0.0.1:P (tpserve) or http://127.0.0.1:P (llama-server)");
  }
  const bool closed = f.run.concurrency > 0, open = f.run.request_rate > 0;
  if (closed == open) return InvalidArgument("give exactly one of --concurrency and --request-rate");
  if (f.is_static && !closed) return InvalidArgument("--static-batch needs --concurrency");
  ASSIGN_OR_RETURN(f.data.kind, ParseDatasetKind(f.dataset));
  f.run.mode = open ? "open" : (f.is_static ? "static" : "closed");
  return f;
}

StatusOr<std::unique_ptr<LoadBackend>> MakeBackend(const std::string& server) {
  if (server.rfind(kTpserveScheme, 0) == 0) {
    ASSIGN_OR_RETURN(std::unique_ptr<TpserveBackend> backend, TpserveBackend::Connect(server));
    return std::unique_ptr<LoadBackend>(std::move(backend));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<LlamaServerBackend> backend, LlamaServerBackend::Create(server));
  return std::unique_ptr<LoadBackend>(std::move(backend));
}

int Main(int argc, char** argv) {
  StatusOr<Flags> flags = ParseFlags(argc, argv);
  if (!flags.ok()) {
    if (!flags.status().message().empty()) std::cerr << "tpserve-bench: " << flags.status().message() << "\n";
    std::cerr << kUsage;
    return 1;
  }
  Flags& f = *flags;
  StatusOr<std::unique_ptr<LoadBackend>> backend = MakeBackend(f.server);
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
  f.run.backend = f.server.rfind(kTpserveScheme, 0) == 0 ? "tpserve" : "llama-server";
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
