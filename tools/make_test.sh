#!/usr/bin/env bash
# `make test`'s steps: the build with the CUDA emulation, ctest, then each
# fuzz target for a smoke test. The clang fuzz build (a build folder of its
# own) does not wait for ctest to end: it runs beside it at the scheduler's
# idle priority (SCHED_IDLE, or nice 19 where that is refused), in the CPU
# ctest leaves unused (a quarter on 2 cores: the tests that run alone, the
# ones that wait on a timeout), and no test's timing shares a core with it at
# equal weight. Not beside the main build, which leaves little unused: there
# it slowed that build by a fifth (2026-11-28). Its output goes to a log,
# shown when it fails. Each step prints the seconds it took.
# usage (the Makefile's `test`): MAKE=make BUILD=build FUZZ_BUILD=build-fuzz
#   JOBS=2 FUZZ_SECONDS=20 CMAKE_FLAGS=... bash tools/make_test.sh
set -uo pipefail
cd "$(dirname "$0")/.."
: "${MAKE:=make}" "${BUILD:=build}" "${FUZZ_BUILD:=build-fuzz}" "${JOBS:=$(nproc)}"
: "${FUZZ_SECONDS:=20}" "${CMAKE_FLAGS:=}"
# "make test: <step> took N s" for the step that began at $step_start.
step_start=$SECONDS
took() {
  echo "make test: $1 took $((SECONDS - step_start)) s"
  step_start=$SECONDS
}

"$MAKE" --no-print-directory build BUILD="$BUILD" JOBS="$JOBS" \
  CMAKE_FLAGS="$CMAKE_FLAGS -DLLM_CUDA_EMULATION=ON" || exit 1
took "the build"

mkdir -p "$FUZZ_BUILD"
fuzz_log=$FUZZ_BUILD/make_test.log
idle=(chrt --idle 0)
"${idle[@]}" true 2>/dev/null || idle=(nice -n 19)
# Started under job control (set -m) for a process group of its own, so
# that stopping it stops its compilers too. Not setsid: a new session is a
# new scheduler autogroup, which CFS gives an equal share whatever the
# priority inside it (measured: the build beside took 140 s longer).
set -m
"${idle[@]}" "$MAKE" --no-print-directory fuzz-build FUZZ_BUILD="$FUZZ_BUILD" JOBS="$JOBS" \
  >"$fuzz_log" 2>&1 &
fuzz_build=$!
set +m
trap 'kill -- -"$fuzz_build" 2>/dev/null' EXIT
trap 'exit 130' INT TERM
echo "make test: the fuzz build runs beside ctest at idle priority (log: $fuzz_log)"
ctest --test-dir "$BUILD" --output-on-failure -j "$JOBS" || exit 1
took ctest

echo "make test: waiting for the fuzz build"
if ! wait "$fuzz_build"; then
  tail -n 30 "$fuzz_log"
  echo "make test: the fuzz build failed (its whole log: $fuzz_log)"
  exit 1
fi
trap - EXIT
took "waiting for the fuzz build"
bash tools/run_fuzzers.sh "$FUZZ_BUILD" "$FUZZ_SECONDS" || exit 1
took "the fuzz smoke test"
echo "make test: passed in $SECONDS s"
