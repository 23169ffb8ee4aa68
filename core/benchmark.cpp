// `./train bench`: tokens/s and achieved GFLOP/s of a training step.
#include "core/benchmark.h"

#include <cblas.h>
#include <omp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <vector>

#include "core/rng.h"
#include "core/system.h"
#include "core/trainer.h"
#include "data/shard.h"

namespace llm {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

StepFlops step_flops(const Config& config) {
  const ModelConfig& m = config.model;
  const double C = m.dim, F = m.ffn_dim, V = m.vocab_size, L = m.n_layers;
  const double D = C / m.n_heads, HD = m.n_heads * D, QKV = (m.n_heads + 2.0 * m.n_kv_heads) * D;
  const double T = config.training.seq_len;
  const double tokens = static_cast<double>(config.training.batch_size) * T;
  const double matmul_params = L * (QKV * C + HD * C + 3.0 * F * C) + V * C;
  StepFlops f;
  f.matmul = 6.0 * matmul_params * tokens;
  // Per head and sequence, causal: T(T+1)/2 query-key pairs, 2 matmuls (scores,
  // weighted values) of 2*D FLOPs per pair forward, twice that backward.
  const double pairs = T * (T + 1) / 2.0;
  const double sequences = config.training.batch_size;
  f.attention = 3.0 * 2.0 * 2.0 * D * pairs * m.n_heads * L * sequences;
  return f;
}

double measure_gemm_gflops(int n, int repeats) {
  std::vector<float> a(static_cast<size_t>(n) * n), b(a.size()), c(a.size());
  Rng rng(1);
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<float>(rng.next_uniform() - 0.5);
    b[i] = static_cast<float>(rng.next_uniform() - 0.5);
  }
  double best = 1e30;
  for (int r = 0; r < repeats + 1; ++r) {  // first run warms up
    auto start = Clock::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0f, a.data(), n, b.data(), n,
                0.0f, c.data(), n);
    if (r > 0) best = std::min(best, seconds_since(start));
  }
  return 2.0 * n * n * n / best / 1e9;
}

void benchmark_run(Config config, Group& world, int steps) {
  const TrainingConfig& t = config.training;
  // Synthetic uniform tokens: throughput does not depend on the text.
  std::vector<uint32_t> tokens(static_cast<size_t>(t.batch_size) * (t.seq_len + 1));
  Rng rng(static_cast<uint64_t>(t.seed));
  for (uint32_t& token : tokens) token = static_cast<uint32_t>(rng.next_below(config.model.vocab_size));
  std::filesystem::path shard = std::filesystem::temp_directory_path() /
                                fmt::format("llm_bench_{}.bin", static_cast<long>(getpid()));
  shard_write(shard.string(), tokens, config.model.vocab_size);
  config.data.train = shard.string();
  config.data.val = "";
  config.logging.metrics = false;
  Trainer trainer(config, world);
  std::filesystem::remove(shard);

  double gemm = measure_gemm_gflops(2048, 3);
  trainer.train_step(0);  // warm-up
  auto start = Clock::now();
  for (int s = 1; s <= steps; ++s) trainer.train_step(s);
  double seconds = seconds_since(start) / steps;

  StepFlops flops = step_flops(config);
  double step_tokens = static_cast<double>(t.batch_size) * t.seq_len;
  double achieved = flops.total() / seconds / 1e9;
  fmt::print("benchmark {} ({} parameters, {} threads)\n", config.path,
             trainer.model().layout().total_numel, omp_get_max_threads());
  fmt::print("  batch {} x {} tokens, micro-batch {}\n", t.batch_size, t.seq_len, t.micro_batch_size);
  fmt::print("  sgemm 2048^3 rate      {:9.1f} GFLOP/s\n", gemm);
  fmt::print("  step time              {:9.1f} ms\n", seconds * 1e3);
  fmt::print("  tokens/s               {:9.0f}\n", step_tokens / seconds);
  fmt::print("  FLOPs per step         {:9.3g} (matmul {:.3g}, attention {:.3g})\n", flops.total(),
             flops.matmul, flops.attention);
  fmt::print("  achieved               {:9.1f} GFLOP/s = {:.1f}% of the sgemm rate\n", achieved,
             100.0 * achieved / gemm);
  fmt::print("  activations {}, model state {}\n", format_bytes(trainer.model().activation_bytes()),
             format_bytes(trainer.engine().bytes().total()));
}

}  // namespace llm
