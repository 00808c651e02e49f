// llama_logits: llama.cpp's teacher-forced logits along one id sequence, the peer of
// tests/testing/teacher_logits_main.cc (bench/logits_vs_reference.py compares the two and the float64
// reference). Loads a GGUF with libllama on the CPU, evaluates the whole sequence in one batch (one
// ubatch) with logits requested at every position, and writes them as float32 [T][V], little-endian, no
// header. Built by bench/peers/build-llama-logits.sh; not part of tpserve's CMake build.
//   llama_logits MODEL IDS OUT [--threads N] [--kv f32|f16|bf16|q8_0]
// IDS is "1,2,3". The KV cache is f32 by default (llama.cpp's own default is f16, which rounds K and V
// to 11 bits); --kv f16 measures llama.cpp as it serves. Flash attention is off (on for q8_0, whose
// quantised V cache needs it).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "llama.h"

static std::vector<llama_token> ParseIds(const char* text) {
  std::vector<llama_token> ids;
  for (const char* p = text; *p;) {
    char* end = nullptr;
    ids.push_back(static_cast<llama_token>(std::strtol(p, &end, 10)));
    if (end == p) return {};
    p = *end == ',' ? end + 1 : end;
  }
  return ids;
}

static void QuietLog(ggml_log_level level, const char* text, void*) {
  if (level == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}

// -ctk/-ctv's names: f32 (the default here), f16, bf16, q8_0.
static ggml_type KvType(const char* name) {
  if (std::strcmp(name, "f16") == 0) return GGML_TYPE_F16;
  if (std::strcmp(name, "bf16") == 0) return GGML_TYPE_BF16;
  if (std::strcmp(name, "q8_0") == 0) return GGML_TYPE_Q8_0;
  return GGML_TYPE_F32;
}

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s MODEL IDS OUT [--threads N] [--kv f32|f16|bf16|q8_0]\n", argv[0]);
    return 2;
  }
  int num_threads = 2;
  ggml_type kv_type = GGML_TYPE_F32;
  for (int i = 4; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--threads") == 0) num_threads = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--kv") == 0) kv_type = KvType(argv[i + 1]);
  }
  const std::vector<llama_token> ids = ParseIds(argv[2]);
  if (ids.empty()) {
    std::fprintf(stderr, "llama_logits: bad ids %s\n", argv[2]);
    return 2;
  }
  const uint32_t num_tokens = static_cast<uint32_t>(ids.size());

  llama_log_set(QuietLog, nullptr);
  llama_backend_init();
  llama_model_params model_params = llama_model_default_params();
  model_params.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(argv[1], model_params);
  if (!model) {
    std::fprintf(stderr, "llama_logits: cannot load %s\n", argv[1]);
    return 1;
  }
  llama_context_params ctx_params = llama_context_default_params();
  ctx_params.n_ctx = num_tokens;
  ctx_params.n_batch = num_tokens;
  ctx_params.n_ubatch = num_tokens;  // one ubatch: the whole sequence in one graph
  ctx_params.n_seq_max = 1;
  ctx_params.n_threads = num_threads;
  ctx_params.n_threads_batch = num_threads;
  ctx_params.type_k = kv_type;
  ctx_params.type_v = kv_type;
  // A quantised V cache needs llama.cpp's flash attention; the float caches are read without it.
  ctx_params.flash_attn_type = kv_type == GGML_TYPE_Q8_0 ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
  ctx_params.no_perf = true;
  llama_context* ctx = llama_init_from_model(model, ctx_params);
  if (!ctx) {
    std::fprintf(stderr, "llama_logits: cannot create a context\n");
    return 1;
  }

  llama_batch batch = llama_batch_init(static_cast<int32_t>(num_tokens), 0, 1);
  for (uint32_t i = 0; i < num_tokens; ++i) {
    batch.token[i] = ids[i];
    batch.pos[i] = static_cast<llama_pos>(i);
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = 1;
  }
  batch.n_tokens = static_cast<int32_t>(num_tokens);
  if (const int rc = llama_decode(ctx, batch); rc != 0) {
    std::fprintf(stderr, "llama_logits: llama_decode returned %d\n", rc);
    return 1;
  }

  const int32_t vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  FILE* out = std::fopen(argv[3], "wb");
  if (!out) {
    std::fprintf(stderr, "llama_logits: cannot open %s\n", argv[3]);
    return 1;
  }
  for (uint32_t i = 0; i < num_tokens; ++i) {
    const float* row = llama_get_logits_ith(ctx, static_cast<int32_t>(i));
    if (!row || std::fwrite(row, sizeof(float), vocab, out) != static_cast<size_t>(vocab)) {
      std::fprintf(stderr, "llama_logits: no logits at position %u\n", i);
      std::fclose(out);
      return 1;
    }
  }
  std::fclose(out);
  llama_batch_free(batch);
  llama_free(ctx);
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
