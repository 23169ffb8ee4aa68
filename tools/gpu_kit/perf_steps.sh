#!/usr/bin/env bash
# The device run's performance steps of issue 56, one per argument, for
# tools/gpu_kit/run_on_gpu.sh (which times each and writes the report):
#   attention      causal attention alone, ours (`./train bench --attention`:
#                  cuDNN with both backward algorithms, then the flash kernel)
#                  and PyTorch's SDPA (tools/gpu_kit/time_sdpa.py), on the
#                  Llama 3 8B shape and on gpu_1b's, in the same run
#   profile_8b     the 8B shape's step op by op (`./train bench --profile`, 2
#                  blocks) in bf16, fp8 and fp8 with delayed scaling
#                  (training.fp8_scaling), with nvidia-smi sampling the SM
#                  clock, power, temperature and throttle reasons every 200 ms
#   fp8_loss_once  FP8 against bf16 over a corpus seen once: the text files
#                  installed on the machine, each content once, up to
#                  ONCE_TOKENS tokens (50M); a tokenizer of ONCE_VOCAB pieces
#                  trained on a sample of them; ONCE_CONFIG (gpu_124m) for one
#                  pass in bf16, then in fp8; final losses within 0.5%, no
#                  spike (compare_losses.py)
#   fp8_fast_accum FP8 with training.fp8_fast_accum (the forward GEMMs' fast
#                  accumulation) against FP8 without it, and against bf16 when
#                  fp8_loss_once ran before it, whose corpus and runs it takes
#                  (else it builds them); the same checks
#   fp8_delayed    FP8 with training.fp8_scaling = delayed against FP8's
#                  current scaling, and against bf16 when fp8_loss_once ran
#                  before it; its corpus and runs as fp8_fast_accum's
# Environment: TRAIN (./train), OUT_DIR (where logs and metrics go, /tmp),
# TORCH_PYTHON (a Python that imports torch; else the first that does),
# ONCE_TOKENS, ONCE_VOCAB, ONCE_CONFIG, ONCE_ROOTS (/usr /opt), ONCE_OVERRIDES
# (extra ./train overrides, e.g. for a rehearsal on the CPU), ONCE_WORK.
# Each step exits non-zero when any part of it failed, after running the rest.
set -uo pipefail
cd "$(dirname "$0")/../.."
TRAIN=${TRAIN:-./train}
OUT_DIR=${OUT_DIR:-/tmp}
mkdir -p "$OUT_DIR"
# The 8B shape without its tokenizer file: the benchmarks draw their tokens.
SHAPE_8B=(--data.tokenizer= --training.batch_size=1)

torch_python() {
  local py
  for py in ${TORCH_PYTHON:-} /opt/torch/.venv/bin/python python3; do
    "$py" -c 'import torch' 2>/dev/null && { echo "$py"; return 0; }
  done
  return 1
}

step_attention() {
  local rc=0 py config kernel
  py=$(torch_python) || py=
  for config in llama8b gpu_1b; do
    local extra=()
    [ "$config" = llama8b ] && extra=("${SHAPE_8B[@]}")
    for kernel in cudnn flash; do
      echo "== configs/$config.toml, training.attention = $kernel"
      "$TRAIN" bench --attention --config "configs/$config.toml" \
        --training.attention=$kernel "${extra[@]}" || rc=1
    done
    echo "== configs/$config.toml, PyTorch"
    if [ -z "$py" ]; then
      echo "no Python here imports torch (set TORCH_PYTHON)"; rc=1; continue
    fi
    local sets=()
    for o in "${extra[@]}"; do sets+=(--set "${o#--}"); done
    "$py" tools/gpu_kit/time_sdpa.py --config "configs/$config.toml" --train-binary "$TRAIN" \
      "${sets[@]}" || rc=1
  done
  return $rc
}

step_profile_8b() {
  local rc=0 log=$OUT_DIR/clocks_8b.csv smi precision
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
    --format=csv,noheader,nounits -lms 200 > "$log" 2>&1 &
  smi=$!
  for precision in bf16 fp8 fp8_delayed; do
    echo "== 8B shape, 2 blocks, $precision"
    local scaling=()
    [ "$precision" = fp8_delayed ] && precision=fp8 scaling=(--training.fp8_scaling=delayed)
    "$TRAIN" bench --config configs/llama8b.toml --model.n_layers=2 "${SHAPE_8B[@]}" \
      --training.sample_tokens=0 --training.precision=$precision "${scaling[@]}" \
      --bench-steps 3 --profile || rc=1
  done
  kill $smi 2>/dev/null; wait $smi 2>/dev/null
  echo "== clocks while it ran: $(wc -l < "$log") samples in $log"
  # The samples' SM clock and power: min, median, max; the hottest; each
  # throttle-reason mask and how often it was seen.
  sort -t, -k2,2n "$log" | awk -F', *' '$2 + 0 > 0 { n++; sm[n] = $2; t = $5 > t ? $5 : t; r[$6]++ }
    END { if (!n) { print "no samples (nvidia-smi failed?)"; exit 1 }
      printf "SM MHz: min %d, median %d, max %d; hottest %d C\n", sm[1], sm[int((n + 1) / 2)], sm[n], t
      for (k in r) printf "throttle reasons %s: %d samples\n", k, r[k] }' || rc=1
  sort -t, -k4,4n "$log" | awk -F', *' '$4 + 0 > 0 { n++; p[n] = $4 }
    END { if (n) printf "power W: min %.0f, median %.0f, max %.0f\n", p[1], p[int((n + 1) / 2)], p[n] }'
  return $rc
}

# The corpus of the FP8 loss steps in $ONCE_WORK: the installed text files,
# each content once, up to ONCE_TOKENS tokens, its tokenizer and shards, and
# in $ONCE_WORK/steps the step count of one pass over it. Built anew, unless
# `reuse` is given and an earlier step of this run left one.
once_corpus() {
  local tokens=${ONCE_TOKENS:-50000000} vocab=${ONCE_VOCAB:-16384}
  local config=${ONCE_CONFIG:-configs/gpu_124m.toml} work=${ONCE_WORK:-/tmp/once}
  if [ "${1:-}" = reuse ] && [ -s "$work/steps" ]; then
    echo "the corpus of an earlier step: $(cat "$work/steps") steps a pass"
    return 0
  fi
  local -a overrides
  read -r -a overrides <<< "${ONCE_OVERRIDES:-}"
  rm -rf "$work" && mkdir -p "$work/text" "$work/sample" || return 1
  # Whole files, each content once, in a fixed order, until about 4.5 bytes
  # per token wanted are there.
  find ${ONCE_ROOTS:-/usr /opt} -xdev -type f \( -name '*.py' -o -name '*.h' -o -name '*.c' \
      -o -name '*.cpp' -o -name '*.cu' -o -name '*.md' -o -name '*.rst' -o -name '*.txt' \) \
      -size +1k -size -2M -printf '%s %p\n' 2>/dev/null | sort -k2 |
    while read -r size path; do
      echo "$(md5sum < "$path" | cut -c1-32) $size $path"
    done | awk -v want=$(( tokens * 9 / 2 )) '!seen[$1]++ { if (got >= want) exit; print $3; got += $2 }' \
      > "$work/files"
  local i=0 f
  while IFS= read -r f; do i=$(( i + 1 )); cp "$f" "$work/text/$i.txt"; done < "$work/files"
  echo "corpus: $i files, $(du -sb "$work/text" | cut -f1) bytes"
  [ "$i" -gt 0 ] || { echo "no text files found under ${ONCE_ROOTS:-/usr /opt}"; return 1; }
  # The tokenizer from a sample of about 8 MB (SentencePiece trains on one thread).
  local sample_every=$(( $(du -sb "$work/text" | cut -f1) / 8000000 + 1 ))
  ls "$work/text" | sort -n | awk -v k=$sample_every '(NR - 1) % k == 0' |
    while read -r f; do cp "$work/text/$f" "$work/sample/"; done
  "$TRAIN" prepare --input "$work/sample" --out "$work/tokenizer" --vocab-size "$vocab" --quiet &&
    "$TRAIN" prepare --input "$work/text" --out "$work/data" \
      --tokenizer "$work/tokenizer/tokenizer.model" --val-fraction 0.01 --quiet || return 1
  # One pass: the step count that reads each training token once.
  local shard_bytes per_step steps
  shard_bytes=$(cat "$work"/data/train_*.bin | wc -c)
  per_step=$("$TRAIN" config --config "$config" "${overrides[@]}" --counts |
    python3 -c 'import json, sys; c = json.load(sys.stdin); print(c["batch_size"] * c["seq_len"])')
  steps=$(( (shard_bytes / 2) / per_step ))
  echo "about $(( shard_bytes / 2 )) training tokens: $steps steps of $per_step, one pass"
  [ "$steps" -ge 20 ] || { echo "too few steps for a loss comparison"; return 1; }
  echo "$steps" > "$work/steps"
}

# One pass of ONCE_CONFIG over the corpus with the overrides given, named
# `name`: its log in $ONCE_WORK, its metrics in $OUT_DIR/metrics_once_<name>.jsonl.
once_run() {
  local name=$1 && shift
  local vocab=${ONCE_VOCAB:-16384} config=${ONCE_CONFIG:-configs/gpu_124m.toml}
  local work=${ONCE_WORK:-/tmp/once} steps
  steps=$(cat "$work/steps") || return 1
  local -a overrides
  read -r -a overrides <<< "${ONCE_OVERRIDES:-}"
  "$TRAIN" --config "$config" "$@" --training.steps=$steps \
    --training.warmup_steps=$(( steps / 20 )) --training.eval_interval=$(( steps / 4 )) \
    --training.sample_tokens=0 --model.vocab_size="$vocab" \
    --data.train="$work/data/train_*.bin" --data.val="$work/data/val_*.bin" \
    --data.tokenizer="$work/tokenizer/tokenizer.model" --checkpoint.save_final=false \
    --checkpoint.dir="$work/run_$name" --checkpoint.resume=none "${overrides[@]}" \
    > "$work/run_$name.log" 2>&1 || { tail -20 "$work/run_$name.log"; return 1; }
  grep -iE 'val' "$work/run_$name.log" | tail -2
  cp "$work/run_$name/metrics.jsonl" "$OUT_DIR/metrics_once_$name.jsonl"
}

step_fp8_loss_once() {
  once_corpus && once_run bf16 --training.precision=bf16 &&
    once_run fp8 --training.precision=fp8 || return 1
  python3 tools/gpu_kit/compare_losses.py "$OUT_DIR/metrics_once_bf16.jsonl" \
    "$OUT_DIR/metrics_once_fp8.jsonl" --within 0.005
}

# One more fp8 pass named `name` with the overrides given, against FP8
# without them (and against bf16, when fp8_loss_once ran before it): the
# corpus and the fp8 run of fp8_loss_once when it left them, else its own.
fp8_variant_pass() {
  local name=$1 && shift
  once_corpus reuse || return 1
  if [ ! -s "$OUT_DIR/metrics_once_fp8.jsonl" ] || [ ! -d "${ONCE_WORK:-/tmp/once}/run_fp8" ]; then
    once_run fp8 --training.precision=fp8 || return 1
  fi
  once_run "$name" --training.precision=fp8 "$@" || return 1
  local status=0
  python3 tools/gpu_kit/compare_losses.py "$OUT_DIR/metrics_once_fp8.jsonl" \
    "$OUT_DIR/metrics_once_$name.jsonl" --within 0.005 || status=1
  if [ -s "$OUT_DIR/metrics_once_bf16.jsonl" ]; then
    python3 tools/gpu_kit/compare_losses.py "$OUT_DIR/metrics_once_bf16.jsonl" \
      "$OUT_DIR/metrics_once_$name.jsonl" --within 0.005 || status=1
  fi
  return $status
}

# FP8 with the forward GEMMs' fast accumulation.
step_fp8_fast_accum() { fp8_variant_pass fp8_fast_accum --training.fp8_fast_accum=true; }

# FP8 with delayed scaling.
step_fp8_delayed() { fp8_variant_pass fp8_delayed --training.fp8_scaling=delayed; }

[ $# -gt 0 ] || { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2; }
status=0
for step in "$@"; do
  case $step in
    attention | profile_8b | fp8_loss_once | fp8_fast_accum | fp8_delayed) "step_$step" || status=1 ;;
    *) echo "perf_steps.sh: unknown step $step (attention, profile_8b, fp8_loss_once," \
         "fp8_fast_accum, fp8_delayed)" >&2; exit 2 ;;
  esac
done
exit $status
