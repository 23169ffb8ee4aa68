#!/usr/bin/env python3
"""Mutation testing: does `make test` notice small, realistic bugs?

Applies each mutation below to a scratch copy of the repository (never to the
working tree), one at a time, rebuilds there and runs the test suite, and
prints a table: caught (some test failed; the suite stops at the first
failure, which is named) or survived. A mutation whose text no longer appears
in its file is reported as "stale" (the code moved on; update the mutation),
never silently skipped.
Not part of `make test`: each row is a rebuild and a suite run.

    python3 tools/mutate.py [--only NAME ...] [--jobs 2] [--commit REV] [--intended]

--commit REV tests that commit as it is (default: HEAD plus the working
tree's uncommitted edits to tracked files), e.g. to make a "before" table.
"""
import argparse
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

# name, file, original text, mutated text, what the bug is.
MUTATIONS = [
    ("adamw_t_off_by_one", "trainer/trainer.cpp",
     "clip_scale(result.grad_norm, static_cast<float>(t.grad_clip)), step + 1}",
     "clip_scale(result.grad_norm, static_cast<float>(t.grad_clip)), step + 2}",
     "AdamW bias correction uses t = step + 2"),
    ("decay_norm_gains", "model/layout.cpp",
     "bool is_matrix = shape.size() == 2;",
     "bool is_matrix = shape.size() >= 1;",
     "weight decay also applied to the RMSNorm gains"),
    ("no_grad_clip", "model/optimizer.cpp",
     "if (clip <= 0 || !(grad_norm > clip)) return 1.0f;",
     "return 1.0f;",
     "gradient clipping never applied"),
    ("data_position_step_times_micro", "trainer/trainer.cpp",
     "int64_t position = static_cast<int64_t>(step) * t.batch_size +",
     "int64_t position = static_cast<int64_t>(step) * t.micro_batch_size +",
     "data position computed from step * micro_batch"),
    ("hf_config_key_typo", "interop/hf_llama.cpp",
     '{"num_key_value_heads", config.n_kv_heads},',
     '{"num_key_value_head", config.n_kv_heads},',
     "a typo in an exported Hugging Face config key"),
    ("rmsnorm_eps_outside_sqrt", "model/kernels/rmsnorm.cpp",
     "(float)(1.0 / std::sqrt(sum_sq / C + eps))",
     "(float)(1.0 / (std::sqrt(sum_sq / C) + eps))",
     "RMSNorm eps added outside the square root"),
    ("gqa_head_mapping_modulo", "model/kernels/attention.cpp",
     "(size_t)(H + h / group) * D;",
     "(size_t)(H + h % KV) * D;",
     "query head h reads kv head h % KV instead of h / (H / KV)"),
    ("cosine_without_floor", "model/optimizer.cpp",
     "return static_cast<float>(floor + (peak - floor) * shape);",
     "return static_cast<float>(peak * shape);",
     "the LR schedule decays to 0 instead of min_lr_ratio"),
    ("warmup_off_by_one", "model/optimizer.cpp",
     "return static_cast<float>(peak * (step + 1) / c.warmup_steps);",
     "return static_cast<float>(peak * step / c.warmup_steps);",
     "warmup starts at lr 0 (step instead of step + 1)"),
    ("bf16_truncates", "runtime/bf16.h",
     "return static_cast<uint16_t>((bits + 0x7FFFu + lsb) >> 16);",
     "return static_cast<uint16_t>(bits >> 16);",
     "fp32 -> bf16 truncates instead of rounding to nearest even"),
    ("loss_scale_per_micro_batch", "trainer/trainer.cpp",
     "const float dloss = 1.0f / (static_cast<float>(t.batch_size) * t.seq_len);",
     "const float dloss = 1.0f / (static_cast<float>(t.micro_batch_size) * t.seq_len);",
     "the loss gradient is scaled per micro-batch, not per global batch"),
    ("spike_guard_never_skips", "trainer/spike_guard.cpp",
     "if (!reason.empty()) return SpikeVerdict{reason, median_loss, median_grad_norm};",
     "(void)median_grad_norm;",
     "the spike guard never skips"),
]


# The tests written to catch each mutation (a ctest -R regex). With
# --intended only these run, so a row says whether the test meant for the bug
# catches it, not whichever test happened to fail first.
INTENDED = {
    "adamw_t_off_by_one": "TrainingStepReference",
    "decay_norm_gains": "TrainingStepReference",
    "no_grad_clip": "TrainingStepReference",
    "data_position_step_times_micro": "TrainingStepReference",
    "hf_config_key_typo": "HfReference.ExportedConfigUsesTransformersKeyNames",
    "rmsnorm_eps_outside_sqrt": "TiedNormEpsNearMeanSquare|rmsnorm_forward",
    "gqa_head_mapping_modulo": "UntiedGroupedQueryAttention|Cpu/Op.Case/attention",
    "cosine_without_floor": "TrainingStepReference|Schedule.WarmupThenCosineToTheFloor",
    "warmup_off_by_one": "TrainingStepReference|Schedule.WarmupThenCosineToTheFloor",
    "bf16_truncates": "Bf16.TiesRoundToEven",
    "loss_scale_per_micro_batch": "TrainingStepReference",
    "spike_guard_never_skips": "SpikeGuard",
}


def run(cmd, cwd, log):
    with open(log, "a") as out:
        return subprocess.run(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT).returncode


def failing_tests(log: pathlib.Path) -> str:
    names = []
    lines = log.read_text(errors="replace").splitlines()
    if "The following tests FAILED:" in lines:
        for line in lines[lines.index("The following tests FAILED:") + 1:]:
            if " - " not in line:
                break
            names.append(line.split(" - ", 1)[1].split(" (")[0].strip())
    return ", ".join(names[:3]) + (" ..." if len(names) > 3 else "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="mutation names to run (default: all)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--commit", help="test this commit alone, without uncommitted edits")
    parser.add_argument("--intended", action="store_true",
                        help="run only each mutation's intended tests (INTENDED), not the suite")
    args = parser.parse_args()
    root = pathlib.Path(__file__).resolve().parent.parent
    chosen = [m for m in MUTATIONS if not args.only or m[0] in args.only]

    scratch = pathlib.Path(tempfile.mkdtemp(prefix="llm_mutate_"))
    tree = scratch / "tree"
    print(f"copying the repository to {tree} and building it once", flush=True)
    subprocess.run(["git", "worktree", "add", "--detach", "-q", str(tree), args.commit or "HEAD"],
                   cwd=root, check=True)
    if not args.commit:
        for path in subprocess.check_output(["git", "diff", "--name-only", "HEAD"], cwd=root,
                                            text=True).split():
            if (root / path).exists():
                shutil.copy2(root / path, tree / path)  # uncommitted edits come along
    build = ["cmake", "--build", "build", "-j", str(args.jobs)]
    configure = ["cmake", "-S", ".", "-B", "build", "-DCMAKE_BUILD_TYPE=Release", "-DLLM_CUDA=OFF"]
    setup_log = scratch / "setup.log"
    if run(configure, tree, setup_log) or run(build, tree, setup_log):
        print(f"the unmutated tree does not build: see {setup_log}")
        return 1
    if args.intended:
        listed = subprocess.run(["ctest", "--test-dir", "build", "-N", "-R",
                                 "|".join(INTENDED[m[0]] for m in chosen)],
                                cwd=tree, capture_output=True, text=True).stdout
        for name, *_ in chosen:
            if not any(part in listed for part in INTENDED[name].split("|")):
                print(f"{name}: no ctest entry matches its intended tests '{INTENDED[name]}'")
                return 1
    if run(["ctest", "--test-dir", "build", "-j", str(args.jobs)] +
           (["-R", "|".join(INTENDED[m[0]] for m in chosen)] if args.intended else []),
           tree, setup_log):
        print(f"the unmutated tree fails its tests: see {setup_log}")
        return 1

    rows = []
    try:
        for name, file, original, mutated, what in chosen:
            source = tree / file
            text = source.read_text()
            if text.count(original) != 1:
                rows.append((name, "stale", f"'{original}' found {text.count(original)} times in {file}"))
                continue
            source.write_text(text.replace(original, mutated))
            log = scratch / f"{name}.log"
            start = time.time()
            if run(build, tree, log):
                verdict, detail = "caught", "does not compile"
            elif run(["ctest", "--test-dir", "build", "-j", str(args.jobs), "--stop-on-failure"] +
                     (["-R", INTENDED[name]] if args.intended else []), tree, log):
                verdict, detail = "caught", failing_tests(log)
            else:
                verdict, detail = "SURVIVED", what
            source.write_text(text)
            rows.append((name, verdict, detail))
            print(f"{name}: {verdict} ({time.time() - start:.0f} s) {detail}", flush=True)
        run(build, tree, setup_log)
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=root)
        shutil.rmtree(scratch, ignore_errors=True)

    print("\n| mutation | result | first failing tests / what survived |\n|---|---|---|")
    for name, verdict, detail in rows:
        print(f"| {name} | {verdict} | {detail} |")
    return 0 if all(v == "caught" for _, v, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
