#!/usr/bin/env bash
# Fine-tuning on conversations, as docs/data.md#conversations walks through
# it, at a tiny size: a base model trained on plain text and exported to
# Hugging Face, the chat data set test/data/chat/conversations.jsonl
# prepared with `prepare --chat` (Llama 3's chat format on the fixture
# tokenizer test/data/tokenizers/bpe.tiktoken, a loss mask beside each
# shard), fine-tuning from the export (model.init_from) with document
# masking, then `generate --chat` answering a question of the data set.
# Checks: prepare writes the masks; the log keeps fewer targets than tokens;
# the loss starts below a fresh model's and falls; the reply comes after the assistant's header, is the
# answer taught, and ends at <|eot_id|>.
# usage: chat_journey_test.sh <path to train>
set -u
train=$(realpath "$1")
repo=$(pwd)
fail() { echo "FAIL: $*"; exit 1; }
work=$(mktemp -d /tmp/chat_journey.XXXXXX)
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=1
tokenizer="$repo/test/data/tokenizers/bpe.tiktoken"

# 1. A base model: a few steps on plain text, exported.
for i in $(seq 1 200); do
  printf '{"text": "Note %d: a question is asked, and an answer is given in one word."}\n' "$i"
done > "$work/base.jsonl"
"$train" prepare --tokenizer "$tokenizer" --input "$work/base.jsonl" --out "$work/base_data" \
  --val-fraction 0 --jobs 2 --quiet > "$work/prepare_base.log" 2>&1 ||
  fail "prepare of the base text: $(tail -3 "$work/prepare_base.log")"
cat > "$work/chat_tiny.toml" <<TOML
[model]
dim = 64
n_layers = 2
n_heads = 4
n_kv_heads = 2
ffn_dim = 160
vocab_size = 2256
tie_embeddings = false

[training]
steps = 10
batch_size = 8
micro_batch_size = 8
seq_len = 64
lr = 3e-3
warmup_steps = 2
eval_interval = 0
sample_tokens = 0

[data]
train = "base_data/train_*.bin"
tokenizer = "$tokenizer"

[checkpoint]
dir = "base_run"
interval = 0

[logging]
log_interval = 1
TOML
cd "$work" || fail "cd $work"
"$train" --config chat_tiny.toml > base.log 2>&1 || fail "base training: $(tail -3 base.log)"
"$train" export --checkpoint base_run --out base_hf > export.log 2>&1 ||
  fail "export: $(tail -3 export.log)"

# 2. The conversations, in Llama 3's chat format with their loss masks.
"$train" prepare --chat --tokenizer "$tokenizer" --input "$repo/test/data/chat/conversations.jsonl" \
  --out chat_data --val-fraction 0 --jobs 2 > prepare_chat.log 2>&1 ||
  fail "prepare --chat: $(tail -3 prepare_chat.log)"
grep -q "conversations in Llama 3's chat format" prepare_chat.log ||
  fail "prepare did not name the chat format: $(head -3 prepare_chat.log)"
[ -s chat_data/train_000.bin.mask ] || fail "no loss mask beside the shard: $(ls chat_data)"

# 3. Fine-tuning from the export, on the assistant's tokens only.
finetune=(--config chat_tiny.toml --model.init_from=base_hf "--data.train=chat_data/train_*.bin"
  --data.document_masking=true --checkpoint.dir=chat_run --training.steps=150)
"$train" "${finetune[@]}" > finetune.log 2>&1 || fail "fine-tuning: $(tail -3 finetune.log)"
grep -q 'targets kept' finetune.log || fail "the log shows no kept targets: $(grep step finetune.log | head -2)"
tokens_per_step=$((8 * 64))
kept=$(grep -o '"kept_targets":[0-9]*' chat_run/metrics.jsonl | cut -d: -f2)
[ -n "$kept" ] || fail "metrics.jsonl has no kept_targets"
for k in $kept; do
  [ "$k" -gt 0 ] && [ "$k" -lt "$tokens_per_step" ] ||
    fail "kept targets $k of $tokens_per_step: the mask kept all or none"
done
losses() { grep -o '"loss":[0-9.e+-]*' "$1/metrics.jsonl" | cut -d: -f2; }
first=$(losses chat_run | head -1)
last=$(losses chat_run | tail -1)
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a / 2) }' ||
  fail "the loss did not fall by half: $first -> $last"
# The export's weights were the start: a fresh model's first loss is higher.
"$train" "${finetune[@]}" --model.init_from= --checkpoint.dir=fresh_run --training.steps=1 \
  > fresh.log 2>&1 || fail "a fresh run: $(tail -3 fresh.log)"
fresh=$(losses fresh_run | head -1)
awk -v a="$first" -v b="$fresh" 'BEGIN { exit !(a < b) }' ||
  fail "fine-tuning did not start from the export: first loss $first, a fresh model's $fresh"

# 4. The fine-tuned model answers in the chat format.
out=$("$train" generate --checkpoint chat_run --chat --prompt "What is the capital of France?" \
  --temperature 0 --max-new-tokens 16 2>&1) || fail "generate --chat: $out"
reply=$(head -n -1 <<<"$out")
prompt=$'<|start_header_id|>user<|end_header_id|>\n\nWhat is the capital of France?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n'
[ "${reply:0:${#prompt}}" = "$prompt" ] || fail "the prompt was not rendered as a user turn: $out"
[ "${reply: -10}" = "<|eot_id|>" ] || fail "the reply did not end at <|eot_id|>: $out"
[ "${reply:${#prompt}}" = "Paris.<|eot_id|>" ] || fail "the reply is not the one taught: $out"
echo "PASS: the chat journey (loss $first -> $last, kept $(head -1 <<<"$kept") of $tokens_per_step targets; reply: ${reply:${#prompt}})"
