#!/usr/bin/env bash
# The discoverable command line: -h, --help and `help` print the usage and
# exit 0 (also after a subcommand); `./train config` prints every key's
# reference, or with --config the resolved config (floats in their shortest
# form); overrides without --config are refused in one line.
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

out=$("$train" config --config train_configs/tiny.toml --training.lr=0.003 --model.dim=32) ||
  fail "./train config --config exited non-zero"
grep -q '^lr = 0.003$' <<<"$out" || fail "resolved config lacks 'lr = 0.003': $out"
grep -q '^dim = 32$' <<<"$out" || fail "resolved config lacks the override dim = 32"

if out=$("$train" config --training.lr=1 2>&1); then fail "overrides without --config accepted"; fi
grep -q 'overrides need --config FILE' <<<"$out" || fail "unclear refusal: $out"
echo "PASS: help and config"
