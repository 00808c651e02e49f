// tpserve-bench-load: how long opening a model and loading every tensor takes, and its peak
// resident memory, beside the file size and the time to read the file once with plain read()
// (the `cat file > /dev/null` peer). Cache dropping needs root privileges we do not assume, so
// both numbers are warm-cache: the file is read once before anything is timed. Three load paths run:
// the default (mapped where the page cache holds the file in 2 MiB pages, else read), --mmap's (views of the
// mapped file, each populated as it is handed out, so its pages count in the peak RSS as a loaded model's
// do) and --no-mmap's (pread into 2 MiB pages).
//
// Models: the SmolLM2 GGUF (if present) and a synthetic Llama-3.2-1B-shape model written to /tmp on
// the fly (and deleted afterwards). Each measurement runs in a forked child so that ru_maxrss is
// that load's own peak.
//
//   tpserve-bench-load [--model PATH]... [--no-synthetic] [--type q8_0] [--layers N] [--keep]
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <filesystem>
#include <string>
#include <vector>

#include "common/command_line.h"
#include "model/model_file.h"
#include "model/synthetic_model.h"

namespace tpserve {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

uint64_t PathBytes(const std::string& path) {
  if (!std::filesystem::is_directory(path)) return std::filesystem::file_size(path);
  uint64_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(path)) n += e.file_size();
  return n;
}

// Reads every file of `path` once with read() into a 1 MiB buffer; seconds.
double PlainRead(const std::string& path) {
  std::vector<std::string> files;
  if (std::filesystem::is_directory(path)) {
    for (const auto& e : std::filesystem::directory_iterator(path)) files.push_back(e.path());
  } else {
    files.push_back(path);
  }
  std::vector<char> buf(1 << 20);
  const double start = Now();
  for (const std::string& f : files) {
    const int fd = ::open(f.c_str(), O_RDONLY);
    if (fd < 0) continue;
    while (::read(fd, buf.data(), buf.size()) > 0) {
    }
    ::close(fd);
  }
  return Now() - start;
}

struct LoadResult {
  double open_s = 0;   // ModelFile::Open: header, config, tensor checks
  double read_s = 0;   // plus reading every tensor into host buffers
  long max_rss_kb = 0;
  int ok = 0;
};

// In a child process: open the model and Read() every tensor (what a TP=1 rank does).
LoadResult MeasureLoad(const std::string& path, WeightLoading loading) {
  int fds[2];
  if (::pipe(fds) != 0) return {};
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    LoadResult r;
    const double t0 = Now();
    StatusOr<std::unique_ptr<ModelFile>> m = ModelFile::Open(path, loading);
    if (m.ok()) {
      r.open_s = Now() - t0;
      std::vector<HostTensor> held;  // keep everything resident, as a loaded model does
      r.ok = 1;
      for (const std::string& name : (*m)->weights().Names()) {
        StatusOr<HostTensor> t = (*m)->weights().Read(name);
        if (!t.ok()) {
          std::fprintf(stderr, "%s\n", t.status().ToString().c_str());
          r.ok = 0;
          break;
        }
        held.push_back(std::move(t).value());
      }
      r.read_s = Now() - t0;
    } else {
      std::fprintf(stderr, "%s\n", m.status().ToString().c_str());
    }
    struct rusage ru;
    ::getrusage(RUSAGE_SELF, &ru);
    r.max_rss_kb = ru.ru_maxrss;
    if (::write(fds[1], &r, sizeof(r)) != sizeof(r)) _exit(1);
    _exit(0);
  }
  ::close(fds[1]);
  LoadResult r;
  if (::read(fds[0], &r, sizeof(r)) != sizeof(r)) r = {};
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return r;
}

void Report(const std::string& label, const std::string& path) {
  const double mb = PathBytes(path) / 1e6;
  PlainRead(path);  // warm the page cache
  const double plain = PlainRead(path);
  std::printf("%s (%s)\n", label.c_str(), path.c_str());
  for (WeightLoading loading : {WeightLoading::kAuto, WeightLoading::kMap, WeightLoading::kRead}) {
    const LoadResult r = MeasureLoad(path, loading);
    const std::string how = loading == WeightLoading::kAuto ? "default (mapped in 2 MiB pages, the file read again if need be, else read)"
                            : loading == WeightLoading::kMap ? "--mmap (mapped)"
                                                             : "--no-mmap (pread into 2 MiB pages)";
    if (!r.ok) {
      std::printf("  %s: FAILED to load\n", how.c_str());
      continue;
    }
    std::printf("  %s: open (header, config, tensor checks) %.3f s\n", how.c_str(), r.open_s);
    std::printf("    loaded %.1f MB in %.3f s (%.2f GB/s) vs plain read %.3f s (%.2f GB/s): ratio %.2f (target 1.5)\n",
                mb, r.read_s, mb / 1e3 / r.read_s, plain, mb / 1e3 / plain, r.read_s / plain);
    std::printf("    peak RSS %.1f MB = %.2f x file size (target 1.05; weights resident where the model uses them)\n",
                r.max_rss_kb / 1e3, r.max_rss_kb / 1e3 / mb);
  }
}

int Main(int argc, char** argv) {
  std::vector<std::string> models;
  bool synthetic = true, keep = false;
  std::string type = "q8_0";
  int layers = 0;
  CommandLine app("tpserve-bench-load: model load time and peak memory against a plain read() of the same bytes "
               "(warm page cache).",
               "tpserve-bench-load");
  app.add_option("--model", models, "a model to load (repeatable; default: the SmolLM2 GGUF when fetched)");
  bool no_synthetic = false;
  app.add_flag("--no-synthetic", no_synthetic, "skip the synthetic llama-1b shape");
  app.add_option("--type", type, "the synthetic model's weight type")->capture_default_str();
  app.add_option("--layers", layers, "the synthetic model's layers (0: llama-1b's)")->check(CLI::Range(0, 1024));
  app.add_flag("--keep", keep, "keep the synthetic model file");
  if (std::optional<int> exit_code = app.ParseOrExitCode(argc, argv)) return *exit_code;
  synthetic = !no_synthetic;
  if (models.empty() && std::filesystem::exists("models/SmolLM2-135M-Instruct.Q4_1.gguf")) {
    models.push_back("models/SmolLM2-135M-Instruct.Q4_1.gguf");
  }
  std::printf("model load benchmark (warm page cache; peer: plain read() of the same bytes)\n");
  for (const std::string& m : models) Report("model", m);

  if (synthetic) {
    SyntheticModelOptions o;
    o.config = *SyntheticPreset("llama-1b");
    if (layers > 0) o.config.num_layers = layers;
    if (!ParseDType(type, &o.type)) {
      std::fprintf(stderr, "unknown --type %s\n", type.c_str());
      return 2;
    }
    const std::string path = "/tmp/tpserve-bench-load-llama-1b-" + type + ".gguf";
    const double t0 = Now();
    Status st = WriteSyntheticGguf(o, path);
    if (!st.ok()) {
      std::fprintf(stderr, "%s\n", st.ToString().c_str());
      return 1;
    }
    const double write_s = Now() - t0;
    std::printf("synthetic llama-1b shape (%d layers, %s) written: %.1f MB in %.2f s (%.0f MB/s, generation + write)\n",
                o.config.num_layers, type.c_str(), PathBytes(path) / 1e6, write_s, PathBytes(path) / 1e6 / write_s);
    Report("synthetic llama-1b", path);
    if (!keep) std::filesystem::remove(path);
  }
  return 0;
}

}  // namespace
}  // namespace tpserve

int main(int argc, char** argv) { return tpserve::Main(argc, argv); }
