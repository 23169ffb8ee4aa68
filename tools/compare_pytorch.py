#!/usr/bin/env python3
"""Compare our trainer's GPU throughput with the same model trained by PyTorch.

For each TOML config (default configs/gpu_124m.toml and configs/gpu_1b.toml)
this script

  1. builds the same Llama decoder in PyTorch: embedding; per block RMSNorm,
     fused qkv projection (no bias), RoPE "rotate half" (Hugging Face
     convention, theta from the config), causal GQA attention through
     scaled_dot_product_attention (scale 1/sqrt(head_dim)), output projection,
     RMSNorm, fused [gate|up] projection, SiLU gate, down projection; final
     RMSNorm, LM head (tied or not, per the config) and cross-entropy. Its
     parameter count is checked to equal our layout's exactly. The config,
     with its defaults, and both counts come from our trainer (`./train
     config`), never from a second copy here;
  2. trains it the way ours trains: bf16 autocast over fp32 master weights,
     AdamW (fused when available) with the config's lr schedule, betas, eps and
     weight decay (matrices only), gradient accumulation from micro_batch_size
     to batch_size, global-norm gradient clipping, on uniform random tokens,
     under torch.compile (--no-compile for eager). After --warmup steps it
     times --steps steps and reports tokens/s, MFU against --peak-tflops with
     exactly our FLOP count (`./train config --counts`: model/flops.h), and
     torch.cuda.max_memory_allocated;
  3. runs our trainer on the same config:
         ./train bench --config CFG --bench-steps N --peak-tflops P
     parses its tokens/s, MFU and memory (the arena bytes it reports:
     activations + model state) and prints a side-by-side table with the
     ratio ours / PyTorch, the GPU name, the date and the exact commands.

--find-max-micro-batch instead searches, for each implementation, the largest
micro-batch (= batch, one micro-batch per step) that fits: starting at the
config's micro-batch (halving first if even that does not fit), it doubles
until the GPU runs out of memory and reports the largest that fit with its
throughput and peak memory.

Each PyTorch measurement runs in a fresh child process (this script with the
hidden --worker-spec option), so compile caches, the CUDA caching allocator
and an out-of-memory failure of one run cannot affect the next run or ours.

Not part of `make test`; it needs an NVIDIA GPU, a CUDA build of ./train and
PyTorch (2.x; enable_gqa and fused AdamW are used when present):

    pip install torch
    python3 tools/compare_pytorch.py
    python3 tools/compare_pytorch.py --config configs/gpu_1b.toml --steps 20 --json-out cmp.json
    python3 tools/compare_pytorch.py --config gpu_124m --find-max-micro-batch
    python3 tools/compare_pytorch.py --param-count-only --config configs/gpu_1b.toml   # no torch, no GPU
    python3 tools/compare_pytorch.py --config tiny --skip-ours --pytorch-device cpu --no-compile
        # smoke test of the PyTorch side on a machine without a GPU (no MFU meaning)

Known differences that remain (by design of each implementation, not of this
script): under autocast PyTorch keeps the residual stream and norms in fp32
and upcasts the logits to fp32 for the loss, while ours stores activations in
bf16; ours' memory figure is its planned arena (no CUDA context, cuBLAS
workspace or allocator slack), PyTorch's is the caching allocator's peak of
allocated tensors (no context or cached-but-free blocks either).
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CONFIGS = "configs/gpu_124m.toml,configs/gpu_1b.toml"
RESULT_MARK = "COMPARE_PYTORCH_RESULT "  # prefix of the worker's one JSON result line



# ---------------------------------------------------------------------------
# Config, parameter count and FLOPs: read from our trainer, never recomputed.
# ---------------------------------------------------------------------------

def run_trainer_tool(binary: str, args: list[str]) -> str:
    """Stdout of `binary args` run at the repository root; its error line otherwise."""
    try:
        proc = subprocess.run([binary, *args], capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    except OSError as e:
        raise SystemExit(f"error: cannot run {binary} (build it with make, or pass --train-binary): {e}")
    if proc.returncode != 0:
        raise SystemExit(tail(proc.stderr or proc.stdout, 1))
    return proc.stdout


def load_config(binary: str, name: str) -> dict:
    """The config as our trainer resolves it (`./train config --config NAME`: the
    file over the defaults), so this script keeps no defaults of its own."""
    import tomllib  # Python 3.11+

    if Path(name).is_file():  # a path from here; the trainer runs at the repository root
        name = str(Path(name).resolve())
    resolved = tomllib.loads(run_trainer_tool(binary, ["config", "--config", name]))
    counts = model_counts(binary, name)
    return {"path": counts["config"], "name": name, "model": resolved["model"],
            "training": resolved["training"], "parameters": counts["parameters"]}


def model_counts(binary: str, name: str, micro: int | None = None, batch: int | None = None) -> dict:
    """Parameters and FLOPs per step as our trainer counts them (`./train config
    --counts`: the layout and model/flops.h), for a batch other than the config's
    when given."""
    overrides = [] if batch is None else [f"--training.micro_batch_size={micro}",
                                          f"--training.batch_size={batch}"]
    return json.loads(run_trainer_tool(binary, ["config", "--config", name, "--counts", *overrides]))


def mfu_percent(flops_per_step: float, seconds_per_step: float, peak_tflops: float) -> float:
    """Achieved FLOP/s as a percentage of the peak (one GPU), as benchmark_run prints it."""
    return 100.0 * flops_per_step / seconds_per_step / (peak_tflops * 1e12)


def lr_at_step(t: dict, step: int) -> float:
    """Our LR schedule (model/optimizer.cpp): linear warm-up, then cosine/linear/constant."""
    peak, floor = t["lr"], t["lr"] * t["min_lr_ratio"]
    if step < t["warmup_steps"]:
        return peak * (step + 1) / t["warmup_steps"]
    if t["lr_schedule"] == "constant":
        return peak
    decay_steps = t["steps"] - t["warmup_steps"]
    progress = 1.0 if decay_steps <= 1 else (step - t["warmup_steps"]) / (decay_steps - 1)
    progress = min(max(progress, 0.0), 1.0)
    shape = 0.5 * (1.0 + math.cos(math.pi * progress)) if t["lr_schedule"] == "cosine" else 1.0 - progress
    return floor + (peak - floor) * shape


def format_bytes(n: float | None) -> str:
    """Like core/system.cpp's format_bytes (binary units)."""
    if n is None:
        return "-"
    units = ["B", "KiB", "MiB", "GiB", "TiB"]
    u = 0
    while n >= 1024 and u < len(units) - 1:
        n /= 1024
        u += 1
    return f"{n:.0f} B" if u == 0 else f"{n:.2f} {units[u]}"


def parse_bytes(text: str) -> int:
    """Inverse of format_bytes: '1.23 GiB' -> bytes."""
    match = re.fullmatch(r"\s*([\d.]+)\s*(B|KiB|MiB|GiB|TiB)\s*", text)
    if not match:
        raise ValueError(f"cannot parse a byte count from '{text}'")
    scale = {"B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3, "TiB": 1024**4}[match.group(2)]
    return int(round(float(match.group(1)) * scale))


def print_param_count(cfg: dict) -> None:
    m, t, p = cfg["model"], cfg["training"], cfg["parameters"]
    flops = cfg["flops_per_step"]
    print(f"{cfg['path']}: {p['total']:,} parameters ({p['total'] / 1e6:.1f}M)")
    print(f"  embedding   {p['embedding']:>15,}   (V*C = {m['vocab_size']} x {m['dim']})")
    print(f"  blocks      {p['blocks']:>15,}   ({m['n_layers']} x {p['per_block']:,})")
    print(f"  head        {p['head']:>15,}   (final norm{'' if m['tie_embeddings'] else ' + LM head'})")
    print(f"  FLOPs per step (batch {t['batch_size']} x {t['seq_len']}): {flops['total']:.4g} "
          f"(matmul {flops['matmul']:.4g}, attention {flops['attention']:.4g})")


# ---------------------------------------------------------------------------
# The PyTorch side (runs in a child process: --worker-spec JSON).
# ---------------------------------------------------------------------------

def build_llama(torch, m: dict, max_seq: int, gqa: str):
    """Our architecture as an nn.Module whose forward(idx, targets) returns the mean loss.

    `gqa`: "native" uses scaled_dot_product_attention(enable_gqa=True);
    "repeat" repeats each kv head H/KV times (Hugging Face repeat_kv).
    """
    nn = torch.nn
    F = torch.nn.functional
    C, L, H, KV, FF, V = (m["dim"], m["n_layers"], m["n_heads"], m["n_kv_heads"],
                          m["ffn_dim"], m["vocab_size"])
    D = C // H
    eps = float(m["norm_eps"])
    has_rms_norm = hasattr(F, "rms_norm")

    class RMSNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(C))

        def forward(self, x):
            if has_rms_norm:
                return F.rms_norm(x, (C,), self.weight, eps)
            xf = x.float()
            y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
            return y.type_as(x) * self.weight

    def rotate_half(x):
        x1, x2 = x[..., : D // 2], x[..., D // 2:]
        return torch.cat((-x2, x1), dim=-1)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.wqkv = nn.Linear(C, (H + 2 * KV) * D, bias=False)  # rows: wq | wk | wv
            self.wo = nn.Linear(H * D, C, bias=False)

        def forward(self, x, cos, sin):
            B, T, _ = x.shape
            q, k, v = self.wqkv(x).split([H * D, KV * D, KV * D], dim=-1)
            q = q.view(B, T, H, D).transpose(1, 2)
            k = k.view(B, T, KV, D).transpose(1, 2)
            v = v.view(B, T, KV, D).transpose(1, 2)
            cos, sin = cos.to(q.dtype), sin.to(q.dtype)  # q, k are bf16 under autocast
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            if KV != H and gqa == "native":
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            else:
                if KV != H:  # query head h reads kv head h // (H / KV)
                    k = k.repeat_interleave(H // KV, dim=1)
                    v = v.repeat_interleave(H // KV, dim=1)
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.wo(y.transpose(1, 2).reshape(B, T, H * D))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.w13 = nn.Linear(C, 2 * FF, bias=False)  # rows: gate | up
            self.w2 = nn.Linear(FF, C, bias=False)

        def forward(self, x):
            gate, up = self.w13(x).chunk(2, dim=-1)
            return self.w2(F.silu(gate) * up)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn_norm = RMSNorm()
            self.attn = Attention()
            self.mlp_norm = RMSNorm()
            self.mlp = MLP()

        def forward(self, x, cos, sin):
            x = x + self.attn(self.attn_norm(x), cos, sin)
            return x + self.mlp(self.mlp_norm(x))

    class Llama(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(V, C)
            self.layers = nn.ModuleList(Block() for _ in range(L))
            self.norm = RMSNorm()
            self.lm_head = None if m["tie_embeddings"] else nn.Linear(C, V, bias=False)
            # RoPE tables (T, D), HF layout: angle(t, i) = t * theta^(-2i/D), both halves equal.
            inv_freq = 1.0 / (float(m["rope_theta"]) ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
            angles = torch.outer(torch.arange(max_seq, dtype=torch.float64), inv_freq)
            angles = torch.cat((angles, angles), dim=-1)
            self.register_buffer("cos", angles.cos().float(), persistent=False)
            self.register_buffer("sin", angles.sin().float(), persistent=False)

        def forward(self, idx, targets):
            T = idx.shape[1]
            x = self.embed(idx)
            cos, sin = self.cos[:T], self.sin[:T]
            for block in self.layers:
                x = block(x, cos, sin)
            x = self.norm(x)
            head = self.embed.weight if self.lm_head is None else self.lm_head.weight
            logits = F.linear(x, head)
            return F.cross_entropy(logits.float().view(-1, V), targets.reshape(-1))

    return Llama()


def init_like_ours(torch, model, m: dict) -> None:
    """normal(0, init_std) matrices, output projections (wo, w2) scaled by 1/sqrt(2L), norms 1."""
    std = float(m["init_std"])
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 2:
                scale = 1.0 / math.sqrt(2 * m["n_layers"]) if name.endswith(("attn.wo.weight", "mlp.w2.weight")) else 1.0
                p.normal_(0.0, std * scale)
            else:
                p.fill_(1.0)


def sdpa_supports_gqa(torch) -> bool:
    """Whether scaled_dot_product_attention accepts enable_gqa (PyTorch >= 2.5)."""
    try:
        q = torch.zeros(1, 2, 4, 8)
        kv = torch.zeros(1, 1, 4, 8)
        torch.nn.functional.scaled_dot_product_attention(q, kv, kv, is_causal=True, enable_gqa=True)
        return True
    except (TypeError, RuntimeError):
        return False


def is_oom(torch, error: BaseException) -> bool:
    oom_types = tuple(t for t in (getattr(torch, "OutOfMemoryError", None),
                                  getattr(torch.cuda, "OutOfMemoryError", None)) if t is not None)
    text = str(error).lower()
    return isinstance(error, oom_types) or "out of memory" in text or "cublas_status_alloc_failed" in text


def pytorch_measure(torch, spec: dict) -> dict:
    """Builds, compiles and times the PyTorch model for one (config, micro-batch, batch)."""
    import contextlib
    import inspect

    m, t = spec["model"], spec["training"]
    micro, batch, T = spec["micro_batch"], spec["batch_size"], t["seq_len"]
    if batch % micro != 0:
        raise SystemExit(f"error: batch_size {batch} is not a multiple of micro_batch_size {micro}")
    accum = batch // micro
    bf16 = t["precision"] == "bf16"
    device = torch.device(spec.get("device", "cuda"))
    cuda = device.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    torch.manual_seed(int(t["seed"]))

    gqa = spec["gqa"]
    if gqa == "auto":
        gqa = "native" if sdpa_supports_gqa(torch) else "repeat"
    with device:
        model = build_llama(torch, m, T, gqa)
    init_like_ours(torch, model, m)

    # Same parameter count as our layout, exactly.
    expected = spec["parameters"]
    n_params = sum(p.numel() for p in model.parameters())  # a tied weight is listed once
    if n_params != expected:
        raise SystemExit(f"error: PyTorch model has {n_params:,} parameters, our layout {expected:,}")

    # AdamW: decay on matrices only (as TensorSpec::weight_decay), fused when available.
    decay = [p for p in model.parameters() if p.dim() == 2]
    no_decay = [p for p in model.parameters() if p.dim() != 2]
    groups = [{"params": decay, "weight_decay": t["weight_decay"]},
              {"params": no_decay, "weight_decay": 0.0}]
    adam_kwargs = dict(lr=t["lr"], betas=(t["beta1"], t["beta2"]), eps=t["adam_eps"])
    optimizer, fused = None, False
    if "fused" in inspect.signature(torch.optim.AdamW).parameters:
        try:
            optimizer, fused = torch.optim.AdamW(groups, fused=True, **adam_kwargs), True
        except (RuntimeError, TypeError):
            pass  # this build cannot fuse: the default (foreach) implementation below
    if optimizer is None:
        optimizer = torch.optim.AdamW(groups, **adam_kwargs)

    step_model = model
    if spec["compile"]:
        compile_kwargs = {"dynamic": False}
        if spec.get("compile_mode"):
            compile_kwargs["mode"] = spec["compile_mode"]
        step_model = torch.compile(model, **compile_kwargs)

    # Uniform random tokens, one fixed batch (as ./train bench), split into micro-batches.
    generator = torch.Generator(device=device).manual_seed(int(t["seed"]))
    tokens = torch.randint(0, m["vocab_size"], (batch, T + 1), device=device, generator=generator)
    inputs = tokens[:, :-1].contiguous().view(accum, micro, T)
    targets = tokens[:, 1:].contiguous().view(accum, micro, T)

    params = list(model.parameters())
    grad_clip = float(t["grad_clip"])

    def train_step(step: int):
        lr = lr_at_step(t, step)
        for g in optimizer.param_groups:
            g["lr"] = lr
        loss_sum = None
        for i in range(accum):
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
                loss = step_model(inputs[i], targets[i])
            (loss / accum).backward()
            loss_sum = loss.detach() if loss_sum is None else loss_sum + loss.detach()
        if grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(params, grad_clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss_sum / accum

    sdpa_context = contextlib.nullcontext()
    if spec["sdpa_backend"] != "auto":
        from torch.nn.attention import SDPBackend, sdpa_kernel
        backend = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
                   "cudnn": SDPBackend.CUDNN_ATTENTION, "math": SDPBackend.MATH}[spec["sdpa_backend"]]
        sdpa_context = sdpa_kernel([backend])

    if cuda:
        torch.cuda.reset_peak_memory_stats()
    with sdpa_context:
        start = time.perf_counter()
        first_loss = None
        for s in range(spec["warmup"]):  # compilation happens in the first one
            loss = train_step(s)
            if first_loss is None:
                first_loss = loss.item()
        sync()
        warmup_seconds = time.perf_counter() - start
        start = time.perf_counter()
        for s in range(spec["warmup"], spec["warmup"] + spec["steps"]):
            loss = train_step(s)
        sync()
        seconds = (time.perf_counter() - start) / spec["steps"]
    return {
        "oom": False,
        "gpu": torch.cuda.get_device_name() if cuda else "cpu",
        "torch_version": torch.__version__,
        "compiled": bool(spec["compile"]),
        "gqa": gqa,
        "fused_adamw": fused,
        "rms_norm": "F.rms_norm" if hasattr(torch.nn.functional, "rms_norm") else "manual",
        "parameters": n_params,
        "micro_batch": micro,
        "batch_size": batch,
        "seq_len": T,
        "step_ms": seconds * 1e3,
        "tokens_per_s": batch * T / seconds,
        "mfu_percent": mfu_percent(spec["flops_per_step"], seconds, spec["peak_tflops"]),
        "peak_memory_bytes": torch.cuda.max_memory_allocated() if cuda else None,
        "peak_reserved_bytes": torch.cuda.max_memory_reserved() if cuda else None,
        "warmup_seconds": warmup_seconds,
        "first_loss": first_loss,
        "last_loss": loss.item(),
    }


def pytorch_worker(spec_json: str) -> int:
    """Child-process entry: one measurement, one result line on stdout."""
    import torch

    spec = json.loads(spec_json)
    if spec.get("device", "cuda") == "cuda" and not torch.cuda.is_available():
        raise SystemExit("error: PyTorch sees no CUDA GPU")
    try:
        result = pytorch_measure(torch, spec)
    except Exception as e:  # noqa: BLE001 - only OOM is a result, the rest re-raises
        if not is_oom(torch, e):
            raise
        result = {"oom": True, "error": str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__}
    print(RESULT_MARK + json.dumps(result), flush=True)
    return 0


# ---------------------------------------------------------------------------
# Running both implementations (parent process).
# ---------------------------------------------------------------------------

def tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def run_pytorch(args, cfg: dict, micro: int, batch: int) -> dict:
    counts = model_counts(args.train_binary, cfg["name"], micro, batch)
    spec = {
        "model": cfg["model"], "training": cfg["training"], "micro_batch": micro, "batch_size": batch,
        "parameters": counts["parameters"]["total"], "flops_per_step": counts["flops_per_step"]["total"],
        "steps": args.steps, "warmup": args.warmup, "compile": not args.no_compile,
        "compile_mode": args.compile_mode, "gqa": args.gqa, "sdpa_backend": args.sdpa_backend,
        "peak_tflops": args.peak_tflops, "device": args.pytorch_device,
    }
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker-spec", json.dumps(spec, separators=(",", ":"))]
    print(f"  running PyTorch, micro-batch {micro}, batch {batch} ...", flush=True)
    result = {"command": shlex.join(cmd), "micro_batch": micro, "batch_size": batch}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return dict(result, error=f"timed out after {args.timeout} s")
    if args.verbose:
        print(proc.stdout + proc.stderr)
    lines = [line for line in proc.stdout.splitlines() if line.startswith(RESULT_MARK)]
    if proc.returncode == 0 and lines:
        return dict(result, **json.loads(lines[-1][len(RESULT_MARK):]))
    if "out of memory" in (proc.stderr + proc.stdout).lower():
        return dict(result, oom=True, error="out of memory")
    print(f"  PyTorch failed (exit {proc.returncode}):\n{tail(proc.stderr or proc.stdout)}", flush=True)
    return dict(result, error=f"exit status {proc.returncode}")


def parse_ours(text: str, flops_per_step: float, peak_tflops: float) -> dict:
    """Reads what benchmark_run prints (commands/benchmark.cpp)."""
    out = {}
    if match := re.search(r"^benchmark \S+ \((\d+) parameters", text, re.M):
        out["parameters"] = int(match.group(1))
    if match := re.search(r"^\s*step time\s+([\d.]+) ms", text, re.M):
        out["step_ms"] = float(match.group(1))
    if match := re.search(r"^\s*tokens/s\s+([\d.]+)", text, re.M):
        out["tokens_per_s"] = float(match.group(1))
    if match := re.search(r"=\s*([\d.]+)% of the peak \(MFU\)", text):
        out["mfu_percent"] = float(match.group(1))
    elif "step_ms" in out:  # not on a GPU (sgemm rate): compute it against the GPU peak anyway
        out["mfu_percent"] = mfu_percent(flops_per_step, out["step_ms"] / 1e3, peak_tflops)
    if match := re.search(r"activations ([\d.]+ \w+), model state ([\d.]+ \w+)", text):
        out["activation_bytes"] = parse_bytes(match.group(1))
        out["model_state_bytes"] = parse_bytes(match.group(2))
        out["peak_memory_bytes"] = out["activation_bytes"] + out["model_state_bytes"]
    return out


def run_ours(args, cfg: dict, micro: int, batch: int) -> dict:
    t = cfg["training"]
    binary = args.train_binary
    cmd = [binary, "bench", "--config", cfg["name"], "--bench-steps", str(args.steps),
           "--peak-tflops", f"{args.peak_tflops:g}"]
    if t["device"] != "cuda":
        cmd.append("--training.device=cuda")
    if args.find_max_micro_batch or micro != t["micro_batch_size"] or batch != t["batch_size"]:
        cmd += [f"--training.micro_batch_size={micro}", f"--training.batch_size={batch}"]
    print(f"  running ours, micro-batch {micro}, batch {batch} ...", flush=True)
    result = {"command": shlex.join(cmd), "micro_batch": micro, "batch_size": batch}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO_ROOT, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return dict(result, error=f"timed out after {args.timeout} s")
    except OSError as e:
        return dict(result, error=f"cannot run {binary}: {e}")
    if args.verbose:
        print(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        if "out of memory" in proc.stderr.lower() or "needs" in proc.stderr:
            return dict(result, oom=True, error=tail(proc.stderr, 1))
        print(f"  ours failed (exit {proc.returncode}):\n{tail(proc.stderr or proc.stdout)}", flush=True)
        return dict(result, error=f"exit status {proc.returncode}")
    flops = model_counts(binary, cfg["name"], micro, batch)["flops_per_step"]["total"]
    parsed = parse_ours(proc.stdout, flops, args.peak_tflops)
    if "tokens_per_s" not in parsed:
        print(f"  could not parse ours' output:\n{tail(proc.stdout)}", flush=True)
        return dict(result, error="unparsable output", output=proc.stdout)
    return dict(result, oom=False, **parsed)


def write_json_report(path: str, report: dict) -> None:
    with open(path, "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    print(f"results written to {path}")


def ok(r: dict | None) -> bool:
    return bool(r) and not r.get("oom") and not r.get("error")


def pytorch_label(r: dict | None) -> str:
    if r and r.get("torch_version"):
        return f"PyTorch {r['torch_version'].split('+')[0]} ({'compile' if r.get('compiled') else 'eager'})"
    return "PyTorch"


def row(name: str, r: dict | None, memory_note: str) -> str:
    if r is None:
        return f"{name:<26} {'(skipped)':>8}"
    if not ok(r):
        status = "OOM" if r.get("oom") else "failed: " + r.get("error", "?")
        return f"{name:<26} {r.get('micro_batch', '-')!s:>6}  {status}"
    return (f"{name:<26} {r['micro_batch']:>6} {r['tokens_per_s']:>12,.0f} {r['mfu_percent']:>7.1f}% "
            f"{format_bytes(r.get('peak_memory_bytes')):>12}  {memory_note}")


def print_table(cfg: dict, micro: int, batch: int, ours: dict | None, torch_r: dict | None) -> dict:
    """Side-by-side table of one config; returns the ratios ours / PyTorch."""
    t = cfg["training"]
    print(f"\n{cfg['path']}: batch {batch} x {t['seq_len']} tokens, micro-batch {micro}")
    print(f"{'implementation':<26} {'micro':>6} {'tokens/s':>12} {'MFU':>8} {'peak memory':>12}")
    print(row("ours (./train bench)", ours, "arena bytes: activations + model state"))
    print(row(pytorch_label(torch_r), torch_r, "torch.cuda.max_memory_allocated"))
    ratios = {}
    if ok(ours) and ok(torch_r):
        ratios = {
            "tokens_per_s": ours["tokens_per_s"] / torch_r["tokens_per_s"],
            "mfu": ours["mfu_percent"] / torch_r["mfu_percent"],
        }
        if ours.get("peak_memory_bytes") and torch_r.get("peak_memory_bytes"):
            ratios["peak_memory"] = ours["peak_memory_bytes"] / torch_r["peak_memory_bytes"]
        memory = f"{ratios['peak_memory']:>11.2f}x" if "peak_memory" in ratios else f"{'-':>12}"
        print(f"{'ours / PyTorch':<26} {'':>6} {ratios['tokens_per_s']:>11.2f}x {ratios['mfu']:>7.2f}x {memory}")
    return ratios


def check_param_counts(cfg: dict, ours: dict | None, torch_r: dict | None) -> bool:
    """Prints our layout's count next to each implementation's; True when all match."""
    expected = cfg["parameters"]["total"]
    good = True
    line = f"  parameters: layout {expected:,}"
    for name, r in (("PyTorch", torch_r), ("ours", ours)):
        if r and r.get("parameters") is not None:
            match = r["parameters"] == expected
            good &= match
            line += f", {name} {r['parameters']:,} ({'match' if match else 'MISMATCH'})"
    print(line)
    return good


def gpu_name_without_torch() -> str | None:
    if not shutil.which("nvidia-smi"):
        return None
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout
        return out.strip().splitlines()[0] if out.strip() else None
    except (OSError, subprocess.TimeoutExpired):
        return None


def search_max_micro_batch(run, start: int, cap: int) -> tuple[int | None, dict | None, list]:
    """Largest micro-batch (batch = micro-batch) that runs: from `start`, halving
    while it does not fit, else doubling until it does not (or `cap`)."""
    trials = []

    def attempt(mb):
        r = run(mb, mb)
        trials.append(r)
        print(f"    micro-batch {mb}: " + ("fits, " + format_bytes(r.get("peak_memory_bytes")) if ok(r)
                                          else "OOM" if r.get("oom") else "failed: " + r.get("error", "?")),
              flush=True)
        return r

    mb = start
    r = attempt(mb)
    while not ok(r) and r.get("oom") and mb > 1:
        mb //= 2
        r = attempt(mb)
    if not ok(r):
        return None, None, trials
    best, best_r = mb, r
    while mb * 2 <= cap:
        mb *= 2
        r = attempt(mb)
        if not ok(r):
            break
        best, best_r = mb, r
    return best, best_r, trials


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", action="append", default=None,
                        help=f"TOML config (path or name in configs/); repeatable or comma list "
                             f"(default {DEFAULT_CONFIGS})")
    parser.add_argument("--steps", type=int, default=10, help="timed steps (default 10)")
    parser.add_argument("--warmup", type=int, default=3,
                        help="PyTorch warm-up steps before timing, compilation included (default 3; "
                             "./train bench always does one)")
    parser.add_argument("--micro-batch", type=int, default=None,
                        help="override training.micro_batch_size for both (batch_size is rounded up "
                             "to a multiple of it); with --find-max-micro-batch, the starting point")
    parser.add_argument("--find-max-micro-batch", action="store_true",
                        help="search the largest micro-batch (= batch) that fits, for both implementations")
    parser.add_argument("--max-micro-batch", type=int, default=4096, help="cap of that search (default 4096)")
    parser.add_argument("--peak-tflops", type=float, default=989.0,
                        help="GPU dense bf16 peak for MFU (default 989, H100 SXM)")
    parser.add_argument("--train-binary", default=str(REPO_ROOT / "train"),
                        help="our trainer (default ./train at the repository root)")
    parser.add_argument("--no-compile", action="store_true", help="run PyTorch eagerly, without torch.compile")
    parser.add_argument("--compile-mode", default=None,
                        help="torch.compile mode, e.g. max-autotune-no-cudagraphs (default: torch's default)")
    parser.add_argument("--gqa", choices=["auto", "native", "repeat"], default="auto",
                        help="GQA in PyTorch: SDPA enable_gqa (native), repeated kv heads, or native "
                             "when this torch has it (auto, default)")
    parser.add_argument("--sdpa-backend", choices=["auto", "flash", "cudnn", "efficient", "math"], default="auto",
                        help="restrict PyTorch's attention kernel (default: PyTorch chooses)")
    parser.add_argument("--skip-ours", action="store_true", help="run only PyTorch")
    parser.add_argument("--skip-pytorch", action="store_true", help="run only ours")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per run before giving up (default 1800)")
    parser.add_argument("--json-out", default=None, help="write all results to this JSON file")
    parser.add_argument("--verbose", action="store_true", help="echo each run's full output")
    parser.add_argument("--param-count-only", action="store_true",
                        help="print each config's parameter count and FLOPs per step (no torch, no GPU) and exit")
    parser.add_argument("--pytorch-device", default="cuda",
                        help="device of the PyTorch run (default cuda; cpu only smoke-tests this script "
                             "without a GPU, with --skip-ours)")
    parser.add_argument("--worker-spec", default=None, help=argparse.SUPPRESS)  # internal: one PyTorch run
    args = parser.parse_args()

    if args.worker_spec is not None:
        return pytorch_worker(args.worker_spec)

    names = [n.strip() for item in (args.config or [DEFAULT_CONFIGS]) for n in item.split(",") if n.strip()]
    configs = [load_config(args.train_binary, n) for n in names]

    if args.param_count_only:
        for cfg in configs:
            print_param_count(dict(cfg, flops_per_step=model_counts(args.train_binary, cfg["name"])["flops_per_step"]))
        return 0

    if args.steps < 1 or args.warmup < 1:
        parser.error("--steps and --warmup must be at least 1")
    if args.skip_ours and args.skip_pytorch:
        parser.error("--skip-ours and --skip-pytorch leave nothing to run")
    if not args.skip_pytorch:
        import importlib.util
        if importlib.util.find_spec("torch") is None:
            raise SystemExit("error: PyTorch is not installed (pip install torch), or pass --skip-pytorch")
    if not args.skip_ours and not os.access(args.train_binary, os.X_OK):
        raise SystemExit(f"error: {args.train_binary} is not an executable; build it (make) on a machine "
                         f"with nvcc, pass --train-binary, or pass --skip-ours")

    date = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    invocation = shlex.join([sys.executable, *sys.argv])
    report = {"date": date, "command": invocation, "peak_tflops": args.peak_tflops,
              "mode": "find-max-micro-batch" if args.find_max_micro_batch else "compare", "results": []}
    gpu = None
    all_good = True

    for cfg in configs:
        t = cfg["training"]
        print(f"\n== {cfg['path']} ({cfg['parameters']['total']:,} parameters)", flush=True)
        entry = {"config": cfg["path"], "parameters": cfg["parameters"]["total"],
                 "seq_len": t["seq_len"]}
        if args.find_max_micro_batch:
            start = args.micro_batch or t["micro_batch_size"]
            for key, skip, run in (("ours", args.skip_ours, lambda mb, b: run_ours(args, cfg, mb, b)),
                                   ("pytorch", args.skip_pytorch, lambda mb, b: run_pytorch(args, cfg, mb, b))):
                if skip:
                    continue
                print(f"  {key}: searching the largest micro-batch from {start}", flush=True)
                best, best_r, trials = search_max_micro_batch(run, start, args.max_micro_batch)
                entry[key] = {"max_micro_batch": best, "at_max": best_r, "trials": trials}
                all_good &= best is not None
            nothing = {"error": "no micro-batch ran"}
            ours_best = entry["ours"]["at_max"] or nothing if "ours" in entry else None
            torch_best = entry["pytorch"]["at_max"] or nothing if "pytorch" in entry else None
            print(f"\n{cfg['path']}: largest micro-batch that fits (batch = micro-batch, seq_len {t['seq_len']})")
            print(f"{'implementation':<26} {'micro':>6} {'tokens/s':>12} {'MFU':>8} {'peak memory':>12}")
            print(row("ours (./train bench)", ours_best, "arena bytes: activations + model state"))
            print(row(pytorch_label(torch_best), torch_best, "torch.cuda.max_memory_allocated"))
            if ok(ours_best) and ok(torch_best):
                entry["ratio_ours_over_pytorch"] = {
                    "max_micro_batch": ours_best["micro_batch"] / torch_best["micro_batch"],
                    "tokens_per_s": ours_best["tokens_per_s"] / torch_best["tokens_per_s"],
                }
                print(f"{'ours / PyTorch':<26} {entry['ratio_ours_over_pytorch']['max_micro_batch']:>5.2f}x "
                      f"{entry['ratio_ours_over_pytorch']['tokens_per_s']:>11.2f}x")
            all_good &= check_param_counts(cfg, ours_best, torch_best)
            gpu = gpu or (torch_best or {}).get("gpu")
        else:
            micro = args.micro_batch or t["micro_batch_size"]
            batch = t["batch_size"]
            if batch % micro != 0:
                batch = micro * -(-batch // micro)
                print(f"  batch_size {t['batch_size']} is not a multiple of micro-batch {micro}: using {batch}")
            ours = None if args.skip_ours else run_ours(args, cfg, micro, batch)
            torch_r = None if args.skip_pytorch else run_pytorch(args, cfg, micro, batch)
            ratios = print_table(cfg, micro, batch, ours, torch_r)
            all_good &= check_param_counts(cfg, ours, torch_r)
            all_good &= all(r is None or ok(r) for r in (ours, torch_r))
            entry.update(micro_batch=micro, batch_size=batch, ours=ours, pytorch=torch_r,
                         ratio_ours_over_pytorch=ratios)
            gpu = gpu or (torch_r or {}).get("gpu")
        report["results"].append(entry)

    report["gpu"] = gpu or gpu_name_without_torch() or "unknown"
    print(f"\nGPU: {report['gpu']}   date: {date}   peak for MFU: {args.peak_tflops:g} TFLOP/s")
    print("MFU = model FLOPs per step (./train config --counts) / step time / peak")
    print(f"command: {invocation}")
    for entry in report["results"]:
        for key in ("ours", "pytorch"):
            r = entry.get(key)
            if not r:
                continue
            runs = r["trials"] if "trials" in r else [r]
            for one in runs:
                if one and one.get("command"):
                    print(f"  {key}: {one['command']}")
    if args.json_out:
        write_json_report(args.json_out, report)
    return 0 if all_good else 1


if __name__ == "__main__":
    sys.exit(main())
