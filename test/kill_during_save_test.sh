#!/usr/bin/env bash
# Crash safety of checkpoints.
#  1. SIGKILL at random moments of a run that saves every step: afterwards
#     `latest` always names a complete checkpoint that loads, and the same
#     command resumes from it (interrupted saves leave only .tmp directories).
#  2. SIGTERM to the ranks (as a batch scheduler sends it): the run saves at
#     the step all ranks agree on and exits 0; the same command then resumes.
# usage: kill_during_save_test.sh <path to train> <mpiexec>
set -u
train=$1
mpiexec=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# A model whose state (~25 MB) takes a visible share of each step to save.
args=(--config configs/tiny.toml --model.dim=256 --model.n_layers=4 --model.ffn_dim=512
      --training.steps=400 --training.eval_interval=0 --training.eval_sequences=0
      --checkpoint.interval=1 --checkpoint.keep_last=2 --checkpoint.dir="$tmp/run")

interrupted=0
for delay in 1.3 1.7 2.1 2.6 3.2; do
  "$mpiexec" -np 2 --oversubscribe "$train" "${args[@]}" > "$tmp/killed.txt" 2>&1 &
  job=$!
  sleep "$delay"
  pkill -KILL -f "$tmp/run"
  wait "$job" 2>/dev/null
  ls -a "$tmp/run" 2>/dev/null | grep -q '\.tmp$' && interrupted=$((interrupted + 1))
  [ -f "$tmp/run/latest" ] || continue  # killed before the first save finished
  dir="$tmp/run/$(cat "$tmp/run/latest")"
  [ -f "$dir/meta.json" ] || fail "latest names $dir, which is incomplete"
  ls "$tmp/run" | grep -q '^step_' || fail "no complete checkpoint directory"
done
[ -f "$tmp/run/latest" ] || fail "no checkpoint was ever completed"
step=$(sed 's/step_//' "$tmp/run/latest")
"$train" "${args[@]}" --training.stop_at_step=$((step + 1)) > "$tmp/resumed.txt" 2>&1 ||
  { cat "$tmp/resumed.txt"; fail "resuming after SIGKILL failed"; }
grep -q "resumed from .*step_${step} at step ${step}" "$tmp/resumed.txt" || fail "did not resume from step_${step}"
echo "SIGKILL: ${interrupted} of 5 kills interrupted a save; latest always complete; resumed from step ${step}"

rm -rf "$tmp/run"
"$mpiexec" -np 2 --oversubscribe "$train" "${args[@]}" --checkpoint.interval=0 > "$tmp/term.txt" 2>&1 &
job=$!
sleep 2.5
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
echo "PASS"
