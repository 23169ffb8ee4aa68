#!/usr/bin/env bash
# Saves in the background (checkpoint.async; docs/checkpoints.md#saving-in-the-background):
# 2 ranks of tiny in zero2 (both ranks write a shard) save every 2 steps in
# the background and blocking. Every checkpoint of the background run holds
# the blocking run's bytes (meta.json but for its resolved config), the run
# ends on the same bits, and a resume from a background checkpoint (step 6)
# ends on them too. On the CUDA backend the copies run on the transfer
# stream into page-locked staging buffers while the next step computes; the
# emulated run checks that the update waits for them.
# usage: async_save_test.sh <path to train> <mpiexec> [-- extra train flags]
#   The emulated CUDA backend's run passes --training.device=cuda.
set -u
train=$(realpath "$1")
mpiexec=$2
shift 2
[ "${1:-}" = -- ] && shift
fail() { echo "FAIL: $*"; exit 1; }
work=$(mktemp -d /tmp/async_save.XXXXXX)
trap 'rm -rf "$work"' EXIT

flags=(--config configs/tiny.toml --training.steps=12 --training.eval_interval=0
       --training.sample_tokens=0 --checkpoint.interval=2 --checkpoint.keep_last=0
       --parallel.mode=zero2 "$@")
run() {
  local name=$1
  shift
  "$mpiexec" -np 2 --oversubscribe "$train" "${flags[@]}" --checkpoint.dir="$work/$name" "$@" \
    > "$work/$name.log" 2>&1 || fail "$name: $(tail -3 "$work/$name.log")"
}
run background --checkpoint.async=true
run blocking --checkpoint.async=false
grep -q "saving step_2 in the background" "$work/background.log" || fail "the background run saved blocking"
for step in 2 4 6 8 10 12; do
  for f in "$work"/blocking/step_$step/shard_*.bin; do
    cmp -s "$f" "$work/background/step_$step/$(basename "$f")" ||
      fail "step_$step/$(basename "$f"): the background save differs from the blocking one"
  done
  python3 - "$work/blocking/step_$step/meta.json" "$work/background/step_$step/meta.json" <<'PY' ||
import json, sys
a, b = (json.load(open(path)) for path in sys.argv[1:3])
a.pop("config"), b.pop("config")
assert a == b
PY
    fail "step_$step/meta.json differs beyond its config"
done
run resumed --checkpoint.async=true --checkpoint.resume="$work/background/step_6"
grep -q "resumed from" "$work/resumed.log" || fail "the resumed run did not resume"
for f in "$work"/blocking/step_12/shard_*.bin; do
  cmp -s "$f" "$work/resumed/step_12/$(basename "$f")" || fail "resumed step_12/$(basename "$f") differs"
done
stall=$(grep -o "step_4 in the background; the step loop stalled [0-9.]* s" "$work/background.log" | head -1)
echo "PASS: 6 background saves hold the blocking saves' bytes; resumed from step_6 to the same bits ($stall)"
