#include "worker/llama_model.h"

#include <cmath>
#include <cstring>
#include <string>

#include "kernels/cpu/gelu_tanh_mul.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cpu/rms_norm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/silu_mul.h"
#include "worker/layer_weights.h"

namespace tpserve {
namespace {

int64_t VectorBytes(const std::vector<float>& v) { return static_cast<int64_t>(v.size() * sizeof(float)); }

// A replicated 1-D weight (a norm) as f32.
StatusOr<std::vector<float>> LoadVector(const WeightSource& weights, const std::string& name, int64_t size) {
  return LoadVectorSlice(weights, name, size, 0, size);
}

// The same, or empty when the architecture has no such weight (name "").
StatusOr<std::vector<float>> LoadOptionalVector(const WeightSource& weights, const std::string& name, int64_t size) {
  if (name.empty()) return std::vector<float>();
  return LoadVector(weights, name, size);
}

template <typename T>
void Grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

// Element-wise work over token rows of row_elems values: on the pool's threads when there is enough of it
// (prefill), inline otherwise (a decode step's rows are too short to pay for the hand-off). Each row's
// values are the same either way.
template <class Fn>
void ForTokenRows(ThreadPool* pool, int64_t num_tokens, int64_t row_elems, const Fn& fn) {
  constexpr int64_t kMinParallelElems = 1 << 14;
  if (num_tokens < 2 || num_tokens * row_elems < kMinParallelElems) {
    fn(int64_t{0}, num_tokens);
  } else {
    pool->ParallelFor(num_tokens, fn);
  }
}

}  // namespace

StatusOr<LlamaModel::Layer> LlamaModel::LoadLayer(const ModelConfig& config, const WeightSource& weights,
                                                  const ShardPlan& shard, int l, bool merge_column_parallel) {
  const LayerWeights plan = PlanLayerWeights(config, shard, l);
  const int64_t hidden = config.hidden_size;
  Layer layer;
  ASSIGN_OR_RETURN(layer.attn_norm, LoadVector(weights, plan.attn_norm, hidden));
  ASSIGN_OR_RETURN(layer.qkv, MergedColumnParallelLinear::Load(weights, plan.qkv, hidden, merge_column_parallel));
  ASSIGN_OR_RETURN(layer.q_norm, LoadOptionalVector(weights, plan.q_norm, config.head_dim));
  ASSIGN_OR_RETURN(layer.k_norm, LoadOptionalVector(weights, plan.k_norm, config.head_dim));
  ASSIGN_OR_RETURN(layer.o, RowParallelLinear::Load(weights, plan.attn_output, hidden,
                                                    int64_t{config.num_heads} * config.head_dim, shard.q_row_begin(),
                                                    shard.q_row_end()));
  ASSIGN_OR_RETURN(layer.post_attn_norm, LoadOptionalVector(weights, plan.post_attn_norm, hidden));
  ASSIGN_OR_RETURN(layer.ffn_norm, LoadVector(weights, plan.ffn_norm, hidden));
  ASSIGN_OR_RETURN(layer.gate_up,
                   MergedColumnParallelLinear::Load(weights, plan.gate_up, hidden, merge_column_parallel));
  ASSIGN_OR_RETURN(layer.down, RowParallelLinear::Load(weights, plan.ffn_down, hidden, config.ffn_size,
                                                       shard.ffn_begin, shard.ffn_end));
  ASSIGN_OR_RETURN(layer.post_ffn_norm, LoadOptionalVector(weights, plan.post_ffn_norm, hidden));
  layer.inv_freq = plan.inv_freq;
  layer.sliding_window = plan.sliding_window;
  return layer;
}

StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::Load(const ModelConfig& config, const WeightSource& weights,
                                                       const ShardPlan& shard, bool merge_column_parallel) {
  RETURN_IF_ERROR(config.Validate());
  std::unique_ptr<LlamaModel> model(new LlamaModel(config, shard));
  const int64_t hidden = config.hidden_size;
  ASSIGN_OR_RETURN(model->embedding_, VocabParallelEmbedding::Load(weights, "token_embd.weight", config.vocab_size,
                                                                   hidden, shard.vocab_begin, shard.vocab_end));
  for (int l = 0; l < config.num_layers; ++l) {
    ASSIGN_OR_RETURN(Layer layer, LoadLayer(config, weights, shard, l, merge_column_parallel));
    model->layers_.push_back(std::move(layer));
  }
  ASSIGN_OR_RETURN(model->output_norm_, LoadVector(weights, "output_norm.weight", hidden));
  if (weights.Find("output.weight") != nullptr) {
    ASSIGN_OR_RETURN(model->lm_head_, ParallelLmHead::Load(weights, "output.weight", config.vocab_size, hidden,
                                                           shard.vocab_begin, shard.vocab_end));
  } else {
    model->lm_head_ = ParallelLmHead::Tied(model->embedding_);
    model->lm_head_shares_embedding_ = true;
  }
  return model;
}

int64_t LlamaModel::weight_bytes() const {
  int64_t bytes = embedding_.bytes() + static_cast<int64_t>(output_norm_.size() * sizeof(float));
  if (!lm_head_shares_embedding_) bytes += lm_head_.bytes();
  for (const Layer& layer : layers_) {
    bytes += layer.qkv.bytes() + layer.o.bytes() + layer.gate_up.bytes() + layer.down.bytes();
    for (const std::vector<float>* norm : {&layer.attn_norm, &layer.q_norm, &layer.k_norm, &layer.post_attn_norm,
                                           &layer.ffn_norm, &layer.post_ffn_norm}) {
      bytes += VectorBytes(*norm);
    }
  }
  return bytes;
}

Status LlamaModel::Forward(const ForwardBatch& batch, const std::vector<LayerKvCache>& kv_caches, float* logits,
                           ThreadPool* pool, Communicator& comm) {
  CHECK_EQ(kv_caches.size(), layers_.size());
  const int64_t num_tokens = batch.num_tokens;
  const int64_t hidden = config_.hidden_size;
  const int64_t head_dim = config_.head_dim;
  Grow(x_, num_tokens * hidden);
  Grow(h_, num_tokens * hidden);
  Grow(q_, num_tokens * shard_.num_heads() * head_dim);
  Grow(k_, num_tokens * shard_.num_kv_heads() * head_dim);
  Grow(v_, num_tokens * shard_.num_kv_heads() * head_dim);
  Grow(attn_, num_tokens * shard_.num_heads() * head_dim);
  Grow(gate_, num_tokens * shard_.ffn_shard());
  Grow(up_, num_tokens * shard_.ffn_shard());

  RETURN_IF_ERROR(embedding_.Forward(batch.token_ids, num_tokens, x_.data(), comm));
  if (config_.arch().scale_embedding) {
    const float scale = std::sqrt(static_cast<float>(hidden));
    for (int64_t i = 0; i < num_tokens * hidden; ++i) x_[i] *= scale;
  }
  rope_freq_ = nullptr;  // new positions
  for (size_t l = 0; l < layers_.size(); ++l) {
    RETURN_IF_ERROR(LayerForward(layers_[l], batch, kv_caches[l], pool, comm));
  }

  // Only the rows that need a token go through the final norm and the LM head.
  Grow(final_, batch.num_logit_rows * hidden);
  for (int64_t r = 0; r < batch.num_logit_rows; ++r) {
    const int64_t t = batch.logit_rows[r];
    CHECK(t >= 0 && t < num_tokens) << t;
    std::memcpy(final_.data() + r * hidden, x_.data() + t * hidden, hidden * sizeof(float));
  }
  RmsNorm(final_.data(), output_norm_.data(), batch.num_logit_rows, hidden, config_.rms_eps, final_.data());
  lm_head_.Forward(final_.data(), batch.num_logit_rows, logits, pool);
  return OkStatus();
}

Status LlamaModel::LayerForward(const Layer& layer, const ForwardBatch& batch, const LayerKvCache& cache,
                                ThreadPool* pool, Communicator& comm) {
  const int64_t num_tokens = batch.num_tokens;
  const int64_t hidden = config_.hidden_size;
  const int64_t head_dim = config_.head_dim;
  const int64_t num_heads = shard_.num_heads();
  const int64_t num_kv_heads = shard_.num_kv_heads();

  // Attention block.
  ForTokenRows(pool, num_tokens, hidden, [&](int64_t begin, int64_t end) {
    RmsNorm(x_.data() + begin * hidden, layer.attn_norm.data(), end - begin, hidden, config_.rms_eps, h_.data() + begin * hidden);
  });
  float* const qkv_out[] = {q_.data(), k_.data(), v_.data()};
  layer.qkv.Forward(h_.data(), num_tokens, qkv_out, pool);
  // The angles once per step for all the layers with these frequencies (most models: every layer).
  const int64_t half = head_dim / 2;
  if (rope_freq_ == nullptr || *rope_freq_ != layer.inv_freq) {
    Grow(rope_cos_, num_tokens * half);
    Grow(rope_sin_, num_tokens * half);
    ForTokenRows(pool, num_tokens, 64 * half, [&](int64_t begin, int64_t end) {  // ~64 flops a sin and cos
      RopeAngles(batch.positions + begin, end - begin, layer.inv_freq.data(), half, rope_cos_.data() + begin * half,
                 rope_sin_.data() + begin * half);
    });
    rope_freq_ = &layer.inv_freq;
  }
  // Per token: the Q/K norms, RoPE and the KV write (each token its own cache slot).
  const int32_t* slots = batch.slot_mapping + cache.group * num_tokens;
  const int64_t q_elems = num_heads * head_dim, kv_elems = num_kv_heads * head_dim;
  ForTokenRows(pool, num_tokens, q_elems + 2 * kv_elems, [&](int64_t begin, int64_t end) {
    float* q = q_.data() + begin * q_elems;
    float* k = k_.data() + begin * kv_elems;
    const int64_t n = end - begin;
    if (!layer.q_norm.empty()) {  // every head its own row of D
      RmsNorm(q, layer.q_norm.data(), n * num_heads, head_dim, config_.rms_eps, q);
      RmsNorm(k, layer.k_norm.data(), n * num_kv_heads, head_dim, config_.rms_eps, k);
    }
    const float* cos_t = rope_cos_.data() + begin * half;
    const float* sin_t = rope_sin_.data() + begin * half;
    RotateHeads(q, n, num_heads, head_dim, cos_t, sin_t, config_.rope_layout);
    RotateHeads(k, n, num_kv_heads, head_dim, cos_t, sin_t, config_.rope_layout);
    WriteKvCache(k, v_.data() + begin * kv_elems, slots + begin, n, num_kv_heads, head_dim, cache.k, cache.v,
                 cache.dtype);
  });

  PagedAttentionArgs args;
  args.q = q_.data();
  args.k_cache = cache.k;
  args.v_cache = cache.v;
  args.token_seq = batch.token_seq;
  args.positions = batch.positions;
  args.block_tables = batch.block_tables + cache.group * batch.num_seqs * batch.max_blocks_per_seq;
  args.kv_head_of_q = shard_.kv_head_of_q.data();
  args.max_blocks_per_seq = batch.max_blocks_per_seq;
  args.num_tokens = num_tokens;
  args.num_heads = num_heads;
  args.num_kv_heads = num_kv_heads;
  args.head_dim = head_dim;
  args.block_size = batch.block_size;
  args.sliding_window = layer.sliding_window;
  args.scale = config_.AttentionScale();
  args.kv_dtype = cache.dtype;
  args.out = attn_.data();
  PagedAttention(args, pool);

  RETURN_IF_ERROR(layer.o.Forward(attn_.data(), num_tokens, h_.data(), pool, comm));

  // The residual, then the feed-forward block's norm, token by token (its row still in L1 for the norm).
  ForTokenRows(pool, num_tokens, hidden, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      AddResidual(layer.post_attn_norm, t, t + 1);
      RmsNorm(x_.data() + t * hidden, layer.ffn_norm.data(), 1, hidden, config_.rms_eps, h_.data() + t * hidden);
    }
  });
  float* const gate_up_out[] = {gate_.data(), up_.data()};
  layer.gate_up.Forward(h_.data(), num_tokens, gate_up_out, pool);
  const int64_t ffn = shard_.ffn_shard();
  ForTokenRows(pool, num_tokens, ffn, [&](int64_t begin, int64_t end) {
    float* gate = gate_.data() + begin * ffn;
    const float* up = up_.data() + begin * ffn;
    switch (config_.arch().activation) {
      case Activation::kSilu: SiluMul(gate, up, (end - begin) * ffn, gate); break;
      case Activation::kGeluTanh: GeluTanhMul(gate, up, (end - begin) * ffn, gate); break;
    }
  });
  RETURN_IF_ERROR(layer.down.Forward(gate_.data(), num_tokens, h_.data(), pool, comm));
  ForTokenRows(pool, num_tokens, hidden,
               [&](int64_t begin, int64_t end) { AddResidual(layer.post_ffn_norm, begin, end); });
  return OkStatus();
}

void LlamaModel::AddResidual(const std::vector<float>& post_norm, int64_t begin, int64_t end) {
  const int64_t hidden = config_.hidden_size;
  float* h = h_.data() + begin * hidden;
  if (!post_norm.empty()) RmsNorm(h, post_norm.data(), end - begin, hidden, config_.rms_eps, h);
  float* x = x_.data() + begin * hidden;
  for (int64_t i = 0; i < (end - begin) * hidden; ++i) x[i] += h[i];
}

}  // namespace tpserve
