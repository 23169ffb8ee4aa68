# Sourced by the supervisor's memory tests (supervise_test.sh case memory,
# supervise_elastic_test.sh case memory): a parallel.memory_per_rank that
# fits world size $2 but not $1, for the trainer flags in ${flags[@]}.
# Needs: $train, $mpiexec, $work, fail. Call it as limit=$(...) || fail "$limit":
# its failure is the subshell's, and its message the output.

# What one rank needs at world size $1: the supervisor's refusal of a
# hostfile of that many slots at a limit of 1 B names it (nothing launched).
memory_needed_at() {
  printf 'localhost slots=%s\n' "$1" > "$work/slots_$1"
  "$train" supervise -- "$mpiexec" --hostfile "$work/slots_$1" -np "$1" "$train" "${flags[@]}" \
    --parallel.memory_per_rank=1B 2>&1 | grep -o 'needs [0-9.]* [KMG]*i*B' | head -1 | cut -d' ' -f2-
}

# Halfway between the two worlds' needs, in bytes ("4718592B"); the
# figures have 3 significant digits, far finer than the two worlds differ.
memory_between_worlds() {
  local more less
  more=$(memory_needed_at "$1") less=$(memory_needed_at "$2")
  [ -n "$more" ] && [ -n "$less" ] || fail "no figure of the memory a rank needs at world $1 or $2"
  python3 - "$more" "$less" <<'PY' || fail "world $2 needs no less memory per rank than world $1 ($more, $less)"
import sys
units = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
more, less = [float(v.split()[0]) * units[v.split()[1]] for v in sys.argv[1:3]]
assert less < 0.9 * more, (more, less)
print(f"{int((more + less) / 2)}B")
PY
}
