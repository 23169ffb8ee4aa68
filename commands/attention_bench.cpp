// `./train bench --attention` (see attention_bench.h).
#include "commands/attention_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "device/arena.h"
#include "device/device.h"
#include "base/error.h"
#include "base/rng.h"
#include "device/timeline.h"
#include "model/backend.h"
#include "model/cudnn/attention_cudnn.h"
#include "model/device_setup.h"
#include "model/flops.h"
#include "parallel/comm.h"

namespace llm {

namespace {

struct AttentionShape {
  int B, T, H, KV, D;
};

// One pass timed: `iterations` calls after two unmeasured ones, each its
// own interval between marks; the median in milliseconds.
template <class Pass>
double median_ms(Timeline& timeline, int iterations, Pass&& pass) {
  pass();
  pass();
  timeline.mark();
  for (int i = 0; i < iterations; ++i) {
    pass();
    timeline.mark();
  }
  std::vector<double> seconds = timeline.intervals();
  LLM_CHECK(!seconds.empty(), "./train bench --attention: no interval timed");
  std::nth_element(seconds.begin(), seconds.begin() + seconds.size() / 2, seconds.end());
  return seconds[seconds.size() / 2] * 1e3;
}

// The forward's FLOPs and both conventions' backward, for the rate lines.
struct AttentionFlops {
  double forward, backward_ours, backward_published;
};

void print_pass(const char* name, double ms, double flops, double published_flops) {
  fmt::print("  {:<28} {:9.3f} ms  {:8.4g} TFLOP/s (ours)  {:8.4g} TFLOP/s (2.5x convention)\n",
             name, ms, flops / ms * 1e-9, published_flops / ms * 1e-9);
}

template <class A>
void time_attention(const Backend& backend, const AttentionShape& s, int iterations,
                    const AttentionFlops& flops, bool both_backwards) {
  const TypedOps<A>& ops = backend.ops<A>();
  const size_t N = static_cast<size_t>(s.B) * s.T;
  const size_t qkv_width = static_cast<size_t>(s.H + 2 * s.KV) * s.D;
  const size_t out_width = static_cast<size_t>(s.H) * s.D;
  BufferPlan plan;
  A *qkv, *out, *dout, *dqkv;
  float* lse;
  plan.add(qkv, N * qkv_width);
  plan.add(out, N * out_width);
  plan.add(dout, N * out_width);
  plan.add(dqkv, N * qkv_width);
  plan.add(lse, static_cast<size_t>(s.B) * s.H * s.T);
  Arena arena("attention benchmark", plan.bytes(), *backend.memory);
  plan.bind(arena);
  // Inputs of unit scale: softmax rows neither uniform nor one-hot.
  Rng rng(1);
  std::vector<A> host(N * qkv_width);
  for (A& x : host) store(&x, static_cast<float>(2 * rng.next_uniform() - 1));
  backend.memory->to_device(qkv, host.data(), host.size() * sizeof(A));
  host.resize(N * out_width);
  for (A& x : host) store(&x, static_cast<float>(2 * rng.next_uniform() - 1));
  backend.memory->to_device(dout, host.data(), host.size() * sizeof(A));

  const std::unique_ptr<Timeline> timeline = make_timeline(backend.device);
  const double forward = median_ms(*timeline, iterations, [&] {
    ops.attention_forward(out, lse, qkv, nullptr, s.B, s.T, s.H, s.KV, s.D);
  });
  print_pass("forward", forward, flops.forward, flops.forward);
  auto backward = [&] {
    ops.attention_backward(dqkv, dout, qkv, out, lse, nullptr, s.B, s.T, s.H, s.KV, s.D);
  };
  for (bool deterministic : {true, false}) {
    if (!deterministic && !both_backwards) break;
    if (backend.device == Device::cuda) cuda_set_deterministic(deterministic);
    const double ms = median_ms(*timeline, iterations, backward);
    print_pass(deterministic ? "backward" : "backward (non-deterministic)", ms, flops.backward_ours,
               flops.backward_published);
  }
}

}  // namespace

void benchmark_attention(const Config& config, int iterations) {
  LLM_CHECK(iterations >= 1, "./train bench --attention: --bench-steps {} (at least 1)",
            iterations);
  const ModelConfig& m = config.model;
  const TrainingConfig& t = config.training;
  const AttentionShape s{t.micro_batch_size, t.seq_len, m.n_heads, m.n_kv_heads,
                         m.resolved_head_dim()};
  device_setup(config, comm_local_rank());
  // One block's attention in a micro-batch: the model's own count.
  Config one_block = config;
  one_block.training.recompute = Recompute::none;
  const double forward = unit_pass_flops(one_block, 1, Pass::forward).attention;
  const AttentionFlops flops{forward, unit_pass_flops(one_block, 1, Pass::backward).attention,
                             2.5 * forward};
  const bool bf16 = stores_bf16(config.precision());
  const bool cudnn = bf16 && config.device() == Device::cuda && kBuiltWithCudnn &&
                     t.attention != AttentionKernel::flash;
  fmt::print(
      "attention alone: B={} T={} H={} KV={} D={}, causal, {} on {} ({}), median of {} "
      "iterations; forward {:.6g} FLOPs\n",
      s.B, s.T, s.H, s.KV, s.D, bf16 ? "bf16" : "fp32",
      config.device() == Device::cuda ? (kCudaEmulated ? "the CUDA emulation (not a GPU)" : "cuda")
                                      : "cpu",
      cudnn ? "cuDNN" : "the hand-written kernel", iterations, forward);
  const Backend& backend = backend_for(config.device(), t.attention);
  const size_t fallbacks_before = cudnn::attention_fallback_calls();
  if (bf16)
    time_attention<Bf16>(backend, s, iterations, flops, cudnn);
  else
    time_attention<float>(backend, s, iterations, flops, false);
  if (config.device() == Device::cuda) cuda_set_deterministic(t.deterministic);
  if (cudnn) {
    fmt::print("{}", cudnn::attention_plans());
    fmt::print("  calls that fell back to the flash kernel: {}\n",
               cudnn::attention_fallback_calls() - fallbacks_before);
  }
}

}  // namespace llm
