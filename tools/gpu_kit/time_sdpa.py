#!/usr/bin/env python3
"""Time PyTorch's scaled_dot_product_attention on one causal GQA shape.

The yardstick beside `./train bench --attention` (commands/attention_bench.h):
the shape of a config as our trainer resolves it (`./train config`: the
micro-batch, sequence length, query heads, kv heads and head dim), bf16,
causal, scale 1/sqrt(head dim), run by each SDPA backend that accepts it --
cuDNN, flash, memory-efficient -- with enable_gqa (kv heads shared by groups
of query heads, as ours), and, where a backend refuses GQA, once more with k
and v repeated to every query head (the work of full multi-head attention on
the same FLOPs count, said so in the row). Forward and backward are timed
apart with CUDA events, `--iterations` calls after two unmeasured ones; the
median is printed in ms and TFLOP/s in both conventions that `./train bench
--attention` prints: ours (the backward twice the forward) and the published
one (the backward 2.5 forwards). The FLOPs are the trainer's own count
(`./train config --counts`, model/flops.h), never recomputed here.

Needs an NVIDIA GPU and PyTorch with CUDA; not part of `make test`.

  python3 tools/gpu_kit/time_sdpa.py --config configs/llama8b.toml --set data.tokenizer=
"""

import argparse
import json
import statistics
import subprocess
import sys
import tomllib
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", required=True, help="a TOML config of ours")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="an override of the config, as ./train takes it (repeatable)")
    p.add_argument("--train-binary", default=str(REPO_ROOT / "train"))
    p.add_argument("--iterations", type=int, default=20)
    a = p.parse_args()
    if a.iterations < 1:
        p.error("--iterations must be at least 1")
    return a


def trainer(a, *extra):
    """Stdout of `./train config --config CONFIG --set... EXTRA`, or its error line."""
    args = [a.train_binary, "config", "--config", a.config, *extra]
    args += [f"--{kv}" for kv in a.set]
    proc = subprocess.run(args, capture_output=True, text=True, cwd=REPO_ROOT)
    if proc.returncode != 0:
        sys.exit(f"time_sdpa.py: {' '.join(args)}: {(proc.stderr or proc.stdout).strip()}")
    return proc.stdout


def attention_shape(a):
    """(B, T, H, KV, D) and one block's attention forward FLOPs for one
    micro-batch, from the trainer: its step's attention FLOPs (forward and
    twice that backward, every block, the global batch) divided down."""
    config = tomllib.loads(trainer(a))
    model, training = config["model"], config["training"]
    counts = json.loads(trainer(a, "--counts"))
    H, KV = model["n_heads"], model["n_kv_heads"]
    D = model["head_dim"] or model["dim"] // H
    B, T = training["micro_batch_size"], training["seq_len"]
    step = counts["flops_per_step"]["attention"]
    forward = step / (3 * model["n_layers"] * counts["batch_size"]) * B
    return (B, T, H, KV, D), forward


def median_ms(torch, iterations, run):
    """The median of `iterations` timed calls of run(), after two untimed."""
    run()
    run()
    times = []
    for _ in range(iterations):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main():
    a = parse_args()
    try:
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as e:
        sys.exit(f"time_sdpa.py: PyTorch with torch.nn.attention is needed ({e})")
    if not torch.cuda.is_available():
        sys.exit("time_sdpa.py: no CUDA device")
    (B, T, H, KV, D), forward_flops = attention_shape(a)
    print(f"PyTorch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, "
          f"{torch.cuda.get_device_name()}: SDPA B={B} T={T} H={H} KV={KV} D={D}, causal, bf16, "
          f"median of {a.iterations}; forward {forward_flops:.3g} FLOPs")

    gen = torch.Generator(device="cuda").manual_seed(1)

    def uniform(*shape):
        return (torch.rand(*shape, device="cuda", generator=gen) * 2 - 1).to(torch.bfloat16)

    q, k, v = uniform(B, H, T, D), uniform(B, KV, T, D), uniform(B, KV, T, D)
    dout = uniform(B, H, T, D)

    def row(name, ms, flops, published):
        print(f"  {name:<44} {ms:9.3f} ms  {flops / ms * 1e-9:7.1f} TFLOP/s (ours)  "
              f"{published / ms * 1e-9:7.1f} TFLOP/s (2.5x convention)")

    def time_backend(label, backend, gqa):
        kq, kk, kv_ = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
        if not gqa:
            group = H // KV
            kk = kk.repeat_interleave(group, dim=1).detach().requires_grad_(True)
            kv_ = kv_.repeat_interleave(group, dim=1).detach().requires_grad_(True)
        extra = {"enable_gqa": True} if gqa and KV != H else {}

        def forward():
            return F.scaled_dot_product_attention(kq, kk, kv_, is_causal=True, **extra)

        with sdpa_kernel(backend):
            with torch.no_grad():
                fwd = median_ms(torch, a.iterations, forward)
            out = forward()

            def backward():
                torch.autograd.grad(out, (kq, kk, kv_), dout, retain_graph=True)

            bwd = median_ms(torch, a.iterations, backward)
        suffix = "" if gqa else ", k and v repeated to every head"
        row(f"{label} forward{suffix}", fwd, forward_flops, forward_flops)
        row(f"{label} backward{suffix}", bwd, 2 * forward_flops, 2.5 * forward_flops)

    for label, backend in [("cudnn", SDPBackend.CUDNN_ATTENTION),
                           ("flash", SDPBackend.FLASH_ATTENTION),
                           ("efficient", SDPBackend.EFFICIENT_ATTENTION)]:
        for gqa in (True, False):
            try:
                time_backend(label, backend, gqa)
                break
            except RuntimeError as e:
                reason = str(e).strip().splitlines()[0][:160]
                print(f"  {label}{'' if gqa else ' (k, v repeated)'}: refused: {reason}")
                torch.cuda.synchronize()


if __name__ == "__main__":
    main()
