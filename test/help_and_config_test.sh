#!/usr/bin/env bash
# The discoverable command line: -h, --help and `help` print the usage and
# exit 0 (also after a subcommand); `./train config` prints every key's
# reference, or with --config the resolved config (floats in their shortest
# form), with --counts its parameter and FLOP counts as JSON (checked here
# against the textbook formulas); overrides or --counts without --config are
# refused in one line.
# usage: help_and_config_test.sh <path to train>
set -u
train=$1
fail() { echo "FAIL: $*"; exit 1; }

for args in "-h" "--help" "help" "bench -h" "plan --help"; do
  # shellcheck disable=SC2086
  out=$("$train" $args 2>&1) || fail "./train $args exited non-zero"
  grep -q '^usage:' <<<"$out" || fail "./train $args printed no usage"
done

out=$("$train" config) || fail "./train config exited non-zero"
grep -q '^| `training.lr` | float | `0.003` |' <<<"$out" || fail "no training.lr row: $out"
grep -q '^| `parallel.pipeline_parallel` | integer | `1` |' <<<"$out" || fail "no pipeline_parallel row"

out=$("$train" config --config configs/tiny.toml --training.lr=0.003 --model.dim=32) ||
  fail "./train config --config exited non-zero"
grep -q '^lr = 0.003$' <<<"$out" || fail "resolved config lacks 'lr = 0.003': $out"
grep -q '^dim = 32$' <<<"$out" || fail "resolved config lacks the override dim = 32"

# The counts against an independent count: a Llama block holds two norm gains
# (2C), wq|wk|wv ((H + 2KV) D x C), wo (C x HD), w1|w3 (2F x C) and w2 (C x F);
# a step's model FLOPs are 6 x matmul weights x tokens (the LM head's V x C
# included, tied or not) plus causal attention's 12 D T(T+1)/2 per head,
# layer and sequence.
overrides=(--training.batch_size=6 --training.micro_batch_size=3 --model.tie_embeddings=false)
toml=$("$train" config --config configs/tiny.toml "${overrides[@]}") ||
  fail "./train config --config tiny exited non-zero"
counts=$("$train" config --config configs/tiny.toml --counts "${overrides[@]}") ||
  fail "./train config --counts exited non-zero"
python3 - "$toml" "$counts" <<'PY' || fail "counts differ from the independent count: $counts"
import json, sys, tomllib
config, counts = tomllib.loads(sys.argv[1]), json.loads(sys.argv[2])
m, t = config["model"], config["training"]
C, L, H, KV, F, V = m["dim"], m["n_layers"], m["n_heads"], m["n_kv_heads"], m["ffn_dim"], m["vocab_size"]
D, T, B = C // H, t["seq_len"], t["batch_size"]
block = 2 * C + (H + 2 * KV) * D * C + C * H * D + 3 * F * C
assert not m["tie_embeddings"]
expected = V * C + L * block + C + V * C
p = counts["parameters"]
assert (p["total"], p["per_block"], p["blocks"]) == (expected, block, L * block), (p, expected)
matmul = 6 * (L * (block - 2 * C) + V * C) * B * T
attention = 12 * D * T * (T + 1) // 2 * H * L * B
f = counts["flops_per_step"]
assert (f["matmul"], f["attention"]) == (matmul, attention), (f, matmul, attention)
PY

if out=$("$train" config --counts 2>&1); then fail "--counts without --config accepted"; fi
grep -q 'need --config FILE' <<<"$out" || fail "unclear refusal: $out"
if out=$("$train" config --training.lr=1 2>&1); then fail "overrides without --config accepted"; fi
grep -q 'overrides and --counts need --config FILE' <<<"$out" || fail "unclear refusal: $out"
echo "PASS: help and config"
