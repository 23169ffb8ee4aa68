#!/usr/bin/env bash
# Elastic restarts (docs/failure.md#a-job-that-comes-back-train-supervise):
# tiny on two hosts (two_hosts.sh) under `./train supervise`, whose command
# carries the hostfile; host B's ranks are killed twice in a row.
#   shrink: 2 ranks a host. The supervisor sets host B aside
#     (--set-aside-after 2) and the job comes back on host A alone at world
#     size 2, the global batch (training.batch_size 8) kept by twice the
#     gradient accumulation. The run must finish with restarts.jsonl naming
#     host B twice and setting it aside, and its loss at every step after the
#     shrink within 1e-4 of a single process's (the data-parallel tests'
#     fp32 tolerance: only the reduction order changes).
#   memory: 1 rank a host, zero3, and parallel.memory_per_rank between what
#     a rank needs at world size 2 and at 1 (memory_per_rank.sh). Host A
#     alone fits no world, so host B is kept, with a line naming the world
#     tried and why it does not fit; both restarts relaunch at world size 2
#     and the run finishes.
# Without root it skips, saying why (exit 77).
# usage: supervise_elastic_test.sh <path to train> <mpiexec> <case> [-- extra train flags]
#   The emulated CUDA backend's run passes --training.device=cuda --parallel.comm=nccl.
set -u
train=$(realpath "$1")
mpiexec=$2
case=$3
shift 3
[ "${1:-}" = -- ] && shift
repo=$(pwd)
# shellcheck source=two_hosts.sh
source "$(dirname "$0")/two_hosts.sh"

steps=40
flags=(--config configs/tiny.toml --training.steps=$steps --training.eval_interval=0
       --training.sample_tokens=0 --checkpoint.interval=4 --parallel.timeout=3s "$@")
np=4 hostfile=$work/hostfile
supervise_flags=(--max-restarts 3 --backoff 0.1s --set-aside-after 2)
if [ "$case" = memory ]; then
  # shellcheck source=memory_per_rank.sh
  source "$(dirname "$0")/memory_per_rank.sh"
  printf 'hosta slots=1\nhostb slots=1\n' > "$work/hostfile1"
  np=2 hostfile=$work/hostfile1
  flags+=(--parallel.mode=zero3)
  limit=$(memory_between_worlds 1 2) || fail "$limit"
  flags+=(--parallel.memory_per_rank="$limit")
else
  "$train" "${flags[@]}" --checkpoint.dir="$work/single" > "$work/single.log" 2>&1 ||
    fail "single process: $(tail -2 "$work/single.log")"
fi

t0=$SECONDS
"${on_host_a[@]}" "$train" supervise "${supervise_flags[@]}" -- \
  "$mpiexec" --hostfile "$hostfile" -np $np "${mpi_flags[@]}" "$train" "${flags[@]}" \
  --checkpoint.dir="$work/run" > "$work/run.log" 2>&1 &
supervisor=$!

# shellcheck source=supervised_run.sh
source "$(dirname "$0")/supervised_run.sh"
# Host B's ranks: the trainer's processes in its namespace.
host_b_ranks() {
  for pid in $(ip netns pids "$ns_b" 2>/dev/null); do
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$(basename "$train" | cut -c1-15)" ] && echo "$pid"
  done
}
step=0 resumed_lines=0
for i in 0 1; do
  target=$(( step + 5 ))
  for _ in $(seq 900); do
    step=$(last_step)
    [ "${step:-0}" -ge "$target" ] && [ "$(restarts)" = "$i" ] && [ -n "$(host_b_ranks)" ] && break
    kill -0 "$supervisor" 2>/dev/null || fail "the supervisor ended before kill $((i + 1)): $(tail -5 "$work/run.log")"
    sleep 0.1
  done
  pid=$(host_b_ranks | head -1)
  [ -n "$pid" ] || fail "no rank on host B to kill at step $target"
  kill -KILL "$pid"
  killed_at=$(date +%s.%N)
  await_recovery "$i" "$killed_at" 600
  echo "kill $((i + 1)): SIGKILL to a rank of host B at step $step; $recovery"
done
for _ in $(seq 1200); do kill -0 "$supervisor" 2>/dev/null || break; sleep 0.1; done
kill -0 "$supervisor" 2>/dev/null && { kill -KILL "$supervisor"; fail "the supervised job still runs: $(tail -5 "$work/run.log")"; }
wait "$supervisor" || fail "the supervisor ended with $?: $(tail -8 "$work/run.log")"
echo "restarts.jsonl:"; cat "$work/run/restarts.jsonl"

memory() {
  [ "$(cat "$work/run/hostfile")" = "$(cat "$work/hostfile1")" ] || fail "the last launch's hostfile: $(cat "$work/run/hostfile")"
  grep -m1 "a host that keeps failing is kept: without it no world fits (at 1 rank(s) on hosta: .*needs .* per rank in mode zero3 .* but parallel.memory_per_rank gives" "$work/run.log" ||
    fail "no line says why host B was kept: $(grep supervise "$work/run.log" | tail -3)"
  python3 - "$work/run/restarts.jsonl" "$work/run/metrics.jsonl" "$steps" <<'PY' || fail "the run kept on both hosts"
import json, sys
restarts = [json.loads(line) for line in open(sys.argv[1])]
assert len(restarts) == 2, restarts
assert [r["host"] for r in restarts] == ["hostb", "hostb"], restarts
assert all("hosts_set_aside" not in r and r["world_size"] == 2 for r in restarts), restarts
steps = sorted({r["step"] for r in map(json.loads, open(sys.argv[2])) if "loss" in r})
assert steps == list(range(1, int(sys.argv[3]) + 1)), steps
PY
  echo "PASS ($case): host B kept (host A alone fits no world); finished at world size 2 ($(( SECONDS - t0 )) s)"
}

shrink() {
  [ "$(cat "$work/run/hostfile")" = "hosta slots=2" ] || fail "the last launch's hostfile: $(cat "$work/run/hostfile")"
  python3 - "$work/run/restarts.jsonl" "$work/single/metrics.jsonl" "$work/run/metrics.jsonl" "$steps" <<'PY' ||
import json, sys
restarts = [json.loads(line) for line in open(sys.argv[1])]
assert len(restarts) == 2, restarts
assert [r["host"] for r in restarts] == ["hostb", "hostb"], restarts
assert "hosts_set_aside" not in restarts[0] and restarts[0]["world_size"] == 4, restarts[0]
assert restarts[1]["hosts_set_aside"] == ["hostb"] and restarts[1]["world_size"] == 2, restarts[1]
def losses(path):
    return {r["step"]: r["loss"] for r in map(json.loads, open(path)) if "loss" in r}
single, run = losses(sys.argv[2]), losses(sys.argv[3])
steps = int(sys.argv[4])
assert sorted(run) == list(range(1, steps + 1)), sorted(run)
shrink = restarts[1]["step"]
after = [s for s in run if s > shrink]
worst = max(abs(single[s] - run[s]) for s in after)
print(f"on host A alone from step {shrink}: {len(after)} steps, largest loss difference {worst:.2e}")
assert worst <= 1e-4, worst
PY
    fail "the elastic run"
  grep -q "resumed from .*at step" "$work/run.log" || fail "the last launch did not resume"
  echo "PASS ($case): host B set aside after 2 failures; finished on host A at world size 2 ($(( SECONDS - t0 )) s)"
}

case $case in
  shrink) shrink ;;
  memory) memory ;;
  *) fail "unknown case $case" ;;
esac
