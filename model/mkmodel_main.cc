// tpserve-mkmodel: writes a synthetic Llama model (seeded random weights) as GGUF or as a Hugging
// Face safetensors directory. Example:
//   tpserve-mkmodel --out /tmp/m.gguf --layers 2 --hidden 576 --heads 9 --kv-heads 3 --ffn 1536
//                   --vocab 1000 --type q8_0 --seed 1
//   tpserve-mkmodel --preset llama3-8b --type q4_0 --out /tmp/llama3-8b.gguf
//   tpserve-mkmodel --preset tiny --format safetensors --out /tmp/tiny-hf
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

#include "model/synthetic_model.h"

namespace tpserve {
namespace {

constexpr char kUsage[] =
    "usage: tpserve-mkmodel --out PATH [--format gguf|safetensors] [--preset NAME] [--type T] [--seed N]\n"
    "         [--layers N] [--hidden N] [--heads N] [--kv-heads N] [--head-dim N] [--ffn N] [--vocab N]\n"
    "         [--context N] [--rope-theta F] [--rms-eps F] [--tied | --untied] [--shard-mb N]\n"
    "  presets: llama2-7b llama3-8b smollm2-135m llama-1b tiny (flags after it override its fields)\n"
    "  types: f32 f16 bf16 q8_0 q4_0 q4_1 (norms are always f32; safetensors stores quantised\n"
    "         weights as their dequantised f32 values)\n";

int Fail(const std::string& message) {
  std::fprintf(stderr, "tpserve-mkmodel: %s\n%s", message.c_str(), kUsage);
  return 2;
}

bool ParseInt(const std::string& s, int64_t* out) {
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0') return false;
  *out = v;
  return true;
}

int Main(int argc, char** argv) {
  std::map<std::string, std::string> flags;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a == "--tied" || a == "--untied") {
      flags.insert_or_assign(std::string(argv[i] + 2), std::string(1, '1'));
      continue;
    }
    if (a.rfind("--", 0) != 0 || i + 1 >= argc) return Fail("bad argument " + a);
    flags.insert_or_assign(std::string(argv[i] + 2), std::string(argv[i + 1]));
    ++i;
  }
  auto take = [&flags](const std::string& k, std::string* v) {
    auto it = flags.find(k);
    if (it == flags.end()) return false;
    *v = it->second;
    flags.erase(it);
    return true;
  };

  SyntheticModelOptions o;
  std::string s;
  if (!take("preset", &s)) s = "tiny";
  StatusOr<ModelConfig> preset = SyntheticPreset(s);
  if (!preset.ok()) return Fail(preset.status().message());
  o.config = *preset;

  std::string out, format = "gguf";
  if (!take("out", &out)) return Fail("--out is required");
  take("format", &format);
  if (format != "gguf" && format != "safetensors") return Fail("--format must be gguf or safetensors");
  if (take("type", &s) && !ParseDType(s, &o.type)) return Fail("unknown --type " + s);

  bool head_dim_given = false;
  struct IntFlag {
    const char* name;
    int* field;
  };
  ModelConfig& c = o.config;
  for (IntFlag f : {IntFlag{"layers", &c.num_layers}, {"hidden", &c.hidden_size}, {"heads", &c.num_heads},
                    {"kv-heads", &c.num_kv_heads}, {"head-dim", &c.head_dim}, {"ffn", &c.ffn_size},
                    {"vocab", &c.vocab_size}, {"context", &c.context_length}}) {
    if (!take(f.name, &s)) continue;
    int64_t v = 0;
    if (!ParseInt(s, &v) || v <= 0 || v > (int64_t{1} << 30)) return Fail(std::string("bad --") + f.name);
    *f.field = static_cast<int>(v);
    if (std::string(f.name) == "head-dim") head_dim_given = true;
  }
  if (!head_dim_given) c.head_dim = c.num_heads > 0 ? c.hidden_size / c.num_heads : 0;
  if (take("seed", &s)) {
    int64_t v = 0;
    if (!ParseInt(s, &v)) return Fail("bad --seed");
    o.seed = static_cast<uint64_t>(v);
  }
  if (take("rope-theta", &s)) c.rope_theta = std::strtof(s.c_str(), nullptr);
  if (take("rms-eps", &s)) c.rms_eps = std::strtof(s.c_str(), nullptr);
  if (take("tied", &s)) c.tied_embeddings = true;
  if (take("untied", &s)) c.tied_embeddings = false;
  if (take("shard-mb", &s)) {
    int64_t v = 0;
    if (!ParseInt(s, &v) || v <= 0) return Fail("bad --shard-mb");
    o.max_shard_bytes = static_cast<uint64_t>(v) << 20;
  }
  if (!flags.empty()) return Fail("unknown flag --" + flags.begin()->first);

  const auto start = std::chrono::steady_clock::now();
  Status st = format == "gguf" ? WriteSyntheticGguf(o, out) : WriteSyntheticHfDir(o, out);
  if (!st.ok()) {
    std::fprintf(stderr, "tpserve-mkmodel: %s\n", st.ToString().c_str());
    return 1;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  uint64_t bytes = 0;
  if (std::filesystem::is_directory(out)) {
    for (const auto& e : std::filesystem::directory_iterator(out)) bytes += e.file_size();
  } else {
    bytes = std::filesystem::file_size(out);
  }
  const int64_t h = c.hidden_size, kv = int64_t{c.num_kv_heads} * c.head_dim, q = int64_t{c.num_heads} * c.head_dim;
  const int64_t per_layer = h * q * 2 + h * kv * 2 + 3 * h * c.ffn_size + 2 * h;
  const int64_t params = c.num_layers * per_layer + int64_t{c.vocab_size} * h * (c.tied_embeddings ? 1 : 2) + h;
  std::printf("wrote %s (%s, %s): L=%d hidden=%d heads=%d/%d D=%d ffn=%d V=%d, %.3f B params, %.1f MB in %.2f s "
              "(%.0f MB/s)\n",
              out.c_str(), format.c_str(), DTypeName(o.type), c.num_layers, c.hidden_size, c.num_heads,
              c.num_kv_heads, c.head_dim, c.ffn_size, c.vocab_size, params / 1e9, bytes / 1e6, secs,
              bytes / 1e6 / secs);
  return 0;
}

}  // namespace
}  // namespace tpserve

int main(int argc, char** argv) { return tpserve::Main(argc, argv); }
