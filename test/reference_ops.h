// Naive reference implementations of every model op's forward pass, in double
// precision, with plain nested loops and no threading: the obviously-correct
// twin that the CPU kernels are tested against (and finite differences are
// taken on), and the building blocks of a naive whole-model reference.
// Invariant: layouts and semantics are exactly those of model/kernels/*.h
// (row-major, fused qkv, [gate | up] rows, rotate-half RoPE at position n % T,
// causal GQA with scale 1/sqrt(D) where query head h reads kv head h / (H/KV)).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numbers>
#include <vector>

#include "model/kernels/rope.h"

namespace llm::reference {

using Vec = std::vector<double>;

// out (N, C) = wte row tokens[n] - vocab_begin, where wte (rows, C) holds the
// vocabulary slice [vocab_begin, vocab_begin + rows); zeros for tokens outside.
inline Vec embedding_forward(const std::vector<int32_t>& tokens, const Vec& wte, int N, int C,
                             int vocab_begin = 0) {
  const long rows = C > 0 ? (long)(wte.size() / C) : 0;
  Vec out((size_t)N * C, 0.0);
  for (int n = 0; n < N; n++) {
    const long row = (long)tokens[n] - vocab_begin;
    if (row < 0 || row >= rows) continue;
    for (int c = 0; c < C; c++) out[(size_t)n * C + c] = wte[(size_t)row * C + c];
  }
  return out;
}

// out (N, C) = inp * rstd * weight, rstd = 1 / sqrt(mean(inp^2) + eps) per row;
// rstd (N) is also written when the pointer is not null.
inline Vec rmsnorm_forward(const Vec& inp, const Vec& weight, int N, int C, double eps,
                           Vec* rstd = nullptr) {
  Vec out((size_t)N * C);
  if (rstd) rstd->assign(N, 0.0);
  for (int n = 0; n < N; n++) {
    double sum_sq = 0.0;
    for (int c = 0; c < C; c++) sum_sq += inp[(size_t)n * C + c] * inp[(size_t)n * C + c];
    const double s = 1.0 / std::sqrt(sum_sq / C + eps);
    for (int c = 0; c < C; c++) out[(size_t)n * C + c] = inp[(size_t)n * C + c] * s * weight[c];
    if (rstd) (*rstd)[n] = s;
  }
  return out;
}

// inp, out (N, (H + 2 KV) * D), each row [H q heads | KV k heads | KV v heads]
// of D: out = inp with each q head RMSNorm'ed (over its D values) and scaled
// by q_weight (D), each k head likewise with k_weight, v heads copied; rstd
// (N, H + KV), each q then k head's, is also written when not null.
inline Vec qk_norm_forward(const Vec& inp, const Vec& q_weight, const Vec& k_weight, int N, int H,
                           int KV, int D, double eps, Vec* rstd = nullptr) {
  Vec out = inp;
  if (rstd) rstd->assign((size_t)N * (H + KV), 0.0);
  for (int n = 0; n < N; n++) {
    for (int h = 0; h < H + KV; h++) {
      const size_t head = ((size_t)n * (H + 2 * KV) + h) * D;
      const Vec& weight = h < H ? q_weight : k_weight;
      double sum_sq = 0.0;
      for (int d = 0; d < D; d++) sum_sq += inp[head + d] * inp[head + d];
      const double s = 1.0 / std::sqrt(sum_sq / D + eps);
      for (int d = 0; d < D; d++) out[head + d] = inp[head + d] * s * weight[d];
      if (rstd) (*rstd)[(size_t)n * (H + KV) + h] = s;
    }
  }
  return out;
}

// The RoPE angle of pair i (0 <= i < D/2) at position pos: pos * theta^(-2i/D),
// the frequency scaled as Llama 3.1 states it (transformers'
// _compute_llama3_parameters): by its wavelength 2 pi / f against the original
// context divided by each of the two factors.
inline double rope_angle(int pos, int i, int D, double theta, const RopeScaling& s = {}) {
  double f = std::pow(theta, -2.0 * i / D);
  if (s.factor != 1.0) {
    const double wavelength = 2 * std::numbers::pi / f;
    const double long_wave = s.original_context / s.low_freq_factor;    // beyond: f / factor
    const double short_wave = s.original_context / s.high_freq_factor;  // below: f
    if (wavelength > long_wave) {
      f /= s.factor;
    } else if (wavelength >= short_wave) {
      const double smooth = (s.original_context / wavelength - s.low_freq_factor) /
                            (s.high_freq_factor - s.low_freq_factor);
      f = (1 - smooth) * f / s.factor + smooth * f;
    }
  }
  return pos * f;
}

// x: N rows of row_stride values, row n at position n % T, or (*positions)[n]
// when given. Returns x with the first n_heads heads (D values each) of every
// row rotated: the pair (x[i], x[i + D/2]) by rope_angle(position, i); all
// other values copied.
inline Vec rope_forward(const Vec& x, int N, int T, int n_heads, int D, int row_stride,
                        double theta, const std::vector<int32_t>* positions = nullptr) {
  Vec out = x;
  const int half = D / 2;
  for (int n = 0; n < N; n++) {
    for (int h = 0; h < n_heads; h++) {
      const size_t head = (size_t)n * row_stride + (size_t)h * D;
      for (int i = 0; i < half; i++) {
        const double angle = rope_angle(positions ? (*positions)[n] : n % T, i, D, theta);
        const double a = x[head + i], b = x[head + i + half];
        out[head + i] = a * std::cos(angle) - b * std::sin(angle);
        out[head + i + half] = b * std::cos(angle) + a * std::sin(angle);
      }
    }
  }
  return out;
}

// qkv (B, T, (H + 2*KV) * D): per token H query heads, KV key heads, KV value
// heads. Returns out (B, T, H * D) of causal softmax attention with scale
// 1/sqrt(D), query head h attending to kv head h / (H / KV); lse (B, H, T), the
// log-sum-exp of each query's scaled scores, is written when not null. With
// doc_start (B, T), query t attends only to keys s in [doc_start[b][t], t].
inline Vec attention_forward(const Vec& qkv, int B, int T, int H, int KV, int D, Vec* lse = nullptr,
                             const std::vector<int32_t>* doc_start = nullptr) {
  const size_t row = (size_t)(H + 2 * KV) * D;
  const double scale = 1.0 / std::sqrt((double)D);
  Vec out((size_t)B * T * H * D, 0.0);
  if (lse) lse->assign((size_t)B * H * T, 0.0);
  for (int b = 0; b < B; b++) {
    for (int h = 0; h < H; h++) {
      const int g = h / (H / KV);
      for (int t = 0; t < T; t++) {
        const size_t q = (size_t)(b * T + t) * row + (size_t)h * D;
        const int first = doc_start ? (*doc_start)[(size_t)b * T + t] : 0;
        Vec scores(t + 1);
        double max = -INFINITY;
        for (int s = first; s <= t; s++) {
          const size_t k = (size_t)(b * T + s) * row + (size_t)(H + g) * D;
          double dot = 0.0;
          for (int d = 0; d < D; d++) dot += qkv[q + d] * qkv[k + d];
          scores[s] = dot * scale;
          max = std::fmax(max, scores[s]);
        }
        double sum = 0.0;
        for (int s = first; s <= t; s++) sum += std::exp(scores[s] - max);
        const size_t o = (size_t)(b * T + t) * H * D + (size_t)h * D;
        for (int s = first; s <= t; s++) {
          const double p = std::exp(scores[s] - max) / sum;
          const size_t v = (size_t)(b * T + s) * row + (size_t)(H + KV + g) * D;
          for (int d = 0; d < D; d++) out[o + d] += p * qkv[v + d];
        }
        if (lse) (*lse)[((size_t)b * H + h) * T + t] = max + std::log(sum);
      }
    }
  }
  return out;
}

// h13 (N, 2F), row = [gate | up]; returns out (N, F) = silu(gate) * up.
inline Vec swiglu_forward(const Vec& h13, int N, int F) {
  Vec out((size_t)N * F);
  for (int n = 0; n < N; n++) {
    for (int i = 0; i < F; i++) {
      const double gate = h13[(size_t)n * 2 * F + i], up = h13[(size_t)n * 2 * F + F + i];
      out[(size_t)n * F + i] = gate / (1.0 + std::exp(-gate)) * up;
    }
  }
  return out;
}

// out (N, OC) = inp (N, C) @ weight (OC, C)^T.
inline Vec matmul_forward(const Vec& inp, const Vec& weight, int N, int C, int OC) {
  Vec out((size_t)N * OC, 0.0);
  for (int n = 0; n < N; n++)
    for (int o = 0; o < OC; o++)
      for (int c = 0; c < C; c++)
        out[(size_t)n * OC + o] += inp[(size_t)n * C + c] * weight[(size_t)o * C + c];
  return out;
}

// out = a + b elementwise.
// x (N, C) with bias (C) added to every row.
inline Vec row_bias_forward(const Vec& x, const Vec& bias, int N, int C) {
  Vec out = x;
  for (int n = 0; n < N; n++)
    for (int c = 0; c < C; c++) out[(size_t)n * C + c] += bias[c];
  return out;
}

// The bias's gradient: column sums of dout (N, C).
inline Vec row_bias_backward(const Vec& dout, int N, int C) {
  Vec dbias(C, 0.0);
  for (int n = 0; n < N; n++)
    for (int c = 0; c < C; c++) dbias[c] += dout[(size_t)n * C + c];
  return dbias;
}

inline Vec residual_forward(const Vec& a, const Vec& b) {
  Vec out(a.size());
  for (size_t i = 0; i < a.size(); i++) out[i] = a[i] + b[i];
  return out;
}

// logsumexp of row n of logits (N, V); the max is subtracted first (exp
// overflows double beyond ~709).
inline double row_logsumexp(const Vec& logits, int n, int V) {
  const double* row = logits.data() + (size_t)n * V;
  double max = row[0];
  for (int v = 0; v < V; v++) max = std::fmax(max, row[v]);
  double sum = 0.0;
  for (int v = 0; v < V; v++) sum += std::exp(row[v] - max);
  return max + std::log(sum);
}

// losses (N) = logsumexp(logits[n]) - logits[n][targets[n]], logits (N, V).
inline Vec cross_entropy_forward(const Vec& logits, const std::vector<int32_t>& targets, int N,
                                 int V) {
  Vec losses(N);
  for (int n = 0; n < N; n++)
    losses[n] = row_logsumexp(logits, n, V) - logits[(size_t)n * V + targets[n]];
  return losses;
}

// d(dloss * sum_n losses[n]) / d(logits) = (softmax(logits[n]) - onehot(targets[n])) * dloss,
// logits (N, V).
inline Vec cross_entropy_backward(const Vec& logits, const std::vector<int32_t>& targets, int N,
                                  int V, double dloss) {
  Vec dlogits((size_t)N * V);
  for (int n = 0; n < N; n++) {
    const double* row = logits.data() + (size_t)n * V;
    const double lse = row_logsumexp(logits, n, V);
    for (int v = 0; v < V; v++)
      dlogits[(size_t)n * V + v] = (std::exp(row[v] - lse) - (v == targets[n])) * dloss;
  }
  return dlogits;
}

// One AdamW step t >= 1, in place, with the semantics of llm::cpu::adamw_update:
// g = grad * grad_scale; m, v moments; bias-corrected; decoupled weight decay
// scaled by lr.
inline void adamw_update(Vec& params, const Vec& grads, Vec& m, Vec& v, double lr, double beta1,
                         double beta2, double eps, double weight_decay, double grad_scale, int t) {
  for (size_t i = 0; i < params.size(); i++) {
    const double g = grads[i] * grad_scale;
    m[i] = beta1 * m[i] + (1.0 - beta1) * g;
    v[i] = beta2 * v[i] + (1.0 - beta2) * g * g;
    const double m_hat = m[i] / (1.0 - std::pow(beta1, t));
    const double v_hat = v[i] / (1.0 - std::pow(beta2, t));
    params[i] -= lr * (m_hat / (std::sqrt(v_hat) + eps) + weight_decay * params[i]);
  }
}

}  // namespace llm::reference
