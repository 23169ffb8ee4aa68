// Throughput benchmark of a full training step on synthetic tokens, reported
// against the machine's own measured single-precision GEMM rate (CPU) or the
// GPU's dense peak (MFU).
// Invariant: FLOPs are counted from the model's shapes (6 x matmul params x
// tokens, plus the causal attention actually computed), never from timings.
#pragma once

#include "schema/config.h"
#include "parallel/comm.h"

namespace llm {

// Times `steps` training steps (after one warm-up step) and prints the
// report; on a GPU (training.device = cuda) the achieved rate is given as MFU
// against `peak_tflops` (dense bf16 peak per GPU), on the CPU against the
// measured sgemm rate. With `profile_ops`, then times `steps` more steps op by
// op on a profiled backend (model/op_profile.h) and prints rank 0's table:
// per op its calls and milliseconds per step, its share of the measured step
// and the matmuls' achieved FLOP/s, then the ops' sum against that step.
void benchmark_run(Config config, Group& world, int steps, double peak_tflops,
                   bool profile_ops = false);

// Runs the config in every parallel mode on `world` and prints a table: step
// time, tokens/s, bytes per rank of parameters / gradients / optimizer state /
// buffers, and bytes sent per step (counted by the comm layer) against ddp.
void benchmark_modes(Config config, Group& world, int steps);

// Runs the config with the optimizer on the device, offloaded (ZeRO-Offload,
// without and with delayed_update) and with ZenFlow (the config's [zenflow]
// knobs), and prints step time, device and host bytes per rank, bytes moved
// host <-> device per step, and the host's busy and exposed (waited-for)
// time per step.
void benchmark_offload(Config config, Group& world, int steps);

// Runs the config in fp32 and bf16, each without, with selective and with full
// activation recomputation, and prints tokens/s and activation bytes, then
// the per-block activation bytes: measured, our exact formula, and the
// textbook bounds for a transformer layer stored in 16-bit.
void benchmark_memory(Config config, Group& world, int steps);

}  // namespace llm
