#!/usr/bin/env bash
# Progress output of whole commands. Through a pipe (a log file, CI): plain
# lines only, never a '\r', and few of them; --quiet prints nothing. Under
# mpirun, whose ranks write to ptys of its own, plain too. On a terminal (a
# pty from `script`, where installed) or with LLM_PROGRESS=terminal: each of
# prepare's phases is redrawn in place and ended with a newline. The step log
# line names the device memory and the start line the commit built.
# usage: progress_output_test.sh <path to train> <mpiexec>
set -u
train=$1
mpiexec=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; cat -A "$tmp/out.txt"; exit 1; }
no_carriage_return() {
  ! grep -q $'\r' "$tmp/out.txt" || fail "a carriage return in piped output of $1"
}

"$train" prepare --input data/tiny/corpus.txt --out "$tmp/data" --vocab-size 512 |
  cat > "$tmp/out.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || fail "prepare failed"
no_carriage_return prepare
lines=$(wc -l < "$tmp/out.txt")
[ "$lines" -le 12 ] || fail "$lines lines from prepare on the tiny corpus"
grep -q '^prepare: reading: .* | 1 file(s), 0 skipped' "$tmp/out.txt" ||
  fail "no reading result"
grep -q '^prepare: tokenizer .* trained in [0-9.]* s' "$tmp/out.txt" || fail "no tokenizer timing"
grep -q '^prepare: train [0-9]* documents, [0-9]* tokens in 1 shard(s); val ' "$tmp/out.txt" ||
  fail "no encoding result"
grep -q '^prepare: encoded .* into [0-9]* tokens in [0-9.]* s (.* MB/s, [0-9]* job(s))' \
  "$tmp/out.txt" || fail "no encoding speed"

"$train" prepare --input data/tiny/corpus.txt --out "$tmp/quiet" --vocab-size 512 --quiet |
  cat > "$tmp/out.txt"
[ ! -s "$tmp/out.txt" ] || fail "prepare --quiet printed something"

"$train" --config configs/tiny.toml --training.steps=3 --checkpoint.dir="$tmp/run" \
  --training.sample_tokens=0 | cat > "$tmp/out.txt"
no_carriage_return train
grep -q '| commit \([0-9a-f]\+\(-dirty\)\?\|unknown\)$' "$tmp/out.txt" ||
  fail "no commit in the start line"
bytes='[0-9.]* [KMG]iB'
grep -q "step     3/3 | .* | mem $bytes alloc / $bytes resv / $bytes peak |" "$tmp/out.txt" ||
  fail "no memory in the step line"

"$train" bench --config configs/tiny.toml --bench-steps 1 | cat > "$tmp/out.txt"
no_carriage_return bench
grep -q '^  step time' "$tmp/out.txt" || fail "no bench result"

"$mpiexec" -np 1 "$train" prepare --input data/tiny/corpus.txt --out "$tmp/mpi" --vocab-size 512 \
  > "$tmp/out.txt" 2>&1 || fail "prepare under mpirun failed"
no_carriage_return "prepare under mpirun"

LLM_PROGRESS=terminal "$train" prepare --input data/tiny/corpus.txt --out "$tmp/forced" \
  --vocab-size 512 | cat > "$tmp/out.txt"
grep -q $'^\rprepare: reading .*\rprepare: reading: .* | 1 file(s)' "$tmp/out.txt" ||
  fail "LLM_PROGRESS=terminal does not redraw"

if command -v script > /dev/null; then
  # -onlcr: the pty keeps '\n' as it is, so every '\r' is a redraw.
  script -qec "stty -onlcr; '$train' prepare --input data/tiny/corpus.txt --out '$tmp/tty' \
    --vocab-size 512" /dev/null > "$tmp/out.txt" 2>&1 || fail "prepare on a terminal failed"
  grep -q $'^\rprepare: reading .*\rprepare: reading: .* | 1 file(s)' "$tmp/out.txt" ||
    fail "no line redrawn in place on a terminal"
  [ "$(tail -c 1 "$tmp/out.txt" | od -An -c | tr -d ' ')" = '\n' ] ||
    fail "the terminal output does not end with a newline"
fi
echo "PASS"
