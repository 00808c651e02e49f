#include "tests/testing/reference_llama.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace tpserve::testing {
namespace {

StatusOr<std::vector<double>> ReadF64(const WeightSource& weights, const std::string& name) {
  ASSIGN_OR_RETURN(HostTensor tensor, weights.Read(name));
  std::vector<float> f = tensor.ToF32();
  return std::vector<double>(f.begin(), f.end());
}

// out[r] = sum_c w[r, c] * x[c]; w: [rows, cols]
void MatVec(const std::vector<double>& w, const double* x, int64_t rows, int64_t cols, double* out) {
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (int64_t c = 0; c < cols; ++c) sum += w[r * cols + c] * x[c];
    out[r] = sum;
  }
}

void Norm(const double* x, const std::vector<double>& weight, int64_t n, double eps, double* out) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const double inv = 1.0 / std::sqrt(ss / n + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * inv * weight[i];
}

// Rotates one head [D] at `pos`.
void Rotate(double* head, int64_t head_dim, int64_t pos, double theta, RopeLayout layout) {
  const int64_t half = head_dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    const double freq = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
    const double angle = static_cast<double>(pos) * freq;
    const int64_t a = layout == RopeLayout::kInterleaved ? 2 * i : i;
    const int64_t b = layout == RopeLayout::kInterleaved ? 2 * i + 1 : i + half;
    const double x0 = head[a], x1 = head[b];
    head[a] = x0 * std::cos(angle) - x1 * std::sin(angle);
    head[b] = x0 * std::sin(angle) + x1 * std::cos(angle);
  }
}

}  // namespace

StatusOr<ReferenceLlama> ReferenceLlama::Load(const ModelConfig& config, const WeightSource& weights) {
  CHECK(!config.rope_scaling.enabled && config.rope_scaling.linear_factor == 1) << "the reference has no RoPE scaling";
  const std::string& arch = config.architecture;
  CHECK(arch == "llama" || arch == "qwen2" || arch == "qwen3" || arch == "phi3" || arch == "gemma3") << arch;
  const bool is_gemma3 = arch == "gemma3";
  ReferenceLlama ref;
  ref.config_ = config;
  ref.gelu_ = is_gemma3;
  ref.embedding_scale_ = is_gemma3 ? std::sqrt(static_cast<double>(config.hidden_size)) : 1.0;
  const int64_t hidden = config.hidden_size;
  const int64_t q_rows = int64_t{config.num_heads} * config.head_dim;
  const int64_t kv_rows = int64_t{config.num_kv_heads} * config.head_dim;
  const int64_t ffn = config.ffn_size;
  ASSIGN_OR_RETURN(ref.embd_, ReadF64(weights, "token_embd.weight"));
  for (int l = 0; l < config.num_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    Layer layer;
    ASSIGN_OR_RETURN(layer.attn_norm, ReadF64(weights, p + "attn_norm.weight"));
    if (arch == "phi3") {  // [Q; K; V] rows in one tensor, [gate; up] in ffn_up
      ASSIGN_OR_RETURN(std::vector<double> qkv, ReadF64(weights, p + "attn_qkv.weight"));
      auto rows = [&](int64_t begin, int64_t n) {
        return std::vector<double>(qkv.begin() + begin * hidden, qkv.begin() + (begin + n) * hidden);
      };
      layer.wq = rows(0, q_rows);
      layer.wk = rows(q_rows, kv_rows);
      layer.wv = rows(q_rows + kv_rows, kv_rows);
      ASSIGN_OR_RETURN(std::vector<double> gate_up, ReadF64(weights, p + "ffn_up.weight"));
      layer.gate.assign(gate_up.begin(), gate_up.begin() + ffn * hidden);
      layer.up.assign(gate_up.begin() + ffn * hidden, gate_up.end());
    } else {
      ASSIGN_OR_RETURN(layer.wq, ReadF64(weights, p + "attn_q.weight"));
      ASSIGN_OR_RETURN(layer.wk, ReadF64(weights, p + "attn_k.weight"));
      ASSIGN_OR_RETURN(layer.wv, ReadF64(weights, p + "attn_v.weight"));
      ASSIGN_OR_RETURN(layer.gate, ReadF64(weights, p + "ffn_gate.weight"));
      ASSIGN_OR_RETURN(layer.up, ReadF64(weights, p + "ffn_up.weight"));
    }
    if (arch == "qwen2") {
      ASSIGN_OR_RETURN(layer.bq, ReadF64(weights, p + "attn_q.bias"));
      ASSIGN_OR_RETURN(layer.bk, ReadF64(weights, p + "attn_k.bias"));
      ASSIGN_OR_RETURN(layer.bv, ReadF64(weights, p + "attn_v.bias"));
    }
    if (arch == "qwen3" || is_gemma3) {
      ASSIGN_OR_RETURN(layer.q_norm, ReadF64(weights, p + "attn_q_norm.weight"));
      ASSIGN_OR_RETURN(layer.k_norm, ReadF64(weights, p + "attn_k_norm.weight"));
    }
    if (is_gemma3) {
      ASSIGN_OR_RETURN(layer.post_attn_norm, ReadF64(weights, p + "post_attention_norm.weight"));
      ASSIGN_OR_RETURN(layer.post_ffn_norm, ReadF64(weights, p + "post_ffw_norm.weight"));
    }
    ASSIGN_OR_RETURN(layer.wo, ReadF64(weights, p + "attn_output.weight"));
    ASSIGN_OR_RETURN(layer.ffn_norm, ReadF64(weights, p + "ffn_norm.weight"));
    ASSIGN_OR_RETURN(layer.down, ReadF64(weights, p + "ffn_down.weight"));
    // Gemma 3: every sixth layer (5, 11, ...) is global; the others slide, with the local RoPE base.
    const bool is_local = is_gemma3 && l % 6 != 5;
    layer.rope_theta = is_local && config.rope_theta_local > 0 ? config.rope_theta_local : config.rope_theta;
    layer.window = (!is_gemma3 || is_local) ? config.sliding_window : 0;
    ref.layers_.push_back(std::move(layer));
  }
  ASSIGN_OR_RETURN(ref.output_norm_, ReadF64(weights, "output_norm.weight"));
  if (weights.Find("output.weight") != nullptr) {
    ASSIGN_OR_RETURN(ref.output_, ReadF64(weights, "output.weight"));
  } else {
    ref.output_ = ref.embd_;
  }
  return ref;
}

std::vector<double> ReferenceLlama::Forward(const std::vector<int32_t>& tokens) const {
  const int64_t T = static_cast<int64_t>(tokens.size());
  const int64_t hidden = config_.hidden_size;
  const int64_t H = config_.num_heads;
  const int64_t Hkv = config_.num_kv_heads;
  const int64_t D = config_.head_dim;
  const int64_t F = config_.ffn_size;
  const int64_t V = config_.vocab_size;
  const double eps = config_.rms_eps;
  const double scale = config_.attention_scale > 0 ? config_.attention_scale : 1.0 / std::sqrt(static_cast<double>(D));

  std::vector<double> x(T * hidden);  // [T, hidden]
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t i = 0; i < hidden; ++i) x[t * hidden + i] = embd_[tokens[t] * hidden + i] * embedding_scale_;
  }
  std::vector<double> h(hidden), q(T * H * D), k(T * Hkv * D), v(T * Hkv * D), attn(H * D), out(hidden),
      gate(F), up(F), scores(T);
  auto add_bias = [](const std::vector<double>& bias, double* row) {
    for (size_t i = 0; i < bias.size(); ++i) row[i] += bias[i];
  };
  for (const Layer& layer : layers_) {
    for (int64_t t = 0; t < T; ++t) {
      Norm(&x[t * hidden], layer.attn_norm, hidden, eps, h.data());
      MatVec(layer.wq, h.data(), H * D, hidden, &q[t * H * D]);
      MatVec(layer.wk, h.data(), Hkv * D, hidden, &k[t * Hkv * D]);
      MatVec(layer.wv, h.data(), Hkv * D, hidden, &v[t * Hkv * D]);
      add_bias(layer.bq, &q[t * H * D]);
      add_bias(layer.bk, &k[t * Hkv * D]);
      add_bias(layer.bv, &v[t * Hkv * D]);
      for (int64_t hd = 0; hd < H; ++hd) {
        double* head = &q[(t * H + hd) * D];
        if (!layer.q_norm.empty()) Norm(head, layer.q_norm, D, eps, head);
        Rotate(head, D, t, layer.rope_theta, config_.rope_layout);
      }
      for (int64_t hd = 0; hd < Hkv; ++hd) {
        double* head = &k[(t * Hkv + hd) * D];
        if (!layer.k_norm.empty()) Norm(head, layer.k_norm, D, eps, head);
        Rotate(head, D, t, layer.rope_theta, config_.rope_layout);
      }
    }
    std::vector<double> x_next = x;
    for (int64_t t = 0; t < T; ++t) {
      const int64_t first = layer.window > 0 ? std::max<int64_t>(0, t - layer.window + 1) : 0;
      for (int64_t hd = 0; hd < H; ++hd) {
        const int64_t kvh = hd / (H / Hkv);
        double max_score = -1e300;
        for (int64_t j = first; j <= t; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += q[(t * H + hd) * D + d] * k[(j * Hkv + kvh) * D + d];
          scores[j] = dot * scale;
          max_score = std::max(max_score, scores[j]);
        }
        double denom = 0;
        for (int64_t j = first; j <= t; ++j) denom += std::exp(scores[j] - max_score);
        for (int64_t d = 0; d < D; ++d) {
          double acc = 0;
          for (int64_t j = first; j <= t; ++j) acc += std::exp(scores[j] - max_score) * v[(j * Hkv + kvh) * D + d];
          attn[hd * D + d] = acc / denom;
        }
      }
      MatVec(layer.wo, attn.data(), hidden, H * D, out.data());
      if (!layer.post_attn_norm.empty()) Norm(out.data(), layer.post_attn_norm, hidden, eps, out.data());
      for (int64_t i = 0; i < hidden; ++i) x_next[t * hidden + i] += out[i];
      Norm(&x_next[t * hidden], layer.ffn_norm, hidden, eps, h.data());
      MatVec(layer.gate, h.data(), F, hidden, gate.data());
      MatVec(layer.up, h.data(), F, hidden, up.data());
      for (int64_t i = 0; i < F; ++i) {
        const double g = gate[i];
        const double act = gelu_ ? 0.5 * g * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g)))
                                 : g / (1.0 + std::exp(-g));
        gate[i] = act * up[i];
      }
      MatVec(layer.down, gate.data(), hidden, F, out.data());
      if (!layer.post_ffn_norm.empty()) Norm(out.data(), layer.post_ffn_norm, hidden, eps, out.data());
      for (int64_t i = 0; i < hidden; ++i) x_next[t * hidden + i] += out[i];
    }
    x = std::move(x_next);
  }
  std::vector<double> logits(T * V);
  for (int64_t t = 0; t < T; ++t) {
    Norm(&x[t * hidden], output_norm_, hidden, eps, h.data());
    MatVec(output_, h.data(), V, hidden, &logits[t * V]);
  }
  return logits;
}

}  // namespace tpserve::testing
