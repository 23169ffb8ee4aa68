#!/usr/bin/env bash
# The chat format comes back with the model: for each format (Llama 3's on
# the fixture tiktoken file, ChatML on the fixture Qwen tokenizer.json),
# conversations prepared with `prepare --chat`, a tiny model trained a few
# steps on them and exported. Checks (test/chat_template_check.py, Debian's
# python3 and python3-jinja2): the export's JSON files hold the fields
# transformers reads; its chat template, rendered by Jinja, gives the text of
# prepare's ids for every conversation; and its generation prompt is what
# `generate --chat` began with. The exported tokenizer.json loads back here
# and the export replies as the run does.
# usage: chat_export_test.sh <path to train>
set -u
train=$(realpath "$1")
repo=$(pwd)
fail() { echo "FAIL: $*"; exit 1; }
work=$(mktemp -d /tmp/chat_export.XXXXXX)
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=1
PYTHON=$([ -x /usr/bin/python3 ] && echo /usr/bin/python3 || echo python3)
conversations="$work/conversations.jsonl"
cat "$repo/test/data/chat/varied_conversations.jsonl" "$repo/test/data/chat/conversations.jsonl" \
  > "$conversations"
prompt="What is the capital of France?"

check_format() {  # <name> <tokenizer file> <vocab size> <format named by export>
  local name=$1 tokenizer=$2 vocab=$3 format=$4 dir="$work/$1"
  "$train" prepare --chat --tokenizer "$tokenizer" --input "$conversations" --out "$dir/data" \
    --val-fraction 0 --jobs 2 > "$dir.prepare.log" 2>&1 ||
    fail "$name: prepare --chat: $(tail -3 "$dir.prepare.log")"
  cat > "$dir.toml" <<TOML
[model]
dim = 32
n_layers = 1
n_heads = 2
n_kv_heads = 1
ffn_dim = 64
vocab_size = $vocab

[training]
steps = 2
batch_size = 2
micro_batch_size = 2
eval_interval = 0
sample_tokens = 0

[data]
train = "$dir/data/train_*.bin"
tokenizer = "$tokenizer"

[checkpoint]
dir = "$dir/run"
interval = 0
TOML
  "$train" --config "$dir.toml" > "$dir.train.log" 2>&1 ||
    fail "$name: training: $(tail -3 "$dir.train.log")"
  "$train" export --checkpoint "$dir/run" --out "$dir/hf" > "$dir.export.log" 2>&1 ||
    fail "$name: export: $(tail -3 "$dir.export.log")"
  grep -q "chat template: $format" "$dir.export.log" ||
    fail "$name: export did not name the chat template: $(cat "$dir.export.log")"
  local from_run from_hf
  from_run=$("$train" generate --checkpoint "$dir/run" --chat --prompt "$prompt" --temperature 0 \
    --max-new-tokens 4 2>&1) || fail "$name: generate --chat from the run: $from_run"
  printf '%s' "$from_run" > "$dir.generated.txt"
  local check
  check=$("$PYTHON" "$repo/test/chat_template_check.py" "$dir/hf" "$dir/data" "$conversations" \
    "$prompt" "$dir.generated.txt" 2>&1) || fail "$name: $check"
  from_hf=$("$train" generate --checkpoint "$dir/hf" --chat --prompt "$prompt" --temperature 0 \
    --max-new-tokens 4 2>&1) || fail "$name: generate --chat from the export: $from_hf"
  [ "$(head -n -1 <<<"$from_run")" = "$(head -n -1 <<<"$from_hf")" ] ||
    fail "$name: the export replies '$from_hf', the run '$from_run'"
}

mkdir -p "$work/llama3" "$work/chatml"
check_format llama3 "$repo/test/data/tokenizers/bpe.tiktoken" 2256 "Llama 3's chat format"
check_format chatml "$repo/test/data/tokenizers/qwen2_tokenizer.json" 2003 "ChatML"
echo "PASS: the chat template export (Llama 3's format and ChatML)"
