#!/usr/bin/env python3
"""Plants four GPU bugs, one at a time, and names the emulation test that fails.

Each bug is one small edit of a CUDA source (or of code that orders the CUDA
streams) in a copy of the working tree; the copy's emulation build
(-DLLM_CUDA_EMULATION=ON, no nvcc needed) is rebuilt and the tests that must
catch the bug are run, under both scheduling orders where they apply. The
script fails unless every planted bug makes at least one of its tests fail,
and unless every test passes on the unplanted tree first.

    python3 tools/emulation_catches.py [--work DIR] [--jobs N]

Takes about ten minutes on 2 cores (one build of the library, then one
rebuild of a file or two per bug). See docs/emulation.md.
"""
import argparse
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent

MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def op_rows(pattern):
    """The op harness's Cuda rows matching `pattern`, under both orders."""
    return [
        (f"{pattern} ({order})", ["test/llm_op_tests_emulated", f"--gtest_filter=Cuda/Op.Case/{pattern}"],
         {"LLM_CUDA_EMULATION_ORDER": order})
        for order in ("forward", "reverse")
    ]


# As its ctest entry runs it: collective results land late (test/emulation_tests.cmake).
GPU_MODES = [("GpuModes.* at 2 ranks", ["mpirun", "-np", "2", "--oversubscribe", "test/llm_mpi_tests_emulated",
                                         "--gtest_filter=GpuModes.*"],
              dict(MPI_ENV, LLM_CUDA_EMULATION_COLLECTIVE_LATENCY_US="5000"))]
TRANSFERS = [("CudaTransfers.* and the offload trainer test",
              ["test/llm_gpu_tests_emulated",
               "--gtest_filter=CudaTransfers.*:GpuTrainer.OffloadAndZenFlowMatchTheDeviceOptimizer"], {})]

# (name, file, [(text, replacement)], tests)
BUGS = [
    ("a __syncthreads removed in attention (before the forward reads its scores)",
     "model/kernels/attention.cu",
     [("    tile_product<kQ, kK, kHeadDim, false, true>(scores, L::ld_scores, queries, L::ld_qkv, keys,\n"
       "                                                L::ld_qkv);\n"
       "    __syncthreads();\n"
       "    // Key s is visible",
       "    tile_product<kQ, kK, kHeadDim, false, true>(scores, L::ld_scores, queries, L::ld_qkv, keys,\n"
       "                                                L::ld_qkv);\n"
       "    // Key s is visible")],
     op_rows("attention_*")),
    ("the first __syncthreads of block_reduce removed",
     "device/cuda_kernel_helpers.cuh",
     [("  if (lane == 0) warp_results[warp] = v;\n  __syncthreads();\n",
       "  if (lane == 0) warp_results[warp] = v;\n")],
     op_rows("rmsnorm_*") + op_rows("cross_entropy_*")),
    ("the compute stream's wait on a parameter all-gather removed",
     "parallel/comm_nccl.cu",
     [("return CommHandle([events = events_, done] {",
       "return CommHandle([events = events_, done, comm] {"),
      ("cudaError_t wait_status = cudaStreamWaitEvent(cuda::compute_stream(), done, 0);",
       "cudaError_t wait_status =\n"
       "          comm == cuda::gather_stream() ? cudaSuccess : cudaStreamWaitEvent(cuda::compute_stream(), done, 0);")],
     GPU_MODES),
    ("the compute stream's wait for queued uploads removed",
     "device/cuda_runtime.cu",
     [("void device_waits() { after(streams().transfer, compute_stream()); }",
       "void device_waits() {}")],
     TRANSFERS),
]

TARGETS = ["llm_op_tests_emulated", "llm_gpu_tests_emulated", "llm_mpi_tests_emulated"]


def run(command, cwd, env=None, quiet=True):
    merged = dict(os.environ, OMP_NUM_THREADS="1", GTEST_COLOR="no", **(env or {}))
    result = subprocess.run(command, cwd=cwd, env=merged, capture_output=quiet, text=True, timeout=900)
    return result.returncode, (result.stdout or "") + (result.stderr or "")


def build(source, build_dir, jobs):
    code, output = run(["cmake", "--build", str(build_dir), "-j", str(jobs), "--target", *TARGETS], source)
    if code != 0:
        sys.exit(f"emulation_catches: the build failed:\n{output[-4000:]}")


def failing_tests(tests, source, build_dir):
    """Names of the tests that fail (the command runs from the build dir, the
    working directory is the source tree, as ctest's)."""
    failed = []
    for name, command, env in tests:
        executable = command[0] if command[0] == "mpirun" else str(build_dir / command[0])
        full = [executable] + [str(build_dir / c) if c.startswith("test/") else c for c in command[1:]]
        code, output = run(full, source, env)
        if code != 0:
            failed.append((name, output))
    return failed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", help="directory for the copy and its build (default: a temporary one)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args()
    work = pathlib.Path(args.work or tempfile.mkdtemp(prefix="emulation_catches_"))
    source, build_dir = work / "src", work / "build"
    if source.exists():
        shutil.rmtree(source)
    ignore = shutil.ignore_patterns(".git", "build", "build-*", "third_party", "checkpoints", "gpu_kit")
    shutil.copytree(ROOT, source, ignore=ignore)
    print(f"emulation_catches: building in {build_dir}", flush=True)
    code, output = run(["cmake", "-S", str(source), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=Release",
                        "-DLLM_CUDA=OFF", "-DLLM_CUDA_EMULATION=ON"], source)
    if code != 0:
        sys.exit(f"emulation_catches: configure failed:\n{output[-4000:]}")
    build(source, build_dir, args.jobs)
    all_tests = [t for bug in BUGS for t in bug[3]]
    unplanted = failing_tests(all_tests, source, build_dir)
    if unplanted:
        sys.exit("emulation_catches: these fail before any bug is planted:\n" +
                 "\n".join(f"  {name}\n{output[-2000:]}" for name, output in unplanted))

    missed = []
    for name, path, edits, tests in BUGS:
        file = source / path
        original = file.read_text()
        planted = original
        for text, replacement in edits:
            if planted.count(text) != 1:
                sys.exit(f"emulation_catches: {path} no longer holds the text to plant '{name}' once")
            planted = planted.replace(text, replacement)
        file.write_text(planted)
        try:
            build(source, build_dir, args.jobs)
            failed = failing_tests(tests, source, build_dir)
        finally:
            file.write_text(original)
        if failed:
            print(f"caught  {name}:", flush=True)
            for group, output in failed:
                tests = sorted(set(re.findall(r"\[  FAILED  \] ([A-Za-z_][^ ,\n]*\.[^ ,\n]+)", output)))
                print(f"          {group}: {', '.join(tests) or 'the run fails'}", flush=True)
        else:
            print(f"MISSED  {name}: {', '.join(t[0] for t in tests)} all pass", flush=True)
            missed.append(name)
    build(source, build_dir, args.jobs)
    print(f"{len(BUGS) - len(missed)} caught, {len(missed)} missed")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
