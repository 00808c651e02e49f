// tpserve-mkmodel: writes a synthetic model (seeded random weights) of any supported architecture as
// GGUF, or a llama one as a Hugging Face safetensors directory. Example:
//   tpserve-mkmodel --out /tmp/m.gguf --layers 2 --hidden 576 --heads 9 --kv-heads 3 --ffn 1536
//                   --vocab 1000 --type q8_0 --seed 1
//   tpserve-mkmodel --preset llama3-8b --type q4_0 --out /tmp/llama3-8b.gguf
//   tpserve-mkmodel --preset tiny --format safetensors --out /tmp/tiny-hf
//   tpserve-mkmodel --preset gemma3-270m --type q8_0 --out /tmp/gemma3.gguf
//   tpserve-mkmodel --preset tiny --arch qwen2 --out /tmp/qwen2-tiny.gguf
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "common/command_line.h"
#include "model/architecture.h"
#include "model/synthetic_model.h"
#include "model/type_mix.h"

namespace tpserve {
namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "tpserve-mkmodel: %s\nRun with --help for the flags.\n", message.c_str());
  return 2;
}

// The shape flags: each overrides its field of the preset when given.
struct ShapeFlag {
  const char* name;
  int ModelConfig::*field;
  const char* help;
  int value = 0;
  CLI::Option* option = nullptr;
};

int Main(int argc, char** argv) {
  CommandLine app("tpserve-mkmodel: writes a synthetic model (seeded random weights) of any supported architecture "
               "as GGUF, or a llama one as a Hugging Face safetensors directory.",
               "tpserve-mkmodel");
  std::string out, format = "gguf", preset_name = "tiny", type_name, arch_name;
  int sliding_window = 0;
  uint64_t seed = 0;
  float rope_theta = 0, rms_eps = 0;
  int64_t shard_mb = 0;
  app.add_option("--out", out, "the .gguf file or the directory to write")->required();
  app.add_option("--format", format, "gguf or safetensors")->check(CLI::IsMember({"gguf", "safetensors"}))
      ->capture_default_str();
  app.add_option("--preset", preset_name, SyntheticPresetNames() + " (the flags below override its fields)")
      ->capture_default_str();
  CLI::Option* arch_option =
      app.add_option("--arch", arch_name, SupportedArchitectures() + " (default: the preset's)");
  CLI::Option* window_option = app.add_option("--sliding-window", sliding_window,
                                              "attention window of the sliding layers (0: none)")
                                   ->check(CLI::NonNegativeNumber);
  app.add_option("--type", type_name, "f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q2_k q3_k q4_k q5_k q6_k, or the "
                 "mixes q4_k_m q5_k_m (norms are always f32; a K-quant falls back to q5_0/q5_1/q8_0/q4_0 on "
                 "matrices whose rows are not multiples of 256, as llama-quantize does; safetensors stores "
                 "quantised weights as their dequantised f32 values)");
  CLI::Option* seed_option = app.add_option("--seed", seed, "weights seed");
  std::vector<ShapeFlag> shape = {
      {"--layers", &ModelConfig::num_layers, "layers"},       {"--hidden", &ModelConfig::hidden_size, "hidden size"},
      {"--heads", &ModelConfig::num_heads, "query heads"},    {"--kv-heads", &ModelConfig::num_kv_heads, "KV heads"},
      {"--head-dim", &ModelConfig::head_dim, "head dim (default hidden / heads)"},
      {"--ffn", &ModelConfig::ffn_size, "FFN size"},          {"--vocab", &ModelConfig::vocab_size, "vocabulary"},
      {"--context", &ModelConfig::context_length, "context length"}};
  for (ShapeFlag& f : shape) f.option = app.add_option(f.name, f.value, f.help)->check(CLI::Range(1, 1 << 30));
  CLI::Option* rope_option = app.add_option("--rope-theta", rope_theta, "RoPE base");
  CLI::Option* eps_option = app.add_option("--rms-eps", rms_eps, "RMSNorm epsilon");
  bool is_tied = false, is_untied = false;
  CLI::Option* tied = app.add_flag("--tied", is_tied, "tie the LM head to the embedding");
  app.add_flag("--untied", is_untied, "a separate LM head")->excludes(tied);
  CLI::Option* shard_option = app.add_option("--shard-mb", shard_mb, "safetensors: largest shard in MiB")
                                  ->check(CLI::PositiveNumber);
  if (std::optional<int> exit_code = app.ParseOrExitCode(argc, argv)) return *exit_code;

  SyntheticModelOptions o;
  StatusOr<ModelConfig> preset = SyntheticPreset(preset_name);
  if (!preset.ok()) return Fail(preset.status().message());
  o.config = *preset;
  TypeMix mix;
  if (!type_name.empty() && !TypeMix::Parse(type_name, &mix)) return Fail("unknown --type " + type_name);
  o.type = mix.base;
  o.medium_mix = mix.medium;
  ModelConfig& c = o.config;
  if (arch_option->count() > 0) {
    if (FindArchitecture(arch_name) == nullptr) {
      return Fail("unknown --arch " + arch_name + " (" + SupportedArchitectures() + ")");
    }
    c.architecture = arch_name;
  }
  if (window_option->count() > 0) c.sliding_window = sliding_window;
  for (const ShapeFlag& f : shape) {
    if (f.option->count() > 0) c.*f.field = f.value;
  }
  // A new hidden size or head count implies head_dim = hidden / heads unless --head-dim says otherwise.
  if (shape[4].option->count() == 0 && (shape[1].option->count() > 0 || shape[2].option->count() > 0)) {
    c.head_dim = c.num_heads > 0 ? c.hidden_size / c.num_heads : 0;
  }
  if (seed_option->count() > 0) o.seed = seed;
  if (rope_option->count() > 0) c.rope_theta = rope_theta;
  if (eps_option->count() > 0) c.rms_eps = rms_eps;
  if (is_tied) c.tied_embeddings = true;
  if (is_untied) c.tied_embeddings = false;
  if (shard_option->count() > 0) o.max_shard_bytes = static_cast<uint64_t>(shard_mb) << 20;

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
  std::printf("wrote %s (%s, %s, %s): L=%d hidden=%d heads=%d/%d D=%d ffn=%d V=%d, %.3f B params, %.1f MB in %.2f s "
              "(%.0f MB/s)\n",
              out.c_str(), c.architecture.c_str(), format.c_str(), mix.Name().c_str(), c.num_layers, c.hidden_size,
              c.num_heads, c.num_kv_heads, c.head_dim, c.ffn_size, c.vocab_size, params / 1e9, bytes / 1e6, secs,
              bytes / 1e6 / secs);
  return 0;
}

}  // namespace
}  // namespace tpserve

int main(int argc, char** argv) { return tpserve::Main(argc, argv); }
