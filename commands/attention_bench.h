// `./train bench --attention`: causal attention alone, on the config's shape
// (micro_batch_size sequences of seq_len tokens, its heads, kv heads and head
// dim) and device, its forward and backward timed apart on the device's
// timeline (CUDA events on a GPU), for comparison with the same kernels
// inside a step (`./train bench --profile`) and with other libraries on the
// same shape (tools/gpu_kit/time_sdpa.py for PyTorch).
// Invariant: FLOPs come from the model's count (model/flops.h), printed in
// two conventions: ours (the backward twice the forward) and the one
// FlashAttention and cuDNN publish (the backward 2.5 forwards).
#pragma once

#include "schema/config.h"

namespace llm {

// Times `iterations` forwards, then backwards (after two of each unmeasured),
// and prints per pass the median milliseconds and TFLOP/s in both
// conventions. On a GPU with cuDNN attention, the backward once with the
// deterministic algorithm and once without, then cuDNN's version, each plan
// built and the calls that fell back to the flash kernel.
void benchmark_attention(const Config& config, int iterations);

}  // namespace llm
