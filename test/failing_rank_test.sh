#!/usr/bin/env bash
# One failing rank must take the whole job down with its message, quickly.
# Two ranks train on the tiny data plus one extra shard holding a single
# sample of out-of-range tokens: exactly one rank reads it (ranks read
# distinct samples) and throws, while the other waits in a collective. The job
# must exit non-zero within 60 s, naming the rank and the bad shard; the same
# on a mesh of tensor-parallel groups and one of pipeline stages.
# usage: failing_rank_test.sh <path to train> <mpiexec>
set -u
train=$1
mpiexec=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cp data/tiny/train_000.bin "$tmp/train_000.bin"
le32() { printf "\\x$(printf %02x $(($1 & 255)))\\x$(printf %02x $((($1 >> 8) & 255)))\\x$(printf %02x $((($1 >> 16) & 255)))\\x$(printf %02x $((($1 >> 24) & 255)))"; }
{
  le32 20240520; le32 1; le32 33          # magic, version, tokens (seq_len + 1)
  head -c $((253 * 4)) /dev/zero          # rest of the 256-int header
  for _ in $(seq 33); do printf '\xff\xff'; done  # token 65535 >= vocab 512
} > "$tmp/train_001.bin"

fail() { echo "FAIL: $*"; exit 1; }
# run <ranks> <extra flags...>: the job must fail fast, naming a rank and the shard.
run() {
  local ranks=$1
  shift
  local start rc elapsed
  start=$(date +%s)
  timeout 60 "$mpiexec" -np "$ranks" --oversubscribe "$train" --config configs/tiny.toml \
    --data.train="$tmp/train_*.bin" --training.steps=80 --training.eval_interval=0 \
    --checkpoint.dir="$tmp/run_$ranks" "$@" > "$tmp/out.txt" 2>&1
  rc=$?
  elapsed=$(( $(date +%s) - start ))
  tail -5 "$tmp/out.txt"
  [ $rc -ne 124 ] || fail "$ranks ranks $*: the job hung (killed after 60 s)"
  [ $rc -ne 0 ] || fail "$ranks ranks $*: the job exited 0 despite a bad shard"
  grep -qE 'rank [0-9]: error: .*train_001\.bin' "$tmp/out.txt" ||
    fail "$ranks ranks $*: no 'rank N: error:' line naming the bad shard"
  echo "PASS: $ranks ranks $*: job exited with status $rc after ${elapsed} s"
}
run 2
# A 2 x 2 mesh: the tensor group that reads the bad sample fails (both its
# ranks read it) while the other waits in a tensor or data-parallel collective.
run 4 --parallel.tensor_parallel=2 --parallel.mode=zero3
# Two pipelines of two stages: both stages of the replica that reads the bad
# sample fail, the other replica's stages wait on a message or a collective.
run 4 --parallel.pipeline_parallel=2 --model.tie_embeddings=false
