#!/usr/bin/env bash
# A stalled rank never hangs the job: one rank is stopped with SIGSTOP (or,
# in case skip_np2, skips one collective through the test hook
# LLM_FAULT_SKIP_ALL_REDUCE_SUM), and the job must end within
# parallel.timeout + 10 s of it, with the watchdog's exit status 75, a line
# naming that rank, the flight recorder's dumps (tools/flight_recorder.py
# finds a skipped collective's divergence), and the latest checkpoint
# complete. The bound's arithmetic: the first rank to give up has waited
# parallel.timeout, asks the others for 2 s (a stopped rank never answers),
# then serves them for 3 s while NCCL's communicators are aborted (at most
# 5 s, collectives/watchdog.h): parallel.timeout + 7 s, and the launcher's
# teardown in the rest.
# The two faults planted at a collective's count (skip_np2, nccl_short_np2)
# save with checkpoint.async=false: a background save commits a few steps
# after its step, and on a loaded machine it may not have by the fault's step.
# A killed rank (case nccl_kill_ddp_np2, SIGKILL) ends the job too, within
# the same bound, with the rank named (by mpirun) and the checkpoint intact.
# So does an all-reduce whose size differs on one rank (case nccl_short_np2,
# the test hook LLM_FAULT_SHORT_ALL_REDUCE; NCCL does not compare sizes, and
# on an H100 it completed such an all-reduce): a non-zero exit, with a line
# naming the all-reduce (the collectives' agreement check's, before the
# step's update; the watchdog's, where NCCL would wait for bytes that never
# come).
# usage: stalled_rank_test.sh <path to train> <mpiexec> <case> [rank wrapper]
#   cases: ddp_np2 (stop rank 1 of 2), zero3_np4 (rank 2 of 4),
#          mesh_np4 (rank 3 of a 2 x 2 tensor x pipeline mesh), skip_np2;
#          nccl_ddp_np2 (rank 1 of 2), nccl_zero3_np2 (rank 0 of 2),
#          nccl_kill_ddp_np2 (kill rank 1 of 2), nccl_short_np2 (rank 1 of 2
#          sends one element short): the CUDA backend over NCCL,
#          run by the emulation's trainer (train_emulated), or on a GPU over
#          real NCCL with tools/one_gpu_ranks.sh as the rank wrapper
set -u
train=$1
mpiexec=$2
case=$3
wrapper=()
[ -n "${4:-}" ] && wrapper=("$(readlink -f "$4")")
signal=STOP
timeout_s=6
fail() { echo "FAIL ($case): $*"; exit 1; }
work=$(mktemp -d /tmp/stalled_rank.XXXXXX)
cleanup() {
  pkill -KILL -f "checkpoint.dir=$work/run" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

flags=(--training.steps=100000 --training.eval_interval=0 --training.sample_tokens=0
       --checkpoint.interval=20 --checkpoint.dir="$work/run" --parallel.timeout=${timeout_s}s)
case $case in
  ddp_np2) ranks=2 stopped=1 flags+=(--parallel.mode=ddp) ;;
  zero3_np4) ranks=4 stopped=2 flags+=(--parallel.mode=zero3) ;;
  mesh_np4) ranks=4 stopped=3
    flags+=(--parallel.tensor_parallel=2 --parallel.pipeline_parallel=2 --model.tie_embeddings=false) ;;
  nccl_ddp_np2) ranks=2 stopped=1
    flags+=(--parallel.mode=ddp --training.device=cuda --parallel.comm=nccl) ;;
  nccl_zero3_np2) ranks=2 stopped=0
    flags+=(--parallel.mode=zero3 --training.device=cuda --parallel.comm=nccl) ;;
  nccl_kill_ddp_np2) ranks=2 stopped=1 signal=KILL
    flags+=(--parallel.mode=ddp --training.device=cuda --parallel.comm=nccl) ;;
  nccl_short_np2) ranks=2 stopped=1 signal=NONE
    flags+=(--parallel.mode=ddp --training.device=cuda --parallel.comm=nccl)
    flags+=(--checkpoint.async=false)
    export LLM_FAULT_SHORT_ALL_REDUCE=1:115 ;;  # step 23 of tiny: after the first checkpoint
  skip_np2) ranks=2 stopped=1 signal=NONE flags=("${flags[@]/--training.steps=100000/--training.steps=60}")
    flags+=(--checkpoint.async=false)
    export LLM_FAULT_SKIP_ALL_REDUCE_SUM=1:50 ;;
  *) fail "unknown case" ;;
esac

"$mpiexec" -np "$ranks" --oversubscribe -x LLM_FAULT_SKIP_ALL_REDUCE_SUM -x LLM_FAULT_SHORT_ALL_REDUCE \
  "${wrapper[@]}" "$train" \
  --config configs/tiny.toml "${flags[@]}" > "$work/job.log" 2>&1 &
job=$!

# The rank's pid, from the rank each process was given.
rank_pid() {
  for pid in $(pgrep -f "checkpoint.dir=$work/run" ); do
    if tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1"; then
      echo "$pid"
      return
    fi
  done
}

# Wait for a first checkpoint, so that there is one to keep intact.
for _ in $(seq 300); do
  [ -e "$work/run/latest" ] && break
  kill -0 "$job" 2>/dev/null || break
  sleep 0.1
done
[ -e "$work/run/latest" ] || fail "no checkpoint before the fault: $(tail -3 "$work/job.log")"
start=$(date +%s.%N)
if [ "$signal" != NONE ]; then
  pid=$(rank_pid "$stopped")
  [ -n "$pid" ] || fail "no process for rank $stopped"
  kill -"$signal" "$pid"
fi
# The bound below is checked after the job ends; a job that outlives it by
# 10 s more is still running: say what it was doing, and end it.
for _ in $(seq $(( (timeout_s + 20) * 10 ))); do
  kill -0 "$job" 2>/dev/null || break
  sleep 0.1
done
if kill -0 "$job" 2>/dev/null; then
  echo "the job's last lines:"; tail -15 "$work/job.log"
  kill -KILL "$job" 2>/dev/null
  fail "still running $(( timeout_s + 20 )) s after the fault"
fi
wait "$job"
status=$?
# awk, not bc: a bare GPU machine has no bc.
elapsed=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
echo "$case: exit $status after ${elapsed} s (parallel.timeout ${timeout_s} s)"
awk -v e="$elapsed" -v t="$timeout_s" 'BEGIN { exit !(e <= t + 10) }' || fail "took $elapsed s"
if [ "$signal" = KILL ]; then
  [ "$status" -ne 0 ] || fail "exit status 0 after a rank was killed"
  grep -Eq "rank $stopped\b" "$work/job.log" || fail "the killed rank $stopped is not named: $(tail -5 "$work/job.log")"
fi
if [ "$case" = nccl_short_np2 ]; then
  [ "$status" -ne 0 ] || fail "exit status 0 after a short all-reduce"
  line=$(grep -m1 -E 'error: .*(all_reduce #|ncclAllReduce)' "$work/job.log") ||
    fail "no line names the all-reduce: $(grep -i error "$work/job.log" | head -3)"
  echo "$line"
fi
[ "$signal" = KILL ] || [ "$case" = nccl_short_np2 ] || [ "$status" -eq 75 ] ||
  fail "exit status $status, not 75: $(grep error "$work/job.log" | head -3)"
if [ "$signal" = STOP ] || [ "$case" = skip_np2 ]; then
  line=$(grep -m1 'error: watchdog: .* never reached by' "$work/job.log") ||
    fail "no watchdog line: $(grep -i error "$work/job.log" | head -3)"
  echo "$line"
  if [ "$case" = skip_np2 ]; then
    grep -q "rank $stopped (at #" <<<"$line" || grep -q "^rank $stopped: error: watchdog" "$work/job.log" ||
      fail "the skipping rank $stopped is not named"
  else
    grep -q "rank $stopped (no answer" "$work/job.log" || fail "the stopped rank $stopped is not named"
  fi
  # Every rank that could wrote its recorder; after a skip, the dumps show the
  # divergence. (A stopped rank may still write one: the job's teardown sends
  # SIGCONT before SIGTERM, and by then it may have caught up.)
  live=$(( stopped == 0 ? 1 : 0 ))
  [ -f "$work/run/flight_recorder/rank_0000$live.json" ] || fail "rank $live wrote no flight recorder"
  analysis=$(python3 tools/flight_recorder.py "$work/run")
  if [ "$case" = skip_np2 ]; then
    grep -q 'first divergence' <<<"$analysis" || fail "no divergence found: $analysis"
  fi
fi
latest=$(cat "$work/run/latest")
[ -f "$work/run/$latest/meta.json" ] || fail "latest ($latest) is not a complete checkpoint"
"$train" export --checkpoint "$work/run" --out "$work/hf" > "$work/export.log" 2>&1 ||
  fail "the latest checkpoint does not load: $(tail -2 "$work/export.log")"
echo "PASS: $case"
