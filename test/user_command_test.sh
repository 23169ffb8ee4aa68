#!/usr/bin/env bash
# The user's command, `mpirun -np N ./train --config configs/llama8b.toml`,
# with only the sizes shrunk (layers, width, sequence, batch: one sequence per
# rank), keeping the architecture, zero3, bf16 with bf16 gradient reduction
# and the untied head as the config has them:
#   1. straight: 5 steps, a checkpoint every 2 (steps 2, 4 and 5);
#   2. the same command stopped at step 2, then run again: it resumes from
#      step_2, and its losses and step_4 shards equal the straight run's bits;
#   3. straight's step_4 loads at N/4 ranks (at least 2) as hybrid (groups of 2) and its
#      step 5 loss follows straight's within 1e-4: the weights are the same
#      bits and each sequence's forward is the same computation, so only the
#      fp32 sum of the per-rank losses is reordered (~1e-7 relative).
# usage: user_command_test.sh <train> <mpiexec> <ranks> [rank wrapper] [-- extra train flags]
#   The device script runs it with 16 ranks through tools/one_gpu_ranks.sh over
#   real NCCL; make test with 4 ranks on the emulated backend.
set -u
train=$1 mpiexec=$2 ranks=$3
shift 3
wrapper=()
if [ $# -gt 0 ] && [ "$1" != -- ]; then wrapper=("$(readlink -f "$1")"); shift; fi
[ "${1:-}" = -- ] && shift
extra=("$@")
fail() { echo "FAIL: $*"; exit 1; }
(( ranks % 4 == 0 )) || fail "ranks must be a multiple of 4"
fewer=$(( ranks / 4 > 2 ? ranks / 4 : 2 ))  # the last phase's world, hybrid in groups of 2
work=$(mktemp -d /tmp/user_command.XXXXXX)
trap 'rm -rf "$work"' EXIT

command=(--config configs/llama8b.toml
  --model.n_layers=2 --model.dim=256 --model.ffn_dim=896 --training.seq_len=256
  --training.batch_size="$ranks" --training.warmup_steps=2 --training.steps=5
  --training.eval_interval=0 --training.sample_tokens=0 --checkpoint.interval=2
  --data.train='data/tiny/train_*.bin' --data.val='' --data.tokenizer=data/tiny/tokenizer.model
  "${extra[@]}")
run() {  # run <name> <ranks> <dir> <args...>
  local name=$1 np=$2 dir=$3; shift 3
  local t0=$SECONDS
  "$mpiexec" -np "$np" --oversubscribe "${wrapper[@]}" "$train" "${command[@]}" \
    --checkpoint.dir="$dir" "$@" > "$work/$name.log" 2>&1 ||
    { tail -20 "$work/$name.log"; fail "$name ($np ranks) failed"; }
  echo "$name: $np ranks, $(( SECONDS - t0 )) s"
}
losses() { grep -o '"loss":[^,]*' "$1/metrics.jsonl" | cut -d: -f2; }

run straight "$ranks" "$work/straight"
run stopped "$ranks" "$work/resumed" --training.stop_at_step=2
run resumed "$ranks" "$work/resumed"
grep -q "resumed from .*step_2 at step 2" "$work/resumed.log" || fail "the second run did not resume from step_2"
[ "$(losses "$work/straight" | sed -n 3,4p)" = "$(losses "$work/resumed" | sed -n 3,4p)" ] ||
  fail "steps 3-4 after resuming differ from the straight run: $(losses "$work/straight" | tr '\n' ' ') vs $(losses "$work/resumed" | tr '\n' ' ')"
shards=$(cd "$work/straight/step_4" && ls shard_*.bin | wc -l)
[ "$shards" = "$ranks" ] || fail "step_4 has $shards shards, not $ranks"
for f in "$work"/straight/step_4/shard_*.bin; do
  cmp -s "$f" "$work/resumed/step_4/$(basename "$f")" || fail "$(basename "$f") of step_4 differs after resuming"
done
echo "resumed: steps 3-4 and the $ranks shards of step_4 are the straight run's bits"

mkdir -p "$work/reshaped"
cp -r "$work/straight/step_4" "$work/reshaped/"
echo step_4 > "$work/reshaped/latest"
run reshaped "$fewer" "$work/reshaped" --parallel.mode=hybrid --parallel.shard_group_size=2
grep -q "resumed from .*step_4 at step 4" "$work/reshaped.log" || fail "the run at $fewer ranks did not load step_4"
a=$(losses "$work/straight" | sed -n 5p) b=$(losses "$work/reshaped" | sed -n 1p)
awk -v a="$a" -v b="$b" -v n="$fewer" 'BEGIN { d = a - b; if (d < 0) d = -d
  printf "step 5 at %d ranks, hybrid: %s; straight: %s (|difference| %.1e)\n", n, b, a, d
  exit !(b != "" && d <= 1e-4) }' ||
  fail "step 5 after loading at $fewer ranks left the straight run"
echo PASS
