#!/usr/bin/env bash
# Crash safety of checkpoints.
#  1. SIGKILL in the middle of saves of a run that saves every step: afterwards
#     `latest` always names a complete checkpoint that loads, and the same
#     command resumes from it (interrupted saves leave only .tmp directories).
#  2. SIGTERM to the ranks (as a batch scheduler sends it): the run saves at
#     the step all ranks agree on and exits 0; the same command then resumes.
#  3. SIGKILL while a background save (checkpoint.async) is being written:
#     the test hook LLM_FAULT_STALL_SAVE holds rank 1's write of step_4 while
#     the step loop goes on; rank 0 (which moves `latest`) has written its
#     shard, yet `latest` stays on step_2, and the same command resumes from it.
# usage: kill_during_save_test.sh <path to train> <mpiexec>
set -u
train=$1
mpiexec=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# wait_for_line PATTERN LOG JOB WHAT: until LOG has a line matching PATTERN
# (60 s at most), failing as WHAT when job JOB ends first or time runs out.
# After an event, not after a fixed sleep: on a loaded machine the ranks may
# not have reached it within any given time.
wait_for_line() {
  for _ in $(seq 600); do
    grep -q "$1" "$2" && return 0
    kill -0 "$3" 2>/dev/null || { cat "$2"; fail "$4: the run ended before it"; }
    sleep 0.1
  done
  cat "$2"; fail "$4: not within 60 s"
}

# A model whose state (~25 MB) takes a visible share of each step to save.
args=(--config configs/tiny.toml --model.dim=256 --model.n_layers=4 --model.ffn_dim=512
      --training.steps=400 --training.eval_interval=0 --training.eval_sequences=0
      --checkpoint.interval=1 --checkpoint.keep_last=2 --checkpoint.dir="$tmp/run")

# Each kill is aimed at a save: wait until the temporary directory of a save
# at least two steps past `latest` exists (so the run has completed a save of
# its own first), then SIGKILL every process of the job. A kill "landed" when
# that temporary directory is still there afterwards, i.e. the save never
# reached its rename. Most must land, or the test proves nothing about
# interrupted saves. Leftovers of the previous attempt are removed first, so
# they cannot be mistaken for a save in progress.
latest_step() { [ -f "$tmp/run/latest" ] && sed 's/step_//' "$tmp/run/latest" || echo 0; }
save_in_progress() {  # a .step_N.tmp directory with N >= $1
  ls -a "$tmp/run" 2>/dev/null | sed -n 's/^\.step_\([0-9]*\)\.tmp$/\1/p' |
    awk -v min="$1" '$1 >= min { found = 1 } END { exit !found }'
}
landed=0
for attempt in 1 2 3 4 5; do
  rm -rf "$tmp"/run/.step_*.tmp
  target=$(( $(latest_step) + 2 ))
  "$mpiexec" -np 2 --oversubscribe "$train" "${args[@]}" > "$tmp/killed.txt" 2>&1 &
  job=$!
  deadline=$((SECONDS + 60))
  until save_in_progress "$target"; do
    [ $SECONDS -lt $deadline ] || { cat "$tmp/killed.txt"; fail "no save of step $target within 60 s"; }
    kill -0 "$job" 2>/dev/null || { cat "$tmp/killed.txt"; fail "the run ended before it was killed"; }
  done
  pkill -KILL -f "$tmp/run"
  wait "$job" 2>/dev/null
  save_in_progress "$target" && landed=$((landed + 1))
  [ -f "$tmp/run/latest" ] || fail "attempt $attempt: no latest after a complete save"
  dir="$tmp/run/$(cat "$tmp/run/latest")"
  [ -f "$dir/meta.json" ] || fail "latest names $dir, which is incomplete"
done
[ "$landed" -ge 3 ] || fail "only $landed of 5 kills landed during a save"
[ -f "$tmp/run/latest" ] || fail "no checkpoint was ever completed"
step=$(sed 's/step_//' "$tmp/run/latest")
"$train" "${args[@]}" --training.stop_at_step=$((step + 1)) > "$tmp/resumed.txt" 2>&1 ||
  { cat "$tmp/resumed.txt"; fail "resuming after SIGKILL failed"; }
grep -q "resumed from .*step_${step} at step ${step}" "$tmp/resumed.txt" || fail "did not resume from step_${step}"
echo "SIGKILL: ${landed} of 5 kills interrupted a save; latest always complete; resumed from step ${step}"

rm -rf "$tmp/run"
"$mpiexec" -np 2 --oversubscribe "$train" "${args[@]}" --checkpoint.interval=0 > "$tmp/term.txt" 2>&1 &
job=$!
# After step 1: the ranks are training, their stop handler installed.
wait_for_line "step     1/" "$tmp/term.txt" "$job" "SIGTERM: step 1"
pkill -TERM -P "$job"  # the ranks, as a batch scheduler signals them
wait "$job"
rc=$?
[ $rc -eq 0 ] || { cat "$tmp/term.txt"; fail "SIGTERM: exit status $rc"; }
grep -q "stopped by a signal after step" "$tmp/term.txt" || { cat "$tmp/term.txt"; fail "SIGTERM: no graceful stop"; }
step=$(sed 's/step_//' "$tmp/run/latest")
"$train" "${args[@]}" --training.stop_at_step=$((step + 1)) > "$tmp/resumed2.txt" 2>&1 ||
  fail "resuming after SIGTERM failed"
grep -q "resumed from .*step_${step} at step ${step}" "$tmp/resumed2.txt" || fail "did not resume after SIGTERM"
echo "SIGTERM: saved at step ${step}, exited 0, resumed"

rm -rf "$tmp/run"
async=(--checkpoint.interval=2 --checkpoint.async=true --parallel.mode=zero1)  # both ranks write
: > "$tmp/stalled.txt"  # there before the first grep
LLM_FAULT_STALL_SAVE=1:4 "$mpiexec" -np 2 --oversubscribe -x LLM_FAULT_STALL_SAVE "$train" \
  "${args[@]}" "${async[@]}" > "$tmp/stalled.txt" 2>&1 &
job=$!
# The save of step 6 finds step_4 still in flight: training went on past a
# save being written, which is where the kill lands.
wait_for_line "the save of step_4 is still in flight" "$tmp/stalled.txt" "$job" \
  "async: a save waiting for the held write"
# Rank 0 finishes its own shard, then waits for rank 1's.
for _ in $(seq 600); do
  [ -f "$tmp/run/.step_4.tmp/shard_00000.json" ] && break
  sleep 0.1
done
pkill -KILL -f "$tmp/run"
wait "$job" 2>/dev/null
[ "$(cat "$tmp/run/latest")" = step_2 ] || fail "async: latest is $(cat "$tmp/run/latest"), not step_2"
[ -f "$tmp/run/.step_4.tmp/shard_00000.json" ] || fail "async: rank 0 had not written its shard of step_4"
[ ! -e "$tmp/run/.step_4.tmp/shard_00001.json" ] || fail "async: the kill did not land in rank 1's write"
[ ! -e "$tmp/run/step_4" ] || fail "async: step_4 exists though its write was held"
"$train" "${args[@]}" "${async[@]}" --training.stop_at_step=5 > "$tmp/resumed3.txt" 2>&1 ||
  { cat "$tmp/resumed3.txt"; fail "async: resuming after SIGKILL failed"; }
grep -q "resumed from .*step_2 at step 2" "$tmp/resumed3.txt" ||
  { cat "$tmp/resumed3.txt"; fail "async: did not resume from step_2"; }
grep -q "saved .*step_5 in .* in the background" "$tmp/resumed3.txt" ||
  { cat "$tmp/resumed3.txt"; fail "async: the resumed run's final save is missing"; }
echo "SIGKILL during a background write: latest stayed on step_2; resumed from it"
echo "PASS"
