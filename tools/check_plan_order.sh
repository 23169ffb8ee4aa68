#!/usr/bin/env bash
# The CPU check of `./train plan`'s ranking: for configs/scale_cpu.toml
# at 1, 2 and 4 ranks on this machine's profile (cost_models/hardware/
# cpu_dev_vm.toml), the first K rows of the plan are run here under mpirun
# (`./train plan --measure`), and the recommendation must measure fastest of
# them or within the model's stated error of the fastest. Prints the
# predicted and the measured order. Not a ctest entry: it times real runs
# (K x 3 of them, about 5 s each on 2 idle cores), which a loaded machine
# disturbs; run it on a quiet one.
# usage: tools/check_plan_order.sh [K (default 6)] [repeats per row (default 1)]
set -euo pipefail
cd "$(dirname "$0")/.."
top=${1:-6}
repeats=${2:-1}
status=0
for world in 1 2 4; do
  echo "== scale_cpu at $world rank(s)"
  out=$(./train plan --config configs/scale_cpu.toml --world "$world" \
    --hardware cost_models/hardware/cpu_dev_vm.toml --top "$top" --measure --repeats "$repeats" 2>/dev/null)
  sed -n '/^recommended/,$p' <<<"$out"
  grep -q '^check passed' <<<"$out" || status=1
done
[ "$status" = 0 ] && echo "check_plan_order: passed" || echo "check_plan_order: FAILED"
exit "$status"
