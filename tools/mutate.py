#!/usr/bin/env python3
"""Mutation testing: does `make test` notice small, realistic bugs?

Applies each mutation below to a scratch copy of the repository (never to the
working tree), one at a time, rebuilds there and runs the test suite, and
prints a table: caught (some test failed; the suite stops at the first
failure, which is named) or survived. A mutation whose text no longer appears
in its file is reported as "stale" (the code moved on; update the mutation),
never silently skipped. The scratch tree is configured as `make test` does
(the CUDA sources under emulation too, so a mutation in a .cu file or in
cuda_emulation/ can be caught). Tests that already fail unmutated are named
and left out of every row, not a reason to stop.
Not part of `make test`: each row is a rebuild and a suite run.

    python3 tools/mutate.py [--only NAME ...] [--jobs 2] [--commit REV] [--intended]
                            [--targets TARGET ...] [--scratch DIR]

--commit REV tests that commit as it is (default: HEAD plus the working
tree's uncommitted edits to tracked files), e.g. to make a "before" table.
--targets builds only those CMake targets (with --intended: the executables
of the intended tests), --scratch puts the copy under DIR (default: the
system's temporary directory; under CCACHE_BASEDIR, ccache reuses the
objects of the working tree's build).
"""
import argparse
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile
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
    ("rmsnorm_eps_outside_sqrt", "model/kernels/cpu_rmsnorm_rows.h",
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
    ("bf16_truncates", "base/bf16.h",
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
    ("rmsnorm_cuda_eps_outside_sqrt", "model/kernels/rmsnorm_device.cuh",
     "return (float)(1.0 / sqrt(sum_sq / C + eps));",
     "return (float)(1.0 / (sqrt(sum_sq / C) + eps));",
     "the CUDA RMSNorm adds eps outside the square root"),
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
    "rmsnorm_cuda_eps_outside_sqrt": r"emulated_forward\.Cuda/.*rmsnorm_forward",
}


def run(cmd, cwd, log):
    with open(log, "a") as out:
        return subprocess.run(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT).returncode


def failed_names(log: pathlib.Path) -> list:
    """The tests that ctest lists as failed in the last run logged to log."""
    names = []
    lines = log.read_text(errors="replace").splitlines()
    if "The following tests FAILED:" in lines:
        start = len(lines) - 1 - lines[::-1].index("The following tests FAILED:")
        for line in lines[start + 1:]:
            if " - " not in line:
                break
            names.append(line.split(" - ", 1)[1].split(" (")[0].strip())
    return names


def failing_tests(log: pathlib.Path) -> str:
    names = failed_names(log)
    return ", ".join(names[:3]) + (" ..." if len(names) > 3 else "")


def copy_tree(root: pathlib.Path, tree: pathlib.Path, commit):
    """The tracked files of commit (or HEAD plus uncommitted edits) into tree,
    and third_party (git-ignored, fetched by `make deps`) as a link."""
    tree.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", "--format=tar", commit or "HEAD"], cwd=root,
                             check=True, capture_output=True).stdout
    with tempfile.TemporaryFile() as tar:
        tar.write(archive)
        tar.seek(0)
        tarfile.open(fileobj=tar).extractall(tree)
    if not commit:
        for path in subprocess.check_output(["git", "diff", "--name-only", "HEAD"], cwd=root,
                                            text=True).split():
            if (root / path).exists():
                shutil.copy2(root / path, tree / path)  # uncommitted edits come along
    if (root / "third_party").exists():
        (tree / "third_party").symlink_to((root / "third_party").resolve())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="mutation names to run (default: all)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--commit", help="test this commit alone, without uncommitted edits")
    parser.add_argument("--intended", action="store_true",
                        help="run only each mutation's intended tests (INTENDED), not the suite")
    parser.add_argument("--targets", nargs="*", help="CMake targets to build (default: all)")
    parser.add_argument("--scratch", help="the directory to copy the repository into")
    args = parser.parse_args()
    root = pathlib.Path(__file__).resolve().parent.parent
    chosen = [m for m in MUTATIONS if not args.only or m[0] in args.only]

    scratch = pathlib.Path(tempfile.mkdtemp(prefix="llm_mutate_", dir=args.scratch))
    tree = scratch / "tree"
    print(f"copying the repository to {tree} and building it once", flush=True)
    build = ["cmake", "--build", "build", "-j", str(args.jobs)] + (
        ["--target"] + args.targets if args.targets else [])
    # As `make test` configures (Makefile): the CUDA sources under emulation too.
    configure = ["cmake", "-S", ".", "-B", "build", "-DCMAKE_BUILD_TYPE=Release",
                 "-DLLM_CUDA_EMULATION=ON"]
    setup_log = scratch / "setup.log"
    try:
        copy_tree(root, tree, args.commit)
        return mutate_all(chosen, args, tree, scratch, build, configure, setup_log)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def mutate_all(chosen, args, tree, scratch, build, configure, setup_log) -> int:
    if run(configure, tree, setup_log) or run(build, tree, setup_log):
        print(f"the unmutated tree does not build: see {setup_log}")
        return 1
    if args.intended:
        listed = subprocess.run(["ctest", "--test-dir", "build", "-N", "-R",
                                 "|".join(INTENDED[m[0]] for m in chosen)],
                                cwd=tree, capture_output=True, text=True).stdout
        for name, *_ in chosen:
            if not any(re.search(part, listed) for part in INTENDED[name].split("|")):
                print(f"{name}: no ctest entry matches its intended tests '{INTENDED[name]}'")
                return 1
    selected = ["-R", "|".join(INTENDED[m[0]] for m in chosen)] if args.intended else []
    excluded = []
    if run(["ctest", "--test-dir", "build", "-j", str(args.jobs)] + selected, tree, setup_log):
        already = failed_names(setup_log)
        print(f"failing unmutated, left out of every row: {', '.join(already)}", flush=True)
        excluded = ["-E", "|".join("^" + re.escape(name) + "$" for name in already)]

    rows = []
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
                 (["-R", INTENDED[name]] if args.intended else []) + excluded, tree, log):
            verdict, detail = "caught", failing_tests(log)
        else:
            verdict, detail = "SURVIVED", what
        source.write_text(text)
        rows.append((name, verdict, detail))
        print(f"{name}: {verdict} ({time.time() - start:.0f} s) {detail}", flush=True)

    print("\n| mutation | result | first failing tests / what survived |\n|---|---|---|")
    for name, verdict, detail in rows:
        print(f"| {name} | {verdict} | {detail} |")
    return 0 if all(v == "caught" for _, v, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
