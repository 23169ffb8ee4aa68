// `./train bench`: one of the benchmarks of benchmark.h and
// attention_bench.h, its options declared once (command_options.h).
#pragma once

#include <string>

#include "commands/command.h"

namespace llm {

struct BenchArguments {
  static constexpr const char* kName = "bench";
  static constexpr const char* kAbout =
      "Time training steps on synthetic tokens; report tokens/s and GFLOP/s against this "
      "machine's sgemm rate, or on a GPU (training.device = cuda) as MFU against --peak-tflops. "
      "At most one of --profile, --modes, --memory, --offload and --attention.";
  static constexpr bool kTakesOverrides = true;

  std::string config;
  int steps = 5;
  bool profile = false, modes = false, memory = false, offload = false, attention = false;
  double peak_tflops = 989.0;  // H100 SXM dense bf16, the MFU reference

  template <class V>
  void visit_fields(V&& v) {
    v("config", config, kConfigOptionDoc, required("FILE"));
    v("bench-steps", steps,
      "steps timed (--attention: forwards and backwards timed, 20 unless given)", kPositive);
    v("peak-tflops", peak_tflops, "the GPU's dense bf16 peak, MFU's reference (H100 SXM)",
      OptionRule("P", kPositive));
    v("profile", profile,
      "then time as many steps again op by op (a CUDA event on the compute stream after each op; "
      "on the "
      "CPU the host clock) and print each op's calls and ms per step, its share of the step, the "
      "matmuls' FLOP/s, and the ops' sum against the measured step");
    v("modes", modes,
      "(under mpirun) the config in every parallel mode: step time, memory per rank and bytes "
      "communicated per step");
    v("memory", memory, "precision x activation recomputation: tokens/s and activation bytes");
    v("offload", offload,
      "the optimizer on the device, offloaded (with and without delayed_update) and ZenFlow: "
      "step time, device and host bytes, bytes moved host <-> device and host time per step");
    v("attention", attention,
      "causal attention alone on the config's shape (micro-batch x seq_len, its heads): the "
      "median of N forwards, then backwards (on cuDNN both backward algorithms), in ms and "
      "TFLOP/s in our FLOP convention and in the published one (backward 2.5 forwards), then "
      "cuDNN's version, plans and fallbacks");
  }
};

int run_bench(const BenchArguments& arguments, const CommandLine& line);

}  // namespace llm
