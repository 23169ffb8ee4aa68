#!/usr/bin/env bash
# A config error is the same on every rank: under mpirun it must be printed
# once (by rank 0), without a source location unless LLM_DEBUG=1, and the job
# must exit non-zero (the first case also uses the space form --section.key
# value). The same for an unknown command, with a suggestion.
# usage: config_error_once_test.sh <path to train> <mpiexec>
set -u
train=$1
mpiexec=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; cat "$tmp/out.txt"; exit 1; }

timeout 60 "$mpiexec" -np 3 --oversubscribe "$train" --config configs/tiny.toml \
  --training.lr inf > "$tmp/out.txt" 2>&1
rc=$?
[ $rc -ne 124 ] || fail "the job hung"
[ $rc -ne 0 ] || fail "the job exited 0 despite training.lr = inf"
[ "$(grep -c 'error:' "$tmp/out.txt")" -eq 1 ] || fail "expected exactly one error line"
grep -qx 'error: command line --training.lr=inf: training.lr must be a finite number, got inf' "$tmp/out.txt" ||
  fail "the error line does not name the command line, the key and the value"
! grep -q '\.cpp:' "$tmp/out.txt" || fail "a source location without LLM_DEBUG"

LLM_DEBUG=1 timeout 60 "$train" --config configs/tiny.toml --training.lr=inf > "$tmp/out.txt" 2>&1
grep -q 'got inf (.*\.cpp:[0-9]*)' "$tmp/out.txt" || fail "no source location with LLM_DEBUG=1"
timeout 60 "$mpiexec" -np 3 --oversubscribe "$train" bnech --config configs/tiny.toml > "$tmp/out.txt" 2>&1
rc=$?
[ $rc -ne 124 ] || fail "the job hung on an unknown command"
[ $rc -ne 0 ] || fail "an unknown command exited 0"
[ "$(grep -c 'error:' "$tmp/out.txt")" -eq 1 ] || fail "expected exactly one error line for an unknown command"
grep -q "error: unknown command 'bnech' (did you mean 'bench'?)" "$tmp/out.txt" ||
  fail "the unknown command is not named with a suggestion"
echo "PASS"
