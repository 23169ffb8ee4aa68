// Temperature / top-k sampling over the transformer's logits.
#include "model/generate.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "runtime/error.h"
#include "runtime/rng.h"

namespace llm {

std::vector<int32_t> generate(Transformer& model, UnitProvider& units, std::vector<int32_t> tokens,
                              int max_context, const SamplingOptions& options) {
  LLM_CHECK(!tokens.empty(), "generation needs at least one prompt token");
  const int V = model.config().vocab_size;
  Rng rng(options.seed);
  std::vector<int> order(V);
  std::vector<double> probs(V);
  std::vector<float> logits(V);
  // The forward runs on a whole multiple of the model's sequence multiple
  // (tensor parallelism splits rows): padding after the context leaves its
  // causal logits unchanged.
  const int multiple = model.sequence_multiple();
  LLM_CHECK(max_context % multiple == 0, "generation: context {} is not a multiple of {}",
            max_context, multiple);
  std::vector<int32_t> context;
  for (int i = 0; i < options.max_new_tokens; ++i) {
    const int T = std::min<int>(static_cast<int>(tokens.size()), max_context);
    context.assign(tokens.end() - T, tokens.end());
    context.resize((T + multiple - 1) / multiple * multiple, 0);
    model.forward(units, context.data(), nullptr, 1, static_cast<int>(context.size()));
    model.logits_row(T - 1, logits.data());

    int k = options.top_k > 0 ? std::min(options.top_k, V) : V;
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int a, int b) { return logits[a] > logits[b]; });
    double max_logit = logits[order[0]], total = 0;
    for (int j = 0; j < k; ++j) {
      probs[j] = std::exp((logits[order[j]] - max_logit) / std::max(options.temperature, 1e-4f));
      total += probs[j];
    }
    double r = rng.next_uniform() * total;
    int chosen = order[k - 1];
    for (int j = 0; j < k; ++j) {
      r -= probs[j];
      if (r <= 0) {
        chosen = order[j];
        break;
      }
    }
    tokens.push_back(chosen);
  }
  return tokens;
}

}  // namespace llm
