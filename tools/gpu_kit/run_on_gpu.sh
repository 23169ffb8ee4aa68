#!/usr/bin/env bash
# tools/gpu_kit/run_on_gpu.sh [options]: the one command for a bare GPU machine.
#
# On a bare machine with CUDA 13, a C++ compiler, CMake (ninja optional) and
# the kit that `make gpu-kit` packed (gpu_kit/kit.tar.xz, copied along): unpack
# the kit, point the build at it (tools/gpu_kit/kit_env.sh), configure with
# CUDA for sm_90a, build only what the checks need, then run each check:
#   env         host, compiler, CUDA libraries found, kit versions
#   nvidia_smi  nvidia-smi
#   mpi_smoke   mpirun -np 2 uname -n (the relocated OpenMPI starts ranks)
#   fp8_probe   nvcc tools/gpu_kit/probe_fp8_gemm.cu (no CMake), then run it: the
#               trainer's FP8 GEMM and variants of it, one change each, through
#               cuBLASLt (which of them run, and right), with cuBLASLt's log
#   configure   cmake -G Ninja ... -DCMAKE_CUDA_ARCHITECTURES=90a
#   build       train tiny_data llm_gpu_tests llm_op_tests llm_mpi_tests (those
#               the tree defines; ninja -k 0: build all it can)
#   linkage     ldd of the binaries: every kit library resolves into the kit
#   attention   tools/gpu_kit/perf_steps.sh attention: causal attention
#               alone (`./train bench --attention`, CUDA events, 20
#               iterations) on the Llama 3 8B shape and gpu_1b's, cuDNN (both
#               backward algorithms; version, plans, fallbacks) and the flash
#               kernel, beside PyTorch's SDPA on the same shapes in the same
#               run (tools/gpu_kit/time_sdpa.py); both FLOP conventions
#   profile_8b  perf_steps.sh profile_8b: the 8B shape's step op by op in bf16
#               and fp8, nvidia-smi sampling clocks, power and throttle
#               reasons meanwhile (clocks_8b.csv to $OUT)
#   ctest_gpu   ctest -L gpu
#   nccl_matrix_np2  several NCCL ranks on the one GPU (tools/one_gpu_ranks.sh:
#               a host id per rank, NCCL's socket transport), real NCCL:
#               mpirun -np 2 llm_mpi_tests --gtest_filter='*GpuMatrix.*/nccl_*:GpuModes.Nccl*'
#               (every data-parallel mode, TP2 and PP2, fp32 and bf16, against
#               the single-rank GPU run); NCCL's INFO log of its first run is
#               summarised (transports, version)
#   user_command  test/user_command_test.sh: `mpirun -np 16 ./train --config
#               configs/llama8b.toml`, sizes shrunk, through the launcher: resume bit for
#               bit, then the checkpoint loaded at 4 ranks as hybrid (rehearsed with 4
#               ranks, vocabulary 512 and sequence 64, as make test runs it)
#   nccl_stop   test/stalled_rank_test.sh nccl_ddp_np2 and nccl_zero3_np2 through
#               the launcher: a SIGSTOPped rank ends the job through the watchdog
#               and ncclCommAbort
#   nccl_kill   the same, nccl_kill_ddp_np2: a SIGKILLed rank
#   nccl_short  the same, nccl_short_np2: one rank's all-reduce one element
#               short (NCCL does not compare sizes); a line names the all-reduce
#   nccl_matrix_np4  the matrix at 4 ranks (hybrid 2 x 2, TP2 x PP2, TP2 x zero3 x 2)
#   gpu_modes   mpirun -np 2 llm_mpi_tests --gtest_filter=GpuModes*
#   bench_124m  ./train bench --config configs/gpu_124m.toml
#   bench_1b    ./train bench --config configs/gpu_1b.toml
#   bench_1b_fast_backward  the same with training.deterministic = false (cuDNN's
#               non-deterministic attention backward) and the op profile
#   bench_1b_fp8  the same in training.precision = fp8 (the block matmuls on FP8
#               copies), with the op profile
#   bench_graphs  ./train bench on tiny (launch-bound) and gpu_124m, each with
#               training.cuda_graphs off and on, side by side in the same run
#   bench_8b    ./train bench on the Llama 3 8B shape (seq 8192) at 2 and 4 blocks,
#               and the whole model's tokens/s per GPU derived from the two
#               ($BENCH_8B_PRECISIONS, default "bf16 fp8")
#   fp8_loss_124m  300 steps of gpu_124m on the fortunes data (data/fortunes,
#               from `make demo` or carried) in bf16, then in fp8: the final
#               losses (mean of the last 20 steps) within 1%, no spike (a step's
#               loss over 1.5x the mean of the 10 before it); metrics.jsonl of
#               both to $OUT (else BUILD_DIR) for tools/plot_metrics.py
#   masked_124m  document masking's cost on the flash kernel (issue 46): gpu_124m
#               on the fortunes data (short documents) at sequence 4096, flash
#               attention unmasked, then masked (data.document_masking), 30
#               steps each; the ms/step of steps 21-30 of each and their ratio
#   pytorch_1b  tools/compare_pytorch.py on gpu_1b: PyTorch (torch.compile, SDPA,
#               bf16 autocast, fused AdamW) and ours side by side, same run
#   pytorch_124m  the same on gpu_124m
#   fp8_loss_once  perf_steps.sh fp8_loss_once: FP8 against bf16 on a
#               corpus seen once, the text files installed on the machine up
#               to 50M tokens, gpu_124m for one pass in each; final losses
#               within 0.5%, no spike; both metrics.jsonl to $OUT
#   fp8_fast_accum  perf_steps.sh fp8_fast_accum: FP8 with the forward GEMMs'
#               fast accumulation (training.fp8_fast_accum) against FP8
#               without it and against bf16, one more pass on fp8_loss_once's
#               corpus (its own corpus when that step did not run); the same
#               checks; its metrics.jsonl to $OUT
#   fp8_delayed  perf_steps.sh fp8_delayed: FP8 with delayed scaling
#               (training.fp8_scaling = delayed) against FP8's current
#               scaling and against bf16, one more pass on the same corpus;
#               the same checks; its metrics.jsonl to $OUT
#   bench_offload ./train bench --offload on gpu_1b: device / ZeRO-Offload /
#               delayed / ZenFlow step times, PCIe bytes and GPU idle (issue 15)
#   generate_124m  two steps of the 124M shape on the tiny data (bf16), then
#               ./train generate --device cuda: 8 samples x 256 tokens, tokens/s
#   contention  nvcc tools/gpu_kit/measure_contention.cu (no CMake), then run it:
#               a bf16 GEMM's slowdown beside a copy kernel of B blocks, the
#               measurement behind cost_models/contention.h; CSV to
#               $OUT/contention.csv (else BUILD_DIR/contention.csv)
# and, for a rehearsal without a GPU (tools/gpu_kit/rehearse.sh):
#   cpu_tests   ctest -L cpu -R 'Config|DataPrepare|Bf16|Matmul' (toml++, SentencePiece,
#               spdlog, OpenBLAS)
#   mpi_cpu     mpirun -np 2 llm_mpi_tests --gtest_filter=*CommWorld*:*CommCollective*:StagedComm*
#   mpi_script  ctest -R mpi_config_error_once (./train under the kit's mpiexec)
#
# Invariant: every step runs under its own time limit and under the overall
# deadline (a batch slot or remote shell often caps a command at ~10 min), a failing step never
# stops the next, and the report file always holds every finished step: its
# status (PASS, FAIL, TIMEOUT, SKIP), duration, command and output. When all
# steps are done the summary table is put at the top and printed last.
#
# Options:
#   --kit FILE        kit tarball (gpu_kit/kit.tar.xz)
#   --unpack-to DIR   where to unpack it (/tmp/gpu_kit)
#   --build-dir DIR   (build-gpu)
#   --jobs N          (nproc, at most 16)
#   --cuda-arch A     CMAKE_CUDA_ARCHITECTURES (90a)
#   --steps LIST      comma-separated step names, run in the order above;
#                     `all` (the default) = the GPU steps, env to contention;
#                     `nccl` = what issue 43's device run needs: env, nvidia_smi,
#                     configure, build, ctest_gpu and the nccl / user_command steps;
#                     `bench` = the speed steps (124M, 1B both backwards, the 8B shape);
#                     `issue56` = its device run by priority: the attention
#                     comparison and the 8B profile, the bench suite with
#                     PyTorch, then the FP8 loss pair on a corpus seen once
#                     and FP8 with fast accumulation on the same corpus
#   --emulated        rehearse the nccl and user_command steps here, without a GPU
#                     or the kit: the emulated binaries of an existing `make test`
#                     build (--build-dir, default build) on one emulated GPU
#                     (LLM_CUDA_EMULATION_DEVICES=1)
#   --deadline S      seconds for the whole script, 0 = none (570)
#   --report FILE     ($OUT/gpu_report.txt, else BUILD_DIR/gpu_report.txt)
set -uo pipefail

START=$(date +%s)
REPO=$(cd "$(dirname "$0")/../.." && pwd)
cd "$REPO"
NCCL_STEPS="nccl_matrix_np2,user_command,nccl_stop,nccl_kill,nccl_short,nccl_matrix_np4"
GPU_STEPS="env,nvidia_smi,mpi_smoke,fp8_probe,configure,build,linkage,attention,profile_8b,ctest_gpu,$NCCL_STEPS,gpu_modes,bench_124m,bench_1b,bench_1b_fast_backward,bench_1b_fp8,bench_graphs,bench_8b,fp8_loss_124m,masked_124m,pytorch_1b,pytorch_124m,fp8_loss_once,fp8_fast_accum,fp8_delayed,bench_offload,generate_124m,contention"
EMULATED=0
LIMIT_SCALE=1  # the emulation's rehearsal: 4 (kernels on 2 CPU cores, not a GPU)
KIT=gpu_kit/kit.tar.xz
DEST=/tmp/gpu_kit
BUILD=build-gpu
JOBS=$(nproc 2>/dev/null || echo 4); [ "$JOBS" -gt 16 ] && JOBS=16
ARCH=90a
STEPS=all
DEADLINE=570
REPORT=
while [ $# -gt 0 ]; do
  case $1 in
    --kit) KIT=$2; shift ;;
    --unpack-to) DEST=$2; shift ;;
    --build-dir) BUILD=$2; shift ;;
    --jobs) JOBS=$2; shift ;;
    --cuda-arch) ARCH=$2; shift ;;
    --steps) STEPS=$2; shift ;;
    --deadline) DEADLINE=$2; shift ;;
    --report) REPORT=$2; shift ;;
    --emulated) EMULATED=1 BUILD=build LIMIT_SCALE=4 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_on_gpu.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
expanded=
for step in ${STEPS//,/ }; do
  case $step in
    all) expanded+=,$GPU_STEPS ;;
    nccl) expanded+=,env,nvidia_smi,configure,build,ctest_gpu,$NCCL_STEPS ;;
    bench) expanded+=,env,nvidia_smi,fp8_probe,configure,build,bench_124m,bench_1b,bench_1b_fast_backward,bench_1b_fp8,bench_graphs,bench_8b,fp8_loss_124m,masked_124m,pytorch_1b,pytorch_124m ;;
    issue56) expanded+=,env,nvidia_smi,configure,build,attention,profile_8b,bench_8b,bench_1b,bench_1b_fp8,pytorch_1b,fp8_loss_once,fp8_fast_accum,fp8_delayed ;;
    *) expanded+=,$step ;;
  esac
done
STEPS=${expanded#,}
case $BUILD in /*) ;; *) BUILD=$REPO/$BUILD ;; esac
[ -n "$REPORT" ] || REPORT=${OUT:+$OUT/gpu_report.txt}
[ -n "$REPORT" ] || REPORT=$BUILD/gpu_report.txt
case $KIT in /*) ;; *) KIT=$REPO/$KIT ;; esac
mkdir -p "$(dirname "$REPORT")"
BODY=$REPORT.body
: > "$BODY"
SUMMARY=()
FAILED=0

wanted() { [[ ",$STEPS," == *",$1,"* ]]; }

# The report file is the summary so far followed by every finished step's
# section; rewritten after each step so a stopped run still leaves it whole.
write_report() {
  {
    echo "# GPU check report (tools/gpu_kit/run_on_gpu.sh), $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "# repo: $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo '(no git)')" \
         " host: $(hostname 2>/dev/null)  steps: $STEPS"
    echo "#"
    printf '# %-8s %-12s %s\n' STATUS STEP "SECONDS (LIMIT) / NOTE"
    local line; for line in "${SUMMARY[@]}"; do echo "# $line"; done
    echo
    cat "$BODY"
  } > "$REPORT.tmp" && mv "$REPORT.tmp" "$REPORT"
}

# run_step NAME LIMIT_SECONDS COMMAND (a bash -c string, run from the repo root)
run_step() {
  local name=$1 limit=$2 cmd=$3 now left status rc t0 t1 log
  wanted "$name" || return 0
  limit=$(( limit * LIMIT_SCALE ))
  now=$(date +%s)
  if [ "$DEADLINE" -gt 0 ]; then
    left=$(( START + DEADLINE - now - 5 ))
    if [ "$left" -lt 20 ]; then
      SUMMARY+=("$(printf '%-8s %-12s %s' SKIP "$name" "no time left before the ${DEADLINE}s deadline")")
      printf '==== [SKIP] %s: deadline\n\n' "$name" >> "$BODY"
      echo "[SKIP] $name (deadline)"; write_report; return 0
    fi
    [ "$limit" -gt "$left" ] && limit=$left
  fi
  log=$(mktemp)
  t0=$(date +%s)
  timeout -k 10 "$limit" bash -c "$cmd" > "$log" 2>&1 < /dev/null
  rc=$?
  t1=$(date +%s)
  case $rc in
    0) status=PASS ;;
    124|137) status=TIMEOUT ;;
    *) status=FAIL ;;
  esac
  [ "$status" = PASS ] || FAILED=$(( FAILED + 1 ))
  SUMMARY+=("$(printf '%-8s %-12s %s' "$status" "$name" "$(( t1 - t0 ))s ($limit) rc=$rc")")
  {
    printf '==== [%s] %s: %ss (limit %ss), rc=%s\n$ %s\n' "$status" "$name" "$(( t1 - t0 ))" "$limit" "$rc" "$cmd"
    if [ "$(wc -c < "$log")" -gt 400000 ]; then
      echo "[... first $(( $(wc -c < "$log") - 400000 )) bytes cut ...]"
      tail -c 400000 "$log"
    else
      cat "$log"
    fi
    printf '\n'
  } >> "$BODY"
  rm -f "$log"
  echo "[$status] $name: $(( t1 - t0 ))s rc=$rc"
  write_report
}

# ---- the kit and the CUDA libraries (in this shell: they export the env) ----
# shellcheck source=kit_env.sh
. "$REPO/tools/gpu_kit/kit_env.sh"
if [ "$EMULATED" = 1 ]; then
  # The rehearsal: this machine's MPI, one emulated GPU, the NCCL steps only.
  STEPS=$(tr ',' '\n' <<< "$STEPS" | grep -xF -f <(tr ',' '\n' <<< "$NCCL_STEPS") | paste -sd,)
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LLM_CUDA_EMULATION_DEVICES=1
  TRAIN=$BUILD/test/train_emulated MPI_TESTS=$BUILD/test/llm_mpi_tests_emulated
  USER_RANKS=4 USER_SHRINK="-- --model.vocab_size=512 --training.seq_len=64"  # 16 ranks: hours here
  SUMMARY+=("$(printf '%-8s %-12s %s' NOTE emulated "CUDA emulation on the CPU, one emulated GPU: not a GPU result")")
else
TRAIN=./train MPI_TESTS=$BUILD/test/llm_mpi_tests USER_RANKS=16 USER_SHRINK=
KIT_LOG=$(mktemp)
KIT_OK=0
{   # a braced group runs in this shell: its exports stay
  if gpu_kit_unpack "$KIT" "$DEST"; then
    gpu_kit_activate "$DEST"
    gpu_kit_find_cuda "$DEST"
    echo "kit: $KIT unpacked in $DEST"
    echo "$GPU_KIT_CUDA_REPORT"
    echo "fallback libraries used (host lacks them): $(ls "$DEST/fallback-active" | tr '\n' ' ')"
    echo "CMake arguments:"; printf '  %s\n' "${GPU_KIT_CMAKE_ARGS[@]}"
    KIT_OK=1
  fi
} > "$KIT_LOG" 2>&1
if [ "$KIT_OK" = 1 ]; then
  SUMMARY+=("$(printf '%-8s %-12s %s' PASS kit "unpacked in $DEST")")
else
  SUMMARY+=("$(printf '%-8s %-12s %s' FAIL kit "see its section")"); FAILED=$(( FAILED + 1 ))
fi
{ printf '==== [%s] kit\n' "$([ "$KIT_OK" = 1 ] && echo PASS || echo FAIL)"; cat "$KIT_LOG"; echo; } >> "$BODY"
rm -f "$KIT_LOG"
fi
write_report

# CMake and ninja: the PATH's, else the Python packages'.
CMAKE=$(command -v cmake || python3 -c 'import cmake, os; print(os.path.join(cmake.CMAKE_BIN_DIR, "cmake"))' 2>/dev/null || echo cmake)
CTEST=$(dirname "$CMAKE")/ctest; [ -x "$CTEST" ] || CTEST=ctest
NINJA=$(command -v ninja || python3 -c 'import ninja, os; print(os.path.join(ninja.BIN_DIR, "ninja"))' 2>/dev/null || true)
if [ -n "$NINJA" ]; then GENERATOR=(-G Ninja "-DCMAKE_MAKE_PROGRAM=$NINJA"); else GENERATOR=(-G "Unix Makefiles"); fi
# Only what the steps run: the trainer, its tiny data set and, for the steps
# that run tests, every test executable that holds GPU rows (whichever of
# these the tree defines).
TARGETS=
TEST_TARGETS=
for step in ctest_gpu gpu_modes mpi_cpu ${NCCL_STEPS//,/ }; do
  wanted "$step" && TEST_TARGETS="llm_gpu_tests llm_op_tests llm_mpi_tests"
done
for t in train tiny_data $TEST_TARGETS $(wanted cpu_tests && echo llm_tests); do
  grep -qE "add_(executable|custom_target)\($t[ )]" CMakeLists.txt test/CMakeLists.txt && TARGETS+=" $t"
done
# Quote an array for the bash -c command strings.
q() { local s; printf -v s '%q ' "$@"; printf '%s' "${s% }"; }
# The contention probe is one nvcc command: kit_env.sh's -I flags (headers
# outside the toolkit, a wheel's), libcublasLt.so's folder (the shim's link for
# a wheel's versioned library) and an rpath to where the library really is.
NVCC=$(command -v nvcc || echo nvcc)
NVCC_FLAGS=
for a in ${GPU_KIT_CMAKE_ARGS[@]+"${GPU_KIT_CMAKE_ARGS[@]}"}; do
  case $a in -DCMAKE_CUDA_FLAGS=*) NVCC_FLAGS=${a#-DCMAKE_CUDA_FLAGS=} ;; esac
done
CUBLASLT=$(sed -n 's/^libcublasLt: //p' <<< "${GPU_KIT_CUDA_REPORT:-}")
case $CUBLASLT in
  */libcublasLt.so) NVCC_FLAGS+=" -L$(dirname "$CUBLASLT")" ;;
  /*) NVCC_FLAGS+=" -L$DEST/cuda-shim" ;;
esac
case $CUBLASLT in /*) NVCC_FLAGS+=" -Xlinker -rpath=$(dirname "$(readlink -f "$CUBLASLT")")" ;; esac
case $ARCH in [0-9][0-9]|[0-9][0-9][0-9]|[0-9][0-9]a|[0-9][0-9][0-9]a) NVCC_ARCH=sm_$ARCH ;; *) NVCC_ARCH=native ;; esac
MPI_ENV="OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 GTEST_COLOR=no"

run_step env 60 "
  echo \"date: \$(date -u)\"; uname -a; echo \"cores: \$(nproc)\"; free -g 2>/dev/null | head -2
  grep PRETTY_NAME /etc/os-release
  echo \"c++: \$(c++ --version 2>&1 | head -1)\"; echo \"cmake: \$($(q "$CMAKE") --version | head -1)\"
  echo \"ninja: ${NINJA:-none (Unix Makefiles)} \$(${NINJA:-true} --version 2>/dev/null)\"
  echo \"python3: \$(command -v python3) \$(python3 --version 2>&1)\"
  echo \"mpirun: \$(command -v mpirun) \$(mpirun --version 2>&1 | head -1)\"
  echo; cat $(q "$DEST/MANIFEST.txt") | grep -v '^#   '
  # The kit is Debian 12's: libevent needs glibc 2.36, the C++ libraries GCC 12's libstdc++.
  glibc=\$(getconf GNU_LIBC_VERSION | awk '{ print \$2 }'); echo \"glibc: \$glibc (the kit needs >= 2.36)\"
  printf '%s\\n' 2.36 \"\$glibc\" | sort -V -C || echo 'FAIL: glibc older than 2.36: the kit cannot run here'
  printf '%s\\n' 2.36 \"\$glibc\" | sort -V -C && command -v c++ >/dev/null && command -v mpirun >/dev/null"
run_step nvidia_smi 60 "nvidia-smi && nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,power.limit --format=csv"
run_step mpi_smoke 60 "mpirun -np 2 uname -n && mpirun -np 2 $(q "$(command -v python3 || echo true)") -c 'import os; print(\"rank\", os.environ.get(\"OMPI_COMM_WORLD_RANK\"))'"
run_step fp8_probe 120 "$(q "$NVCC") -O2 -std=c++17 -gencode=arch=compute_90a,code=sm_90a $NVCC_FLAGS \
  tools/gpu_kit/probe_fp8_gemm.cu -lcublasLt -o /tmp/probe_fp8_gemm && /tmp/probe_fp8_gemm"
run_step configure 240 "$(q "$CMAKE") -S . -B $(q "$BUILD") $(q "${GENERATOR[@]}") -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_ARCHITECTURES=$ARCH $(q "${GPU_KIT_CMAKE_ARGS[@]}")"
run_step build 540 "$(q "$CMAKE") --build $(q "$BUILD") -j $JOBS --target$TARGETS -- $([ -n "$NINJA" ] && echo '-k 0' || echo '-k')"
run_step linkage 60 "
  bad=0
  for b in train $(q "$BUILD")/test/llm_gpu_tests $(q "$BUILD")/test/llm_mpi_tests $(q "$BUILD")/test/llm_tests; do
    [ -f \"\$b\" ] || continue
    echo \"== \$b\"; ldd \"\$b\" | grep -E 'not found|mpi|open-(pal|rte)|pmix|hwloc|event|spdlog|fmt|sentencepiece|toml|openblas|gfortran|cublas|cudart|nccl'
    ldd \"\$b\" | grep -q 'not found' && bad=1
    # A kit library (not CUDA's) resolved outside the kit means a leak.
    ldd \"\$b\" | grep -E 'libmpi|open-pal|open-rte|pmix|hwloc|event_|spdlog|fmt|sentencepiece|toml|openblas' | grep -v $(q "$DEST") && bad=1
  done
  [ -x train ] && [ \$bad = 0 ]"
# Issue 56's performance steps (tools/gpu_kit/perf_steps.sh).
PERF="OUT_DIR=$(q "${OUT:-$BUILD}") bash tools/gpu_kit/perf_steps.sh"
run_step attention 300 "$PERF attention"
run_step profile_8b 300 "$PERF profile_8b"
run_step ctest_gpu 240 "$(q "$CTEST") --test-dir $(q "$BUILD") -L gpu --output-on-failure -j 8 --timeout 200"
# Several NCCL ranks on the one GPU, through the launcher (docs/gpu.md).
LAUNCH=$REPO/tools/one_gpu_ranks.sh
MPIRUN="$MPI_ENV mpirun --oversubscribe"
run_step nccl_matrix_np2 200 "
  mkdir -p /tmp/nccl_info && rm -f /tmp/nccl_info/*
  NCCL_DEBUG=INFO NCCL_DEBUG_FILE=/tmp/nccl_info/%h.%p.log $MPIRUN -np 2 $(q "$LAUNCH") $(q "$MPI_TESTS") \
    --gtest_filter='*GpuMatrix.DataParallelModes/nccl_*' && rc=0 || rc=1
  echo '---- NCCL INFO, first run (version, transports, errors):'
  cat /tmp/nccl_info/*.log 2>/dev/null | grep -E 'NCCL version|via |NET/|Init COMPLETE|WARN|NCCL_HOSTID' | sort | uniq -c | head -40
  [ \$rc = 0 ] && $MPIRUN -np 2 $(q "$LAUNCH") $(q "$MPI_TESTS") \
    --gtest_filter='*GpuMatrix.TensorAndPipelineMesh/nccl_*:GpuModes.Nccl*'"
run_step user_command 180 "bash test/user_command_test.sh $(q "$TRAIN") mpirun $USER_RANKS $(q "$LAUNCH") $USER_SHRINK"
run_step nccl_stop 100 "bash test/stalled_rank_test.sh $(q "$TRAIN") mpirun nccl_ddp_np2 $(q "$LAUNCH") &&
  bash test/stalled_rank_test.sh $(q "$TRAIN") mpirun nccl_zero3_np2 $(q "$LAUNCH")"
run_step nccl_kill 60 "bash test/stalled_rank_test.sh $(q "$TRAIN") mpirun nccl_kill_ddp_np2 $(q "$LAUNCH")"
run_step nccl_short 60 "bash test/stalled_rank_test.sh $(q "$TRAIN") mpirun nccl_short_np2 $(q "$LAUNCH")"
run_step nccl_matrix_np4 200 "$MPIRUN -np 4 $(q "$LAUNCH") $(q "$MPI_TESTS") --gtest_filter='*GpuMatrix.*/nccl_*'"
run_step gpu_modes 300 "$MPI_ENV mpirun -np 2 $(q "$BUILD")/test/llm_mpi_tests --gtest_filter='GpuModes*'"
run_step bench_124m 240 "./train bench --config configs/gpu_124m.toml"
run_step bench_1b 300 "./train bench --config configs/gpu_1b.toml"
run_step bench_1b_fast_backward 300 "./train bench --config configs/gpu_1b.toml --training.deterministic=false --profile"
run_step bench_1b_fp8 300 "./train bench --config configs/gpu_1b.toml --training.precision=fp8 --profile"
# CUDA graphs (training.cuda_graphs): eager and captured on the same GPU, the
# small model first, where launches bound the step.
run_step bench_graphs 300 "
  for config in tiny gpu_124m; do
    for graphs in false true; do
      echo \"== \$config, training.cuda_graphs = \$graphs\"
      ./train bench --config configs/\$config.toml --training.device=cuda \
        --training.cuda_graphs=\$graphs || exit 1
    done
  done"
# The Llama 3 8B shape at sequence 8192, one micro-batch of one sequence, at
# 2 and 4 blocks (the whole model does not fit one GPU with its optimizer):
# a block's step time is half the difference, the rest is the embedding, the
# head and the fixed costs; 32 blocks' tokens/s follow. In bf16, then fp8.
run_step bench_8b 300 "
  set -o pipefail
  for precision in \${BENCH_8B_PRECISIONS:-bf16 fp8}; do
    for layers in 2 4; do
      ./train bench --config configs/llama8b.toml --model.n_layers=\$layers --training.batch_size=1 \
        --training.sample_tokens=0 --data.tokenizer= --training.precision=\$precision --bench-steps 4 \
        | tee /tmp/bench_8b_\$layers.txt || exit 1
    done
    ms() { awk '/step time/ { print \$3 }' /tmp/bench_8b_\$1.txt; }
    awk -v a=\$(ms 2) -v b=\$(ms 4) -v p=\$precision 'BEGIN { block = (b - a) / 2; rest = a - 2 * block; full = rest + 32 * block;
      printf \"8B shape, %s: %.1f ms per block, %.1f ms the rest; 32 blocks: %.0f ms/step, %.0f tokens/s per GPU\\n\", p, block, rest, full, 8192 / full * 1000 }'
  done"
run_step fp8_loss_124m 240 "
  set -e
  for precision in bf16 fp8; do
    rm -rf /tmp/loss_\$precision
    ./train --config configs/gpu_124m.toml --training.precision=\$precision --training.steps=300 \
      --training.eval_interval=0 --training.sample_tokens=0 --checkpoint.save_final=false \
      --checkpoint.dir=/tmp/loss_\$precision --checkpoint.resume=none > /tmp/loss_\$precision.log 2>&1 ||
      { tail -20 /tmp/loss_\$precision.log; exit 1; }
    grep -E 'step +(1|100|200|300)/300 \\| loss' /tmp/loss_\$precision.log
    cp /tmp/loss_\$precision/metrics.jsonl $(q "${OUT:-$BUILD}")/metrics_124m_\$precision.jsonl
  done
  python3 tools/gpu_kit/compare_losses.py $(q "${OUT:-$BUILD}")/metrics_124m_bf16.jsonl \
    $(q "${OUT:-$BUILD}")/metrics_124m_fp8.jsonl"
# Both runs on the flash kernel (cuDNN cannot express the mask), so the ratio
# is what skipping the key tiles before a query tile's document saves.
run_step masked_124m 200 "
  set -e
  for masking in false true; do
    ./train --config configs/gpu_124m.toml --training.attention=flash --training.seq_len=4096 \
      --training.batch_size=8 --training.micro_batch_size=4 --training.steps=30 \
      --training.eval_interval=0 --training.sample_tokens=0 --logging.log_interval=10 \
      --checkpoint.save_final=false --checkpoint.dir=/tmp/masked_\$masking --checkpoint.resume=none \
      --data.document_masking=\$masking > /tmp/masked_\$masking.log 2>&1 ||
      { tail -20 /tmp/masked_\$masking.log; exit 1; }
    grep -E 'document|step +30/30' /tmp/masked_\$masking.log | head -3
  done
  ms() { sed -nE 's/.*step +30\/30 .* ([0-9.]+) ms\/step.*/\\1/p' /tmp/masked_\$1.log; }
  awk -v a=\$(ms false) -v b=\$(ms true) 'BEGIN { printf \"flash, seq 4096: unmasked %.1f ms/step, masked %.1f ms/step, masked / unmasked %.3f\\n\", a, b, b / a }'"
# PyTorch on the same config in the same run (tools/compare_pytorch.py): the
# first Python that imports torch, $TORCH_PYTHON first.
for size in 1b 124m; do
  run_step pytorch_$size 300 "
    for py in \${TORCH_PYTHON:-} /opt/torch/.venv/bin/python python3; do
      \$py -c 'import torch' 2>/dev/null && exec \$py tools/compare_pytorch.py --config configs/gpu_$size.toml
    done
    echo 'no Python here imports torch (set TORCH_PYTHON)'; exit 1"
done
run_step fp8_loss_once 540 "$PERF fp8_loss_once"
run_step fp8_fast_accum 540 "$PERF fp8_fast_accum"
run_step fp8_delayed 540 "$PERF fp8_delayed"
run_step bench_offload 300 "./train bench --config configs/gpu_1b.toml --offload --bench-steps 8"
run_step generate_124m 180 "./train --config configs/gpu_124m.toml --data.train='data/tiny/train_*.bin' \
  --data.val='data/tiny/val_*.bin' --data.tokenizer=data/tiny/tokenizer.model --model.vocab_size=512 \
  --training.seq_len=512 --training.batch_size=16 --training.steps=2 --training.eval_interval=0 \
  --training.sample_tokens=0 --checkpoint.dir=/tmp/generate_124m --checkpoint.resume=none &&
  ./train generate --checkpoint /tmp/generate_124m --device cuda --samples 8 --max-new-tokens 256 \
  --temperature 1 --top-k 0 --top-p 1 --prompt 'The'"
run_step contention 120 "mkdir -p $(q "$BUILD") && $(q "$NVCC") -O2 -std=c++17 -arch=$NVCC_ARCH $NVCC_FLAGS \
  tools/gpu_kit/measure_contention.cu -lcublasLt -o $(q "$BUILD/measure_contention") &&
  $(q "$BUILD/measure_contention") --csv $(q "${OUT:-$BUILD}/contention.csv")"
run_step cpu_tests 900 "$(q "$CTEST") --test-dir $(q "$BUILD") -L cpu -R 'Config\\.|DataPrepare\\.|Bf16\\.|[Mm]atmul' \
  --no-tests=error --output-on-failure -j $JOBS --timeout 600"
run_step mpi_cpu 600 "$MPI_ENV mpirun -np 2 $(q "$BUILD")/test/llm_mpi_tests --gtest_filter='*CommWorld*:*CommCollective*:StagedComm*'"
run_step mpi_script 300 "$(q "$CTEST") --test-dir $(q "$BUILD") -R '^mpi_config_error_once\$' --output-on-failure"

write_report
echo
echo "report: $REPORT ($(( $(date +%s) - START ))s in all)"
printf '%-8s %-12s %s\n' STATUS STEP "SECONDS (LIMIT) / NOTE"
printf '%s\n' "${SUMMARY[@]}"
rm -f "$BODY"
[ "$FAILED" = 0 ]
