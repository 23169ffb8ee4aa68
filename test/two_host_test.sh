#!/usr/bin/env bash
# Two hosts on one machine, as close to a cluster as one machine gets
# (two_hosts.sh: network namespaces, a data and a management network):
#   1. 2 hosts x 2 ranks, hybrid (shard within a host, replicate across),
#      match the single process step by step (losses within 1e-4, the
#      data-parallel tests' fp32 tolerance: only the summation order differs).
#   2. The data link is cut mid-run: the job must end within
#      parallel.timeout + 10 s, the watchdog naming the lost host's ranks
#      (mpirun still reaches host B's daemon over the management network to
#      end its ranks, as a cluster's launcher does).
#   3. The run resumes from its last checkpoint on one host, at world size 2.
# Without root it skips, saying why (exit 77).
# usage: two_host_test.sh <path to train> <mpiexec>
set -u
train=$(realpath "$1")
mpiexec=$2
repo=$(pwd)
timeout_s=3
# shellcheck source=two_hosts.sh
source "$(dirname "$0")/two_hosts.sh"

hybrid=(--config configs/tiny.toml --parallel.mode=hybrid --parallel.shard_group_size=2
        --training.eval_interval=0 --training.sample_tokens=0)

# 1. The two-host run against the single process.
"$train" --config configs/tiny.toml --training.steps=12 --training.eval_interval=0 \
  --training.sample_tokens=0 --checkpoint.dir="$work/single" > "$work/single.log" 2>&1 ||
  fail "single process: $(tail -2 "$work/single.log")"
timeout 120 "${on_host_a[@]}" "$mpiexec" --hostfile "$work/hostfile" -np 4 "${mpi_flags[@]}" \
  "$train" "${hybrid[@]}" --training.steps=12 --checkpoint.dir="$work/two" > "$work/two.log" 2>&1 ||
  fail "2 hosts x 2 ranks: $(tail -5 "$work/two.log")"
grep -q 'mode hybrid (shard group 2)' "$work/two.log" || fail "not hybrid: $(head -2 "$work/two.log")"
python3 - "$work/single/metrics.jsonl" "$work/two/metrics.jsonl" <<'PY' || fail "the losses differ"
import json, sys
def losses(path):
    return {r["step"]: r["loss"] for r in map(json.loads, open(path)) if "loss" in r}
single, two = losses(sys.argv[1]), losses(sys.argv[2])
assert sorted(single) == sorted(two) == list(range(1, 13)), (sorted(single), sorted(two))
worst = max(abs(single[s] - two[s]) for s in single)
print(f"2 hosts x 2 ranks vs 1 process: 12 steps, largest loss difference {worst:.2e}")
assert worst <= 1e-4, worst
PY

# 2. Cut the data link mid-run.
"${on_host_a[@]}" "$mpiexec" --hostfile "$work/hostfile" -np 4 "${mpi_flags[@]}" "$train" "${hybrid[@]}" \
  --training.steps=100000 --checkpoint.interval=20 --parallel.timeout=${timeout_s}s \
  --checkpoint.dir="$work/cut" > "$work/cut.log" 2>&1 &
job=$!
for _ in $(seq 600); do
  [ -e "$work/cut/latest" ] && break
  kill -0 "$job" 2>/dev/null || break
  sleep 0.1
done
[ -e "$work/cut/latest" ] || fail "no checkpoint before the cut: $(tail -3 "$work/cut.log")"
start=$(date +%s.%N)
ip -n "$ns_a" link set "va$id" down
( sleep $((timeout_s + 30)); kill -KILL "$job" 2>/dev/null ) &
guard=$!
wait "$job"
status=$?
kill "$guard" 2>/dev/null
elapsed=$(echo "$(date +%s.%N) - $start" | bc)
echo "link cut: exit $status after ${elapsed} s (parallel.timeout ${timeout_s} s)"
grep 'error: watchdog' "$work/cut.log" | head -2
# The watchdog names the ranks and aborts; mpirun ends host B's ranks over
# the management network.
[ "$status" -eq 75 ] || fail "exit status $status: $(tail -12 "$work/cut.log")"
(( $(echo "$elapsed <= $timeout_s + 10" | bc) )) || fail "took $elapsed s"
# Each of host B's ranks is named: as a member that never answered, or among
# the other ranks that did not (a host A rank may wait on only one of them).
for rank in 2 3; do
  grep -qE "rank $rank \(no answer|other ranks not answering: ([0-9]+, )*$rank\b" "$work/cut.log" ||
    fail "the lost host's rank $rank is not named"
done
ip netns pids "$ns_b" | xargs -r kill -KILL

# 3. Resume on host A alone, at world size 2.
latest=$(cat "$work/cut/latest")
timeout 120 "${on_host_a[@]}" "$mpiexec" -np 2 --oversubscribe -x OMPI_ALLOW_RUN_AS_ROOT \
  -x OMPI_ALLOW_RUN_AS_ROOT_CONFIRM -x OMP_NUM_THREADS=1 -wdir "$repo" "$train" "${hybrid[@]}" \
  --training.steps=$(( ${latest#step_} + 5 )) --checkpoint.dir="$work/cut" > "$work/resume.log" 2>&1 ||
  fail "resuming on one host: $(grep -i error "$work/resume.log" | head -3)"
grep -q "resumed from .*$latest" "$work/resume.log" || fail "did not resume from $latest"
echo "PASS: two hosts (hybrid matches one process; a cut link ends the job in ${elapsed} s; resumed from $latest on one host)"
