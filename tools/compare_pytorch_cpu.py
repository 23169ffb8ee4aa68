#!/usr/bin/env python3
"""Compare our trainer's CPU throughput with the same model in PyTorch eager.

For each TOML config (default configs/3m.toml and configs/25m.toml) this
script runs, one after the other and with the same number of threads
(--threads, default OMP_NUM_THREADS or all cores):

  - ours:    OMP_NUM_THREADS=N ./train bench --config CFG --bench-steps S
  - PyTorch: the Llama of tools/compare_pytorch.py (same layers, parameter
             count checked equal to ours), fp32, eager (no torch.compile),
             torch's intra-op threads = N, AdamW, gradient clipping and
             accumulation as ours, on uniform random tokens; --warmup steps,
             then S timed steps.

--rounds R repeats the pair R times, alternating, and keeps each side's best
tokens/s: on a shared machine a neighbour's burst then slows one round rather
than the verdict. It prints both figures, the ratio ours / PyTorch, each
side's achieved GFLOP/s as a share of the sgemm rate that ours measures
(the same FLOP count for both: our trainer's, `./train config --counts`), the CPU
model, the date and the exact commands.

Not part of `make test`; it needs PyTorch (pip install torch) and a built
./train:

    python3 tools/compare_pytorch_cpu.py
    python3 tools/compare_pytorch_cpu.py --config 3m --rounds 5 --json-out cpu_cmp.json
"""
from __future__ import annotations

import argparse
import datetime
import importlib.util
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare_pytorch as gpu_compare  # noqa: E402  (the shared model, and our config and counts)

DEFAULT_CONFIGS = "configs/3m.toml,configs/25m.toml"


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def cpu_vector_isa() -> str:
    """The widest vector extensions the kernels may use, from the CPU flags."""
    try:
        flags = set(open("/proc/cpuinfo").read().split())
    except OSError:
        return "unknown"
    names = [name for name in ("avx2", "avx512f", "avx512_bf16", "amx_tile") if name in flags]
    return ", ".join(names) or "no AVX2"


def run_ours(args, cfg: dict, env: dict) -> dict:
    cmd = [args.train_binary, "bench", "--config", cfg["name"], "--bench-steps", str(args.steps)]
    result = {"command": f"OMP_NUM_THREADS={env['OMP_NUM_THREADS']} {shlex.join(cmd)}"}
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=gpu_compare.REPO_ROOT, env=env,
                          timeout=args.timeout)
    if proc.returncode != 0:
        return dict(result, error=f"exit status {proc.returncode}: {gpu_compare.tail(proc.stderr, 3)}")
    text = proc.stdout
    tokens = re.search(r"^\s*tokens/s\s+([\d.]+)", text, re.M)
    sgemm = re.search(r"sgemm 2048\^3 rate\s+([\d.]+) GFLOP/s", text)
    if not tokens or not sgemm:
        return dict(result, error="unparsable output:\n" + gpu_compare.tail(text))
    return dict(result, tokens_per_s=float(tokens.group(1)), sgemm_gflops=float(sgemm.group(1)))


def run_pytorch(args, cfg: dict) -> dict:
    t = cfg["training"]
    worker_args = argparse.Namespace(
        steps=args.steps, warmup=args.warmup, no_compile=True, compile_mode=None, gqa="auto",
        sdpa_backend="auto", peak_tflops=1.0, pytorch_device="cpu", timeout=args.timeout,
        verbose=args.verbose, train_binary=args.train_binary)
    return gpu_compare.run_pytorch(worker_args, cfg, t["micro_batch_size"], t["batch_size"])


def best(runs: list[dict]) -> dict | None:
    good = [r for r in runs if "tokens_per_s" in r and not r.get("error")]
    return max(good, key=lambda r: r["tokens_per_s"]) if good else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", action="append", default=None,
                        help=f"TOML config (path or name in configs/); repeatable or comma list "
                             f"(default {DEFAULT_CONFIGS})")
    parser.add_argument("--threads", type=int, default=None,
                        help="threads of both (default OMP_NUM_THREADS, else all cores)")
    parser.add_argument("--steps", type=int, default=5, help="timed steps per run (default 5)")
    parser.add_argument("--warmup", type=int, default=2, help="PyTorch untimed steps first (default 2; ours does 1)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating runs of each side; best kept (default 3)")
    parser.add_argument("--train-binary", default=str(gpu_compare.REPO_ROOT / "train"),
                        help="our trainer (default ./train at the repository root)")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per run before giving up (default 1800)")
    parser.add_argument("--json-out", default=None, help="write all results to this JSON file")
    parser.add_argument("--verbose", action="store_true", help="echo each PyTorch run's full output")
    args = parser.parse_args()

    if args.steps < 1 or args.warmup < 1 or args.rounds < 1:
        parser.error("--steps, --warmup and --rounds must be at least 1")
    if importlib.util.find_spec("torch") is None:
        raise SystemExit("error: PyTorch is not installed (pip install torch)")
    if not os.access(args.train_binary, os.X_OK):
        raise SystemExit(f"error: {args.train_binary} is not an executable: build it (make build)")
    threads = args.threads or int(os.environ.get("OMP_NUM_THREADS") or os.cpu_count() or 1)
    os.environ["OMP_NUM_THREADS"] = str(threads)  # ours and the PyTorch workers inherit it
    env = dict(os.environ)

    names = [n.strip() for item in (args.config or [DEFAULT_CONFIGS]) for n in item.split(",") if n.strip()]
    configs = [gpu_compare.load_config(args.train_binary, n) for n in names]
    date = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    report = {"date": date, "cpu": cpu_model(), "isa": cpu_vector_isa(), "threads": threads,
              "command": shlex.join([sys.executable, *sys.argv]), "results": []}
    all_good = True
    for cfg in configs:
        t = cfg["training"]
        if t["precision"] != "fp32":
            raise SystemExit(f"error: {cfg['path']}: this comparison is fp32 (training.precision = {t['precision']})")
        params = cfg["parameters"]["total"]
        flops = gpu_compare.model_counts(args.train_binary, cfg["name"])["flops_per_step"]["total"]
        tokens_per_step = t["batch_size"] * t["seq_len"]
        print(f"\n== {cfg['path']}: {params:,} parameters, batch {t['batch_size']} x {t['seq_len']} "
              f"tokens, micro-batch {t['micro_batch_size']}, {threads} threads", flush=True)
        ours_runs, torch_runs = [], []
        for r in range(args.rounds):
            ours_runs.append(run_ours(args, cfg, env))
            torch_runs.append(run_pytorch(args, cfg))
            shown = [f"{x['tokens_per_s']:,.0f}" if "tokens_per_s" in x else "failed" for x in (ours_runs[-1], torch_runs[-1])]
            print(f"  round {r + 1}: ours {shown[0]} tok/s, PyTorch {shown[1]} tok/s", flush=True)
        ours, torch_r = best(ours_runs), best(torch_runs)
        for name, runs in (("ours", ours_runs), ("PyTorch", torch_runs)):
            for x in runs:
                if x.get("error"):
                    print(f"  {name} failed: {x['error']}")
        entry = {"config": cfg["path"], "parameters": params, "ours_runs": ours_runs, "pytorch_runs": torch_runs}
        if torch_r and torch_r.get("parameters") != params:
            print(f"  parameter counts differ: ours {params:,}, PyTorch {torch_r.get('parameters')}")
            all_good = False
        if ours and torch_r:
            sgemm = ours["sgemm_gflops"]
            ratio = ours["tokens_per_s"] / torch_r["tokens_per_s"]
            print(f"  {'':<24} {'tokens/s':>10} {'GFLOP/s':>9} {'of sgemm':>9}")
            for label, x in (("ours (./train bench)", ours), (gpu_compare.pytorch_label(torch_r), torch_r)):
                gflops = flops * x["tokens_per_s"] / tokens_per_step / 1e9
                print(f"  {label:<24} {x['tokens_per_s']:>10,.0f} {gflops:>9.1f} {100 * gflops / sgemm:>8.1f}%")
            print(f"  ours / PyTorch: {ratio:.2f}x   (best of {args.rounds}; sgemm 2048^3 rate {sgemm:.1f} GFLOP/s)")
            entry.update(ours=ours, pytorch=torch_r, ratio=ratio)
        else:
            all_good = False
        report["results"].append(entry)

    print(f"\nCPU: {report['cpu']} ({report['isa']}), {threads} threads   date: {date}")
    print(f"command: {report['command']}")
    for entry in report["results"]:
        for key in ("ours", "pytorch"):
            if entry.get(key):
                print(f"  {key}: {entry[key]['command']}")
    if args.json_out:
        gpu_compare.write_json_report(args.json_out, report)
    return 0 if all_good else 1


if __name__ == "__main__":
    sys.exit(main())
