#!/usr/bin/env bash
# Several NCCL ranks on one GPU (parallel/nccl_placement.h): run by the
# emulation's trainer with LLM_CUDA_EMULATION_DEVICES=1, a one-GPU machine.
#   - Two NCCL ranks without host ids are refused with a line naming the way
#     out (tools/one_gpu_ranks.sh), and a non-zero exit.
#   - Through tools/one_gpu_ranks.sh, in front of mpirun or in front of the
#     program, they are admitted, the log says the GPU is shared for testing,
#     and both forms train to the same losses, bit for bit.
# usage: one_gpu_ranks_test.sh <train (emulated)> <mpiexec>
set -u
train=$1
mpiexec=$2
work=$(mktemp -d /tmp/one_gpu_ranks.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
[ "${LLM_CUDA_EMULATION_DEVICES:-}" = 1 ] || fail "needs LLM_CUDA_EMULATION_DEVICES=1"
launcher=$(readlink -f tools/one_gpu_ranks.sh)

flags=(--config configs/tiny.toml --training.device=cuda --parallel.comm=nccl
       --parallel.mode=zero3 --training.steps=3 --training.eval_interval=0
       --training.sample_tokens=0 --checkpoint.interval=0 --checkpoint.resume=none)
losses() { grep -o '"loss":[^,]*' "$1/metrics.jsonl" | cut -d: -f2 | tr '\n' ' '; }

"$mpiexec" -np 2 --oversubscribe "$train" "${flags[@]}" --checkpoint.dir="$work/refused" \
  > "$work/refused.log" 2>&1 && fail "two NCCL ranks on one GPU without host ids were admitted"
grep -q "NCCL needs one GPU per rank .*tools/one_gpu_ranks.sh" "$work/refused.log" ||
  fail "the refusal does not name the way out: $(grep -m2 error "$work/refused.log")"
echo "refused: $(grep -m1 -o 'error: .*' "$work/refused.log")"

"$launcher" "$mpiexec" -np 2 --oversubscribe "$train" "${flags[@]}" --checkpoint.dir="$work/front" \
  > "$work/front.log" 2>&1 || { tail -5 "$work/front.log"; fail "the launcher in front of mpirun failed"; }
"$mpiexec" -np 2 --oversubscribe "$launcher" "$train" "${flags[@]}" --checkpoint.dir="$work/per_rank" \
  > "$work/per_rank.log" 2>&1 || { tail -5 "$work/per_rank.log"; fail "the launcher per rank failed"; }
for form in front per_rank; do
  grep -q "2 NCCL ranks share 1 GPU(s): each rank has an NCCL_HOSTID of its own" "$work/$form.log" ||
    fail "$form: the start does not say that the GPU is shared"
done
[ -n "$(losses "$work/front")" ] && [ "$(losses "$work/front")" = "$(losses "$work/per_rank")" ] ||
  fail "the two forms trained differently: $(losses "$work/front") vs $(losses "$work/per_rank")"
echo "admitted, both forms: losses $(losses "$work/front")"
echo PASS
