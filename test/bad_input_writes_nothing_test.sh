#!/usr/bin/env bash
# Input found bad after start-up (missing data, a tokenizer larger than the
# vocabulary, a plan that does not fit in memory, a checkpoint to resume that
# is not there) ends the run with status 1 and its message, and writes
# nothing: no run directory, no flight recorder. One case under mpirun too,
# where each rank takes the abort path.
# usage: bad_input_writes_nothing_test.sh <path to train> <mpiexec>
set -u
train=$1
mpiexec=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; cat "$tmp/out.txt"; exit 1; }

# expect_nothing_written <name> <message pattern> <command...>: runs the
# command with checkpoint.dir=$tmp/<name>; it must exit 1, print the pattern,
# and leave $tmp as it was.
expect_nothing_written() {
  local name=$1 pattern=$2
  shift 2
  timeout 120 "$@" --checkpoint.dir="$tmp/$name" > "$tmp/out.txt" 2>&1
  local rc=$?
  [ $rc -eq 1 ] || fail "$name: exit status $rc, expected 1"
  grep -q "$pattern" "$tmp/out.txt" || fail "$name: no message matching '$pattern'"
  local written
  written=$(find "$tmp" -mindepth 1 ! -name out.txt)
  [ -z "$written" ] || fail "$name: bad input wrote: $written"
  echo "ok: $name"
}

tiny=(--config configs/tiny.toml)
expect_nothing_written missing_data "no file matches" \
  "$train" "${tiny[@]}" "--data.train=/no/such/*.bin"
expect_nothing_written tokenizer_too_large "has no embedding row\|have no embedding row" \
  "$train" "${tiny[@]}" --model.vocab_size=100
expect_nothing_written plan_does_not_fit "available per rank" \
  "$train" "${tiny[@]}" --model.dim=16384 --model.ffn_dim=65536 --model.n_layers=64
expect_nothing_written missing_checkpoint "/no/such/step_10" \
  "$train" "${tiny[@]}" --checkpoint.resume=/no/such/step_10
expect_nothing_written missing_data_np2 "no file matches" \
  "$mpiexec" -np 2 --oversubscribe "$train" "${tiny[@]}" "--data.train=/no/such/*.bin"
echo "PASS"
