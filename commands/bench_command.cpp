// `./train bench` (see bench_command.h).
#include "commands/bench_command.h"

#include "commands/attention_bench.h"
#include "commands/benchmark.h"

namespace llm {

int run_bench(const BenchArguments& a, const CommandLine& line) {
  alike_on_every_rank([&] {
    LLM_CHECK(a.modes + a.memory + a.offload + a.profile + a.attention <= 1,
              "./train bench: --modes, --memory, --offload, --profile and --attention are "
              "different benchmarks; give one");
  });
  Group& world = join_world();
  const Config config = command_config(a.config, line);
  if (a.attention) {
    benchmark_attention(config, line.given("bench-steps") ? a.steps : 20);
  } else if (a.modes) {
    benchmark_modes(config, world, a.steps);
  } else if (a.memory) {
    benchmark_memory(config, world, a.steps);
  } else if (a.offload) {
    benchmark_offload(config, world, a.steps);
  } else {
    benchmark_run(config, world, a.steps, a.peak_tflops, a.profile);
  }
  return 0;
}

}  // namespace llm
