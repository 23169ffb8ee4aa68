#!/usr/bin/env bash
# Every way of stopping an mpirun job that can save: the run stops at a step
# all ranks agree on, leaves a complete checkpoint of exactly that step (it
# resumes), and exits 0 wherever mpirun allows it (docs/checkpoints.md, "Stopping a run").
#  1. kill -USR1 / -USR2 <mpirun pid>: mpirun forwards both to every rank; exit 0.
#  2. SIGTERM to every rank (srun tasks, a scheduler signalling the ranks); exit 0.
#  3. Ctrl-C (SIGINT to mpirun's process group), 4. kill <mpirun pid> (SIGTERM),
#  5. SIGTERM to mpirun and every rank (a scheduler signalling the whole job):
#     mpirun answers with SIGCONT to the ranks, SIGTERM odls_base_sigkill_timeout
#     seconds later, SIGKILL as long again later, and exits 1 whatever the
#     ranks did; with the timeout raised (default 1 s) the ranks save. It also
#     stops draining the ranks' output: a rank that prints more than a pipe
#     holds in that time blocks until killed (it never reaches the agreed stop),
#     so these runs log every 200 steps: a line of ~450 bytes a second at
#     ~2.5 ms/step, where every 20 steps filled a 64 KiB pipe in seconds.
#     Its last lines may be lost: see check_stopped.
# Each run is signalled once it has logged step 200, waited for up to 120 s: on
# a loaded 2-core machine the start alone can take tens of seconds.
# usage: stop_signals_test.sh <path to train> <mpiexec>
set -u
train=$1
mpiexec=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export OMPI_MCA_odls_base_sigkill_timeout=5  # docs/checkpoints.md recommends 30 for real models

args=(--config configs/tiny.toml --training.steps=100000 --training.eval_interval=0
      --training.eval_sequences=0 --checkpoint.interval=0 --logging.log_interval=200)

# start_run NAME: a 2-rank run in its own session (as from a terminal) in the
# background, once it has trained 200 steps; sets $job (mpirun's pid = its pgid).
start_run() {
  rm -rf "$tmp/$1"
  setsid "$mpiexec" -np 2 --oversubscribe "$train" "${args[@]}" --checkpoint.dir="$tmp/$1" \
    > "$tmp/$1.txt" 2>&1 &
  job=$!
  for _ in $(seq 1200); do
    grep -qE "step +200/" "$tmp/$1.txt" 2>/dev/null && return
    kill -0 "$job" 2>/dev/null || { cat "$tmp/$1.txt"; fail "$1: the run ended before step 200"; }
    sleep 0.1
  done
  fail "$1: no step 200 within 120 s"
}

# check_stopped NAME RC WANT_RC: the stop step is `latest`, complete (it
# resumes), and the status is WANT_RC ("any" for mpirun's own choice).
# Where mpirun exits 0 it has forwarded every line: the log names the stop
# step and its save. Once mpirun itself is signalled it forwards the ranks'
# output only while it lasts, and under load rank 0's lines lag seconds
# behind: the log's last lines can be lost, so a stop step it names must be
# `latest`, and without one `latest` must lie past the step 200 it had logged.
check_stopped() {
  local name=$1 rc=$2 want_rc=$3 log=$tmp/$1.txt
  [ "$want_rc" = any ] || [ "$rc" -eq "$want_rc" ] || { cat "$log"; fail "$name: exit status $rc, expected $want_rc"; }
  local step source="the log"
  step=$(sed -n 's/.*stopped by a signal after step \([0-9]*\).*/\1/p' "$log" | head -1)
  if [ "$want_rc" = 0 ]; then
    [ -n "$step" ] || { cat "$log"; fail "$name: no graceful stop in the log"; }
    grep -q "saved $tmp/$name/step_${step} in" "$log" || { cat "$log"; fail "$name: step_${step} not saved"; }
  elif [ -z "$step" ]; then
    source="latest; the log lost its last lines"
    step=$(sed -n 's/^step_\([0-9]*\)$/\1/p' "$tmp/$name/latest" 2>/dev/null)
    [ -n "$step" ] && [ "$step" -ge 200 ] || fail "$name: no stop in the log and no checkpoint past step 200"
  fi
  [ "$(cat "$tmp/$name/latest")" = "step_${step}" ] || fail "$name: latest is not step_${step}"
  ls -a "$tmp/$name" | grep -q '\.tmp$' && fail "$name: a temporary was left behind"
  "$train" "${args[@]}" --checkpoint.dir="$tmp/$name" --training.stop_at_step=$((step + 1)) \
    > "$tmp/$name.resumed.txt" 2>&1 || { cat "$tmp/$name.resumed.txt"; fail "$name: resuming failed"; }
  grep -q "resumed from .*step_${step} at step ${step}" "$tmp/$name.resumed.txt" ||
    fail "$name: did not resume from step_${step}"
  echo "$name: saved step ${step} (from ${source}), exit status ${rc}, resumed"
}

for signal in USR1 USR2; do
  start_run "sig$signal"
  kill -"$signal" "$job"
  wait "$job"
  check_stopped "sig$signal" $? 0
done

start_run term_ranks
pkill -TERM -P "$job"
wait "$job"
check_stopped term_ranks $? 0

start_run ctrl_c
kill -INT -- -"$job"  # what the terminal does: the foreground process group
wait "$job"
check_stopped ctrl_c $? any

start_run kill_mpirun
kill "$job"
wait "$job"
check_stopped kill_mpirun $? any

start_run term_all
kill -TERM "$job"
pkill -TERM -P "$job"
wait "$job"
check_stopped term_all $? any
echo "PASS"
