#!/usr/bin/env bash
# The Llama 3 journey of docs/data.md at a tiny size, as a user runs it: a
# JSONL corpus (gzip) prepared with a tiktoken-format tokenizer (the fixture
# test/data/tokenizers/bpe.tiktoken, Llama 3's format and special tokens),
# a Llama-3-shaped model (GQA, untied head, rope theta 500000) trained and
# resumed, then the run directory moved away from the data and the
# directory training ran in: export writes a tokenizer.json with Llama 3's
# BOS/EOS, and generate works from the moved run and from the export alike.
# usage: llama3_journey_test.sh <path to train>
set -u
train=$(realpath "$1")
repo=$(pwd)
fail() { echo "FAIL: $*"; exit 1; }
work=$(mktemp -d /tmp/llama3_journey.XXXXXX)
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=1

for i in $(seq 1 400); do
  printf '{"id": %d, "text": "Record %d: the model reads caf\\u00e9 notes, %d tokens at a time.\\nA second line."}\n' \
    "$i" "$i" $((i * 7))
done | gzip > "$work/corpus.jsonl.gz"
"$train" prepare --tokenizer "$repo/test/data/tokenizers/bpe.tiktoken" --input "$work/corpus.jsonl.gz" \
  --out "$work/data" --val-fraction 0.1 --jobs 2 > "$work/prepare.log" 2>&1 ||
  fail "prepare: $(tail -3 "$work/prepare.log")"
grep -q 'tiktoken BPE, 2256 ids; documents as <|begin_of_text|> ... <|end_of_text|>' "$work/prepare.log" ||
  fail "prepare did not name the tokenizer: $(head -3 "$work/prepare.log")"

cp "$repo/test/data/tokenizers/bpe.tiktoken" "$work/tokenizer.model"
cat > "$work/llama3_tiny.toml" <<TOML
[model]
dim = 64
n_layers = 2
n_heads = 4
n_kv_heads = 2
ffn_dim = 160
vocab_size = 2256
rope_theta = 500000.0
tie_embeddings = false

[training]
steps = 4
batch_size = 4
micro_batch_size = 2
seq_len = 32
eval_interval = 0
sample_tokens = 0

[data]
train = "data/train_*.bin"
val = "data/val_*.bin"
tokenizer = "tokenizer.model"

[checkpoint]
dir = "run"
interval = 2
TOML
cd "$work" || fail "cd $work"
"$train" --config llama3_tiny.toml --training.stop_at_step=2 > train1.log 2>&1 ||
  fail "training to step 2: $(tail -3 train1.log)"
"$train" --config llama3_tiny.toml > train2.log 2>&1 || fail "resuming: $(tail -3 train2.log)"
grep -q 'resumed from' train2.log || fail "the second run did not resume: $(head -5 train2.log)"

# The data, the tokenizer and the directory training ran in are gone.
mv "$work/run" "$work/moved_run"
rm -rf "$work/data" "$work/tokenizer.model"
cd / || fail "cd /"
"$train" export --checkpoint "$work/moved_run" --out "$work/hf" > "$work/export.log" 2>&1 ||
  fail "export of the moved run: $(tail -3 "$work/export.log")"
[ -s "$work/hf/tokenizer.json" ] || fail "export wrote no tokenizer.json"
grep -q '"tokenizer_class": "PreTrainedTokenizerFast"' "$work/hf/tokenizer_config.json" ||
  fail "tokenizer_config.json: $(cat "$work/hf/tokenizer_config.json")"
grep -q '"bos_token": "<|begin_of_text|>"' "$work/hf/tokenizer_config.json" || fail "no Llama 3 BOS"
grep -q '"eos_token_id": 2001' "$work/hf/config.json" || fail "EOS id not 2001"

greedy=(--prompt "Record 7: the model" --temperature 0 --max-new-tokens 6)
from_run=$("$train" generate --checkpoint "$work/moved_run" "${greedy[@]}" 2>&1) ||
  fail "generate from the moved run: $from_run"
from_hf=$("$train" generate --checkpoint "$work/hf" "${greedy[@]}" 2>&1) ||
  fail "generate from the export: $from_hf"
[ "$(head -n -1 <<<"$from_run")" = "$(head -n -1 <<<"$from_hf")" ] ||
  fail "greedy text differs: run '$from_run' vs export '$from_hf'"
grep -q '^Record 7: the model' <<<"$from_run" || fail "the prompt did not come back: $from_run"
echo "PASS: the Llama 3 journey"
