#!/usr/bin/env bash
# `./train generate` as a user runs it: from a run directory (its latest
# checkpoint) and from that checkpoint's Hugging Face export, greedy decoding
# gives the same text, with Llama's tokenizer and with Qwen's (no BOS); a prompt in scripts the tokenizer never saw comes back
# intact through byte fallback; several seeded samples repeat; bad options are
# refused in one line.
# usage: generate_test.sh <path to train>
set -u
train=$1
fail() { echo "FAIL: $*"; exit 1; }
work=$(mktemp -d /tmp/generate_test.XXXXXX)
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=1

"$train" --config configs/tiny.toml --training.steps=6 --training.eval_interval=0 \
  --training.sample_tokens=0 --checkpoint.dir="$work/runs" >"$work/train.log" 2>&1 ||
  fail "training the tiny model: $(tail -3 "$work/train.log")"
run=$work/runs
"$train" export --checkpoint "$run" --out "$work/hf" >/dev/null 2>&1 || fail "export"

greedy=(--prompt "The cat" --temperature 0 --max-new-tokens 12)
# Greedy text from run directory $1 and from its export $2: the same, and
# starting with the prompt; leaves the run's output in $from_run.
same_greedy_text() {
  from_run=$("$train" generate --checkpoint "$1" "${greedy[@]}" 2>&1) || fail "generate from $1: $from_run"
  local from_hf
  from_hf=$("$train" generate --checkpoint "$2" "${greedy[@]}" 2>&1) || fail "generate from $2: $from_hf"
  [ "$(head -n -1 <<<"$from_run")" = "$(head -n -1 <<<"$from_hf")" ] ||
    fail "greedy text differs: run '$from_run' vs export '$from_hf'"
  grep -q '^The cat' <<<"$from_run" || fail "the sample does not start with the prompt: $from_run"
}
same_greedy_text "$run" "$work/hf"
grep -Eq 'step_6: 12 new tokens in [0-9.]+ s, [0-9.]+ tokens/s' <<<"$from_run" ||
  fail "no tokens/s line: $from_run"

# Qwen's tokenizer has no BOS: a Qwen3-shaped model (QK-norm, heads wider
# than dim / n_heads) on data prepared with it, from the run and from its
# export alike, prints the prompt whole and the same greedy text.
"$train" prepare --tokenizer test/data/tokenizers/qwen2_tokenizer.json \
  --input data/tiny/corpus.txt --out "$work/qwen_data" --quiet >"$work/prepare.log" 2>&1 ||
  fail "prepare with Qwen's tokenizer: $(tail -3 "$work/prepare.log")"
"$train" --config configs/tiny.toml --training.steps=6 --training.eval_interval=0 \
  --training.sample_tokens=0 --checkpoint.dir="$work/qwen_runs" --model.vocab_size=2048 \
  --model.qk_norm=true --model.head_dim=32 --data.document_masking=true \
  --data.train="$work/qwen_data/train_*.bin" --data.val="$work/qwen_data/val_*.bin" \
  --data.tokenizer=test/data/tokenizers/qwen2_tokenizer.json >"$work/qwen.log" 2>&1 ||
  fail "training with Qwen's tokenizer: $(tail -3 "$work/qwen.log")"
"$train" export --checkpoint "$work/qwen_runs" --out "$work/qwen_hf" >/dev/null 2>&1 || fail "Qwen export"
grep -q '"bos_token_id": null' "$work/qwen_hf/config.json" || fail "Qwen export names a BOS"
same_greedy_text "$work/qwen_runs" "$work/qwen_hf"

unseen="Всё 日本"
out=$("$train" generate --checkpoint "$run" --prompt "$unseen" --max-new-tokens 3 2>&1) ||
  fail "a prompt in unseen scripts: $out"
grep -q "^$unseen" <<<"$out" || fail "byte fallback lost the prompt: $out"

sampled=(--prompt "The" --samples 3 --max-new-tokens 8 --temperature 1 --seed 4)
first=$("$train" generate --checkpoint "$run" "${sampled[@]}" 2>&1) || fail "3 samples: $first"
second=$("$train" generate --checkpoint "$run" "${sampled[@]}" 2>&1) || fail "3 samples again"
[ "$(grep -c '^--- sample' <<<"$first")" = 3 ] || fail "not 3 samples: $first"
[ "$(head -n -1 <<<"$first")" = "$(head -n -1 <<<"$second")" ] || fail "seeded samples differ"

for bad in "--top-p 2" "--samples 0" "--device tpu" "--max-new-tokens x"; do
  # shellcheck disable=SC2086
  if out=$("$train" generate --checkpoint "$run" $bad 2>&1); then fail "accepted $bad"; fi
  [ "$(wc -l <<<"$out")" = 1 ] && grep -q '^error: --' <<<"$out" || fail "$bad: not one error line: $out"
done
if out=$("$train" generate --checkpoint "$work" 2>&1); then fail "accepted a directory with no model"; fi
grep -q "neither a checkpoint" <<<"$out" || fail "unclear refusal: $out"
echo "PASS: generate"
