#!/usr/bin/env bash
# `./train supervise` (docs/failure.md#a-job-that-comes-back-train-supervise):
#   kills: a 4-rank run of tiny under the supervisor has a rank killed three
#     times at steps drawn from a fixed seed (SIGKILL, SIGSTOP, SIGKILL; the
#     stopped rank is caught by the watchdog, parallel.timeout 3 s). Each time
#     the supervisor runs the same command again, which resumes from `latest`;
#     the run ends at its last step with every shard of its last checkpoint
#     the same bits as an uninterrupted run's, and restarts.jsonl names each
#     failure: its exit status, the rank killed, the step resumed from.
#   bad_input: a misspelt config key is refused at once with its one line
#     and no launch; bad data found by the launched job (exit status 1) is
#     not retried either: one launch, no restarts.jsonl.
#   stop: SIGUSR1 to the supervisor is passed on to mpirun, which forwards
#     it to the ranks: the job saves the step it stopped at and exits 0, and
#     nothing is restarted.
#   agreement (the CUDA backend over NCCL only): one rank's all-reduce is an
#     element short (LLM_FAULT_SHORT_ALL_REDUCE, after the first checkpoint);
#     NCCL does not notice, the collectives' agreement check does and ends
#     the job with 1, and the supervisor does not retry it.
#   memory: on a hostfile of one slot, zero3 with parallel.memory_per_rank
#     between what a rank needs at world size 2 and at 1: no world fits, so
#     the supervisor refuses at once, exit status 1, one line naming the
#     world it tried and both figures, nothing launched.
#   nccl_error (the CUDA backend over NCCL only): rank 1's 115th NCCL call
#     fails as NCCL fails when its transport does (LLM_FAULT_NCCL_ERROR,
#     ncclSystemError, after the checkpoint of step 25). Alone, the job ends
#     with 75 within seconds, its one error line naming rank 1 and the
#     collective; under the supervisor, with the fault in the first launch
#     only, it is restarted once from `latest`, restarts.jsonl records the
#     NCCL error, and step_60's shards are the uninterrupted run's bits.
# usage: supervise_test.sh <path to train> <mpiexec> <case> [-- extra train flags]
#   The emulated CUDA backend's run passes --training.device=cuda --parallel.comm=nccl.
set -u
train=$(realpath "$1")
mpiexec=$2
case=$3
shift 3
[ "${1:-}" = -- ] && shift
fail() { echo "FAIL ($case): $*"; exit 1; }
work=$(mktemp -d /tmp/supervise.XXXXXX)
cleanup() {
  [ -n "${supervisor:-}" ] && kill -KILL "$supervisor" 2>/dev/null
  pkill -KILL -f "checkpoint.dir=$work/" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

flags=(--config configs/tiny.toml --training.steps=60 --training.eval_interval=0
       --training.sample_tokens=0 --checkpoint.interval=5 --parallel.timeout=3s "$@")
job=("$mpiexec" -np 4 --oversubscribe "$train" "${flags[@]}")

bad_input() {
  local t0=$SECONDS
  "$train" supervise --backoff 0.1s -- "${job[@]}" --training.stpes=5 --checkpoint.dir="$work/bad" \
    > "$work/bad.log" 2>&1
  local status=$?
  [ "$status" = 1 ] || fail "a misspelt key: exit status $status, not 1: $(cat "$work/bad.log")"
  [ "$(wc -l < "$work/bad.log")" = 1 ] || fail "a misspelt key printed more than one line: $(cat "$work/bad.log")"
  grep -q "^error: .*training.stpes.*did you mean" "$work/bad.log" || fail "the line does not name the key: $(cat "$work/bad.log")"
  [ ! -e "$work/bad" ] || fail "a refused config left a run directory"
  "$train" supervise --backoff 0.1s -- "${job[@]}" --data.train="$work/missing_*.bin" \
    --checkpoint.dir="$work/data" > "$work/data.log" 2>&1
  status=$?
  [ "$status" = 1 ] || fail "missing data: exit status $status, not 1: $(tail -3 "$work/data.log")"
  grep -q "missing_" "$work/data.log" || fail "no line names the missing data: $(tail -3 "$work/data.log")"
  [ "$(grep -c "supervise: not restarted" "$work/data.log")" = 1 ] || fail "not one 'not restarted': $(tail -3 "$work/data.log")"
  [ ! -e "$work/data/restarts.jsonl" ] || fail "restarted after bad data: $(cat "$work/data/restarts.jsonl")"
  echo "PASS ($case): a bad key refused at once, bad data not retried ($(( SECONDS - t0 )) s)"
}

stop() {
  "$train" supervise --backoff 0.1s -- "${job[@]}" --training.steps=100000 \
    --checkpoint.dir="$work/stop" > "$work/stop.log" 2>&1 &
  supervisor=$!
  for _ in $(seq 600); do
    [ "$(grep -o '"step":[0-9]*' "$work/stop/metrics.jsonl" 2>/dev/null | tail -1 | cut -d: -f2)" -ge 5 ] 2>/dev/null && break
    sleep 0.1
  done
  kill -USR1 "$supervisor"
  wait "$supervisor"
  local status=$?
  supervisor=
  [ "$status" = 0 ] || fail "exit status $status after SIGUSR1: $(tail -5 "$work/stop.log")"
  grep -q "stopped by a signal after step" "$work/stop.log" || fail "the job did not stop on the signal: $(tail -5 "$work/stop.log")"
  [ -e "$work/stop/latest" ] || fail "no checkpoint of the step it stopped at"
  [ ! -e "$work/stop/restarts.jsonl" ] || fail "restarted after a stop: $(cat "$work/stop/restarts.jsonl")"
  echo "PASS ($case): SIGUSR1 passed on; the job saved $(cat "$work/stop/latest") and was not restarted"
}

agreement() {
  LLM_FAULT_SHORT_ALL_REDUCE=1:115 "$train" supervise --backoff 0.1s -- "$mpiexec" -np 2 \
    --oversubscribe -x LLM_FAULT_SHORT_ALL_REDUCE "$train" "${flags[@]}" --parallel.mode=ddp \
    --checkpoint.dir="$work/agree" > "$work/agree.log" 2>&1
  local status=$?
  [ "$status" = 1 ] || fail "exit status $status, not 1: $(grep -i error "$work/agree.log" | head -3)"
  grep -m1 "error: collectives disagree" "$work/agree.log" ||
    fail "no line of the agreement check: $(grep -i error "$work/agree.log" | head -3)"
  [ "$(grep -c "supervise: not restarted" "$work/agree.log")" = 1 ] || fail "not one 'not restarted'"
  [ ! -e "$work/agree/restarts.jsonl" ] || fail "restarted: $(cat "$work/agree/restarts.jsonl")"
  echo "PASS ($case): the agreement check's failure not retried"
}

memory() {
  flags+=(--parallel.mode=zero3)
  # shellcheck source=memory_per_rank.sh
  source "$(dirname "$0")/memory_per_rank.sh"
  local limit
  limit=$(memory_between_worlds 1 2) || fail "$limit"
  printf 'localhost slots=1\n' > "$work/one_slot"
  "$train" supervise --backoff 0.1s -- "$mpiexec" --hostfile "$work/one_slot" -np 1 "$train" \
    "${flags[@]}" --parallel.memory_per_rank="$limit" --checkpoint.dir="$work/run" > "$work/run.log" 2>&1
  local status=$?
  [ "$status" = 1 ] || fail "exit status $status, not 1: $(tail -3 "$work/run.log")"
  [ "$(wc -l < "$work/run.log")" = 1 ] || fail "more than one line: $(cat "$work/run.log")"
  grep "^error: .*one_slot: no world size up to 1 fits the hosts' 1 slots (at 1 rank(s) on localhost: .*needs .* per rank in mode zero3 .* but parallel.memory_per_rank gives .* available per rank)$" \
    "$work/run.log" || fail "the line does not say which world and why: $(cat "$work/run.log")"
  [ ! -e "$work/run/metrics.jsonl" ] && [ ! -e "$work/run/restarts.jsonl" ] || fail "something was launched"
  echo "PASS ($case): no world fits $limit per rank: refused at once, nothing launched"
}

nccl_error() {
  local t0=$SECONDS ddp=("${flags[@]}" --parallel.mode=ddp)
  "$mpiexec" -np 2 --oversubscribe "$train" "${ddp[@]}" --checkpoint.dir="$work/straight" \
    > "$work/straight.log" 2>&1 || fail "the uninterrupted run: $(tail -3 "$work/straight.log")"
  # Alone: 75 (restartable), one line naming the rank and the collective, and
  # no rank left waiting (the job ends well within the test's limit).
  local started=$SECONDS
  LLM_FAULT_NCCL_ERROR=1:115 timeout 120 "$mpiexec" -np 2 --oversubscribe -x LLM_FAULT_NCCL_ERROR \
    "$train" "${ddp[@]}" --checkpoint.dir="$work/alone" > "$work/alone.log" 2>&1
  local status=$? took=$(( SECONDS - started ))
  [ "$status" != 124 ] || fail "the job hung after the NCCL error: $(grep -i error "$work/alone.log" | head -3)"
  [ "$status" = 75 ] || fail "exit status $status, not 75: $(grep -i error "$work/alone.log" | head -3)"
  grep -m1 "^rank 1: error: NCCL error: ncclAllReduce (all_reduce #[0-9]* on group '[a-z]*') failed: unhandled system error" \
    "$work/alone.log" || fail "no line names rank 1 and the collective: $(grep -i error "$work/alone.log" | head -3)"
  [ "$(grep -c "error:" "$work/alone.log")" = 1 ] || fail "not one error line: $(grep "error:" "$work/alone.log")"
  # Supervised: this launcher injects the fault into its first launch only.
  printf '%s\n' '#!/usr/bin/env bash' \
    "if mkdir '$work/faulted' 2>/dev/null; then" \
    "  LLM_FAULT_NCCL_ERROR=1:115 exec '$mpiexec' -x LLM_FAULT_NCCL_ERROR \"\$@\"" \
    'fi' "exec '$mpiexec' \"\$@\"" > "$work/mpirun_fault_once"
  chmod +x "$work/mpirun_fault_once"
  "$train" supervise --backoff 0.1s -- "$work/mpirun_fault_once" -np 2 --oversubscribe "$train" \
    "${ddp[@]}" --checkpoint.dir="$work/run" > "$work/run.log" 2>&1
  status=$?
  [ "$status" = 0 ] || fail "the supervisor ended with $status: $(tail -5 "$work/run.log")"
  echo "restarts.jsonl:"; cat "$work/run/restarts.jsonl"
  [ "$(restarts)" = 1 ] || fail "$(restarts) restarts recorded, not 1"
  python3 - "$work/run/restarts.jsonl" <<'PY' || fail "restarts.jsonl does not record the NCCL error"
import json, sys
record = json.loads(open(sys.argv[1]).readline())
assert record["exit_status"] == 75 and record["rank"] == 1, record
assert record["error"].startswith("NCCL error: ncclAllReduce (all_reduce #"), record
assert "unhandled system error" in record["error"] and record["step"] >= 5, record
PY
  grep -q "resumed from" "$work/run.log" || fail "the relaunch did not resume: $(tail -5 "$work/run.log")"
  for f in "$work"/straight/step_60/shard_*.bin; do
    cmp -s "$f" "$work/run/step_60/$(basename "$f")" || fail "$(basename "$f") of step_60 differs from the uninterrupted run's"
  done
  echo "PASS ($case): exit 75 in $took s naming rank 1; restarted once, step_60 the uninterrupted run's bits ($(( SECONDS - t0 )) s)"
}

# The rank's pid, from the rank each process was given.
rank_pid() {
  for pid in $(pgrep -f "checkpoint.dir=$work/run"); do
    if tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1"; then
      echo "$pid"
      return
    fi
  done
}
# shellcheck source=supervised_run.sh
source "$(dirname "$0")/supervised_run.sh"

kills() {
  local t0=$SECONDS
  "${job[@]}" --checkpoint.dir="$work/straight" > "$work/straight.log" 2>&1 ||
    fail "the uninterrupted run: $(tail -3 "$work/straight.log")"
  "$train" supervise --max-restarts 5 --backoff 0.1s -- "${job[@]}" --checkpoint.dir="$work/run" \
    > "$work/run.log" 2>&1 &
  supervisor=$!
  RANDOM=57  # the kills' steps and ranks
  local signals=(KILL STOP KILL) killed=() step=0 resumed_lines=0 i target rank pid
  for i in 0 1 2; do
    # A step past any the previous launch logged: the relaunch has resumed and trained to it.
    target=$(( step + 4 + RANDOM % 6 )) rank=$(( RANDOM % 4 ))
    for _ in $(seq 600); do
      step=$(last_step)
      [ "${step:-0}" -ge "$target" ] && [ "$(restarts)" = "$i" ] && pid=$(rank_pid "$rank") && [ -n "$pid" ] && break
      kill -0 "$supervisor" 2>/dev/null || fail "the supervisor ended before kill $((i + 1)): $(tail -5 "$work/run.log")"
      sleep 0.1
    done
    kill -"${signals[$i]}" "$pid" || fail "no rank $rank to kill at step $target"
    local killed_at
    killed_at=$(date +%s.%N)
    killed+=("$rank")
    await_recovery "$i" "$killed_at" 400
    echo "kill $((i + 1)): SIG${signals[$i]} to rank $rank at step $step; $recovery"
  done
  wait "$supervisor"
  local status=$?
  supervisor=
  [ "$status" = 0 ] || fail "the supervisor ended with $status: $(tail -5 "$work/run.log")"
  echo "restarts.jsonl:"; cat "$work/run/restarts.jsonl"
  [ "$(restarts)" = 3 ] || fail "$(restarts) restarts recorded, not 3"
  python3 - "$work/run/restarts.jsonl" "${killed[@]}" <<'PY' || fail "restarts.jsonl does not name each failure"
import json, sys
records = [json.loads(line) for line in open(sys.argv[1])]
killed = [int(rank) for rank in sys.argv[2:]]
statuses = [137, 75, 137]  # mpirun's for a rank killed by SIGKILL; the watchdog's
for record, rank, status in zip(records, killed, statuses):
    assert record["exit_status"] == status, (record, status)
    assert record["rank"] == rank, (record, rank)
    assert record["step"] >= 0 and record["time_lost_seconds"] > 0, record
print("each failure named: ranks", killed, "statuses", statuses)
PY
  for f in "$work"/straight/step_60/shard_*.bin; do
    cmp -s "$f" "$work/run/step_60/$(basename "$f")" || fail "$(basename "$f") of step_60 differs from the uninterrupted run's"
  done
  [ "$(cat "$work/run/latest")" = step_60 ] || fail "latest is $(cat "$work/run/latest"), not step_60"
  echo "PASS ($case): 3 kills, 3 restarts, step_60 shards the uninterrupted run's bits ($(( SECONDS - t0 )) s)"
}

case $case in
  kills) kills ;;
  bad_input) bad_input ;;
  agreement) agreement ;;
  nccl_error) nccl_error ;;
  memory) memory ;;
  stop) stop ;;
  *) fail "unknown case" ;;
esac
