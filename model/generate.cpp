// Prefill, decode steps and token sampling (see generate.h).
#include "model/generate.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

#include "base/error.h"
#include "base/rng.h"
#include "base/system.h"

namespace llm {

int32_t sample_token(const float* logits, int V, const SamplingOptions& options, double uniform) {
  if (options.temperature <= 0) {
    return static_cast<int32_t>(std::max_element(logits, logits + V) - logits);
  }
  // The candidates, likeliest first: all V, or the top_k.
  const int k = options.top_k > 0 ? std::min(options.top_k, V) : V;
  std::vector<int> order(V);
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int a, int b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  std::vector<double> probs(k);
  const double max_logit = logits[order[0]];
  double total = 0;
  for (int j = 0; j < k; ++j)
    total += probs[j] = std::exp((logits[order[j]] - max_logit) / options.temperature);
  // Nucleus: the shortest prefix whose probability reaches top_p.
  int kept = k;
  if (options.top_p < 1.0f) {
    double mass = 0;
    for (int j = 0; j < k; ++j) {
      mass += probs[j] / total;
      if (mass >= options.top_p) {
        kept = j + 1;
        break;
      }
    }
  }
  const double kept_total = std::accumulate(probs.begin(), probs.begin() + kept, 0.0);
  double r = uniform * kept_total;
  for (int j = 0; j < kept; ++j) {
    r -= probs[j];
    if (r < 0) return order[j];
  }
  return order[kept - 1];
}

std::vector<std::vector<int32_t>> generate(Transformer& model, UnitProvider& units,
                                           const std::vector<int32_t>& prompt, int samples,
                                           const SamplingOptions& options) {
  LLM_CHECK(!prompt.empty(), "generation needs at least one prompt token");
  LLM_CHECK(samples >= 1, "generation needs at least one sample, got {}", samples);
  std::vector<std::vector<int32_t>> out(samples);
  if (options.max_new_tokens <= 0) return out;
  const int V = model.config().vocab_size;
  const int P = static_cast<int>(prompt.size());
  // Every forward covers a whole multiple of the model's sequence multiple
  // (tensor parallelism splits rows): padding after the last real token
  // writes cache positions that the next step overwrites before any query
  // can see them (attention is causal).
  const int multiple = model.sequence_multiple();
  const int cache_capacity = model.kv_cache_capacity();
  const int prefill = (P + multiple - 1) / multiple * multiple;
  LLM_CHECK(prefill <= cache_capacity,
            "generation: the prompt's {} tokens do not fit the model's context of {}", P,
            cache_capacity);
  // The forward of T tokens per sample at position `start`; below about a
  // millisecond of one core's work, on one thread: a team's joins would cost
  // more than it saves (ThreadLimit), as in a decode step of a small model.
  auto decode = [&](const std::vector<int32_t>& tokens, int T, int start) {
    constexpr double kTeamWorthyFlops = 64e6;
    const double flops = 2.0 * samples * T * static_cast<double>(model.layout().total_numel);
    std::optional<ThreadLimit> one_thread;
    if (flops < kTeamWorthyFlops) one_thread.emplace(1);
    model.decode(units, tokens.data(), samples, T, start);
  };
  std::vector<int32_t> inputs(static_cast<size_t>(samples) * prefill, 0);
  for (int b = 0; b < samples; ++b) std::copy(prompt.begin(), prompt.end(), &inputs[b * prefill]);
  decode(inputs, prefill, 0);

  Rng rng(options.seed);
  std::vector<float> logits(V);
  std::vector<bool> finished(samples, false);
  int step_rows = prefill,
      last_row = P - 1;     // rows per sample of the last forward; its last real row
  for (int length = P;;) {  // length: tokens per sample so far
    for (int b = 0; b < samples; ++b) {
      const double uniform = rng.next_uniform();  // drawn for every sample: one stream per seed
      if (finished[b]) continue;
      model.logits_row(units, b * step_rows + last_row, logits.data());
      const int32_t token = sample_token(logits.data(), V, options, uniform);
      out[b].push_back(token);
      finished[b] = token == options.stop_token;
    }
    ++length;
    const bool all_finished =
        std::all_of(finished.begin(), finished.end(), [](bool f) { return f; });
    if (all_finished || length - P >= options.max_new_tokens ||
        length - 1 + multiple > cache_capacity) {
      break;
    }
    // The newest token of each sample at position length - 1 (finished
    // samples repeat their last token; their logits are not used).
    inputs.assign(static_cast<size_t>(samples) * multiple, 0);
    for (int b = 0; b < samples; ++b) inputs[b * multiple] = out[b].back();
    decode(inputs, multiple, length - 1);
    step_rows = multiple;
    last_row = 0;
  }
  return out;
}

}  // namespace llm
