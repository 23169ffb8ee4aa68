#!/usr/bin/env bash
# tools/plot_metrics.py on two small synthetic runs (one with an event record,
# a cut-off last line and validation points) writes a PNG; a directory without
# metrics.jsonl is an error naming it.
# usage: plot_metrics_test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# Debian's interpreter, where python3-matplotlib installs, before any other.
PYTHON=$([ -x /usr/bin/python3 ] && echo /usr/bin/python3 || echo python3)
TMP=$(mktemp -d /tmp/llm_plot_metrics.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

mkdir -p "$TMP/run_a" "$TMP/run_b" "$TMP/empty"
{
  echo '{"event": "start", "step": 0, "world_size": 1}'
  echo '{"step": 0, "val_loss": 6.2}'
  for s in 1 2 3 4; do echo "{\"step\": $s, \"loss\": 6.$((9 - s)), \"tokens_seen\": $((s * 256))}"; done
  echo '{"step": 4, "val_loss": 5.5}'
  echo '{"step": 5, "lo'
} > "$TMP/run_a/metrics.jsonl"
for s in 1 2 3; do echo "{\"step\": $s, \"loss\": 7.$s}"; done > "$TMP/run_b/metrics.jsonl"

"$PYTHON" tools/plot_metrics.py "$TMP/run_a" "$TMP/run_b/metrics.jsonl" --out "$TMP/out/loss.png"
[ "$(head -c 8 "$TMP/out/loss.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] ||
  { echo "FAIL: $TMP/out/loss.png is not a PNG" >&2; exit 1; }
"$PYTHON" tools/plot_metrics.py "$TMP/run_a" --x tokens --out "$TMP/tokens.png"
[ -s "$TMP/tokens.png" ] || { echo "FAIL: --x tokens wrote nothing" >&2; exit 1; }

if message=$("$PYTHON" tools/plot_metrics.py "$TMP/empty" --out "$TMP/x.png" 2>&1); then
  echo "FAIL: a directory without metrics.jsonl was plotted" >&2; exit 1
fi
case $message in *"$TMP/empty/metrics.jsonl: no such file"*) ;;
  *) echo "FAIL: unexpected message: $message" >&2; exit 1 ;; esac
echo "plot_metrics: ok"
