#!/usr/bin/env bash
# Runs every fuzz target of BUILD_DIR (test/fuzz, `make fuzz`) for SECONDS
# each, starting from its committed seeds (test/fuzz/corpus/<target>, which
# stay as they are: new inputs go to a scratch copy), with -timeout=20 (an
# input that takes over 20 s is a finding) and ASan's leak check. The limit
# was 1 s until a fresh clone's `make test` beside a build (2026-11-27, 2
# cores) reported 7 timeouts: rerun alone their inputs took 0.06 to 0.33 s,
# so the load, not the input, had passed the second; 20 s is 60 times the
# slowest, and still a hang's finding. Targets
# run side by side, FUZZ_JOBS at a time (default: the number of cores), each
# on one core. Prints per target the executions and the edges covered; a
# crash, a hang or a leak stops with the reproducer's path and exit status 1.
# usage: run_fuzzers.sh BUILD_DIR SECONDS [TARGET...]
set -u
build=$1
seconds=$2
shift 2
repo=$(cd "$(dirname "$0")/.." && pwd)
jobs=${FUZZ_JOBS:-$(nproc)}
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for binary in "$build"/test/fuzz/fuzz_*; do targets+=("$(basename "$binary")"); done
fi
work=$(mktemp -d /tmp/fuzz_runs.XXXXXX)
trap 'rm -rf "$work"' EXIT

# One target's run; its exit status lands in $work/<name>.rc.
fuzz_one() {
  local target=$1 name=${1#fuzz_}
  mkdir -p "$work/$name" "$work/$name.artifacts"
  # Run from the repository root: fuzz_tokenizer_encode reads the fixtures.
  (cd "$repo" && "$build/test/fuzz/$target" -max_total_time="$seconds" -timeout=20 \
    -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$work/$name.artifacts/" \
    "$work/$name" "$repo/test/fuzz/corpus/$name") > "$work/$name.log" 2>&1
  echo $? > "$work/$name.rc"
}

for target in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
  fuzz_one "$target" &
done
wait

status=0
printf '%-24s %12s %8s %8s  %s\n' target executions edges features result
for target in "${targets[@]}"; do
  name=${target#fuzz_}
  log=$work/$name.log
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*')
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*')
  result=ok
  if [ "$(cat "$work/$name.rc")" -ne 0 ]; then
    result="FOUND: $(ls "$work/$name.artifacts" | head -1)"
    status=1
    mkdir -p "$repo/fuzz-findings"
    cp -r "$work/$name.artifacts/." "$repo/fuzz-findings/" 2>/dev/null
    grep -m3 -E 'ERROR|SUMMARY|deadly signal|timeout' "$log" | sed 's/^/    /'
  fi
  printf '%-24s %12s %8s %8s  %s\n' "$target" "${runs:-?}" "${cov:-?}" "${ft:-?}" "$result"
done
[ $status -eq 0 ] || echo "reproducers copied to fuzz-findings/ (rerun one: $build/test/fuzz/fuzz_X FILE)"
exit $status
