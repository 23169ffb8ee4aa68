#!/usr/bin/env bash
# A signal at any moment of a run never corrupts memory (docs/failure.md,
# collectives/signal_thread.h). Each run trains a model with 256-wide layers and,
# once it has trained 2 steps, this script sends it SIGQUIT (a recorder
# request, which training takes without stopping) as fast as bash can for a
# random 2-4 s, keeping one core busy, then SIGTERM: the run must stop at a
# step, save it and exit 0. ONEDNN_MAX_CPU_ISA=AVX2 makes oneDNN use its JIT
# GEMM (gemm:jit) on any x86 CPU: its kernels point rsp into the heap, so a
# signal handled on a thread running one wrote its frame over malloc's
# headers. Before the signal thread, 2 of 4 such runs aborted.
# usage: signals_under_load_test.sh <path to train>
set -u
train=$1
runs=5
tmp=$(mktemp -d /tmp/signals_under_load.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export ONEDNN_MAX_CPU_ISA=AVX2 OMP_NUM_THREADS=2

for run in $(seq "$runs"); do
  dir=$tmp/run$run log=$tmp/run$run.txt
  "$train" --config configs/tiny.toml --model.dim=256 --model.n_layers=4 \
    --model.ffn_dim=512 --training.steps=100000 --training.eval_interval=0 \
    --training.eval_sequences=0 --training.sample_tokens=0 --checkpoint.interval=0 \
    --checkpoint.dir="$dir" > "$log" 2>&1 &
  pid=$!
  for _ in $(seq 600); do
    grep -q "step     2/" "$log" && break
    kill -0 "$pid" 2>/dev/null || { cat "$log"; fail "run $run ended before step 2"; }
    sleep 0.1
  done
  grep -q "step     2/" "$log" || fail "run $run: no step 2 within 60 s"
  # bash's builtin kill forks nothing: thousands of signals a second.
  seconds=$((2 + RANDOM % 3))
  end=$(( ${EPOCHREALTIME/./} + seconds * 1000000 ))
  sent=0
  while (( ${EPOCHREALTIME/./} < end )) && kill -QUIT "$pid" 2>/dev/null; do sent=$((sent + 1)); done
  kill -TERM "$pid" 2>/dev/null
  wait "$pid"
  rc=$?
  [ "$rc" -eq 0 ] || { tail -30 "$log"; fail "run $run: exit status $rc after $sent signals"; }
  (( sent >= 1000 )) || fail "run $run: only $sent signals sent in $seconds s"
  step=$(sed -n 's/.*stopped by a signal after step \([0-9]*\).*/\1/p' "$log")
  [ -n "$step" ] || { cat "$log"; fail "run $run: no graceful stop in the log"; }
  [ "$(cat "$dir/latest")" = "step_$step" ] || fail "run $run: latest is not step_$step"
  echo "run $run: $sent signals in $seconds s, stopped after step $step, exit 0"
done
echo "PASS"
