#!/usr/bin/env bash
# tools/gpu_kit/rehearse.sh [--shell | -- COMMAND...]  (`make gpu-kit-rehearse`)
#
# Rehearses run_on_gpu.sh here, against ONLY the kit: as root, in a private
# network namespace with only loopback (no network, as on the GPU machine) and
# a private mount namespace (unshare --mount --net) where every file of the
# Debian packages the kit replaces (and their -dev/plugin relatives, mpirun's
# alternatives links, ssh/rsh) is gone. Each directory that holds such files (/usr/include,
# /usr/lib/x86_64-linux-gnu, /usr/bin, ...) is covered by a hard-link copy of
# itself with those files deleted, so the build and the tests see the host as
# a machine that never had the packages. CUDA, the compiler and Python stay.
#
# What runs is a copy of exactly what travels to the GPU machine (tracked
# files, untracked files git does not ignore, and gpu_kit/) in
# build-gpukit/tree, built in build-gpukit/build-gpu with -j2 by a pip-installed
# CMake and ninja (as on the GPU machine; the host's when pip cannot), and the
# report lands in build-gpukit/out/gpu_report.txt. All GPU steps run (they
# skip or fail for want of a device), plus CPU tests that prove the kit's
# libraries and mpirun work. Exit 0 when every step passed but nvidia_smi and
# the benchmarks (which need a device).
#
# Invariant: nothing outside build-gpukit/ (or GPU_KIT_REHEARSE_DIR) is
# written, and the mounts vanish with the namespace when the command ends.
#   --shell        an interactive shell in the namespace instead (debugging)
#   -- COMMAND...  that command in the namespace instead
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
RDIR=${GPU_KIT_REHEARSE_DIR:-$REPO/build-gpukit}
# Roots covered by a pruned copy; hidden files outside them do not matter here.
FARM_ROOTS=(/usr/include /usr/lib/x86_64-linux-gnu /usr/bin /usr/share/pkgconfig
            /usr/share/cmake /usr/share/openmpi /etc/openmpi /usr/src/googletest /usr/lib/cmake)
# The kit's packages and their relatives that may be installed here.
HIDE_PACKAGES=(
  libspdlog-dev libspdlog1.10 libfmt-dev libfmt9 libsentencepiece-dev libsentencepiece0
  libtomlplusplus-dev libtomlplusplus3 nlohmann-json3-dev
  libopenmpi-dev libopenmpi3 openmpi-bin openmpi-common libcoarrays-openmpi-dev libcaf-openmpi-3
  libpmix2 libpmix-dev libhwloc15 libhwloc-dev libhwloc-plugins
  libevent-core-2.1-7 libevent-pthreads-2.1-7 libevent-2.1-7 libevent-extra-2.1-7
  libevent-openssl-2.1-7 libevent-dev libmunge2
  libopenblas-openmp-dev libopenblas0-openmp libopenblas-dev libopenblas0
  libopenblas-pthread-dev libopenblas0-pthread libopenblas64-0-openmp libopenblas64-openmp-dev
  libgtest-dev libgmock-dev googletest zlib1g-dev pkgconf pkgconf-bin libpkgconf3 pkg-config
  libprotobuf-c-dev libprotobuf-c1 protobuf-c-compiler libprotoc32 libprotobuf32
  libprotobuf-dev libprotoc-dev protobuf-compiler libprotobuf-lite32
)
# Not owned by a package (update-alternatives links) or not in the kit on purpose.
HIDE_EXTRA=(/usr/bin/mpirun /usr/bin/mpiexec /usr/bin/mpicc /usr/bin/mpicxx /usr/bin/mpic++
            /usr/bin/mpiCC /usr/bin/mpif77 /usr/bin/mpif90 /usr/bin/mpifort
            /usr/bin/ssh /usr/bin/rsh /usr/bin/slogin /usr/bin/scp
            /usr/include/x86_64-linux-gnu/mpi /usr/include/x86_64-linux-gnu/openmpi
            /usr/lib/x86_64-linux-gnu/libmpi.so /usr/lib/x86_64-linux-gnu/libmpi++.so
            /usr/lib/x86_64-linux-gnu/libopenblas.so /usr/lib/x86_64-linux-gnu/libopenblas.so.0)

if [ "${1:-}" = --inner ]; then   # in the private namespace (see the end)
  shift
  while read -r root; do mount --bind "$RDIR/farm$root" "$root"; done < "$RDIR/farm/.roots"
  ip link set lo up 2>/dev/null || echo "rehearse.sh: could not bring up lo (no ip?)" >&2
  exec "$@"
fi

[ "$(id -u)" = 0 ] || { echo "rehearse.sh: needs root (unshare, mount)" >&2; exit 1; }
T0=$(date +%s)
mkdir -p "$RDIR"
[ -f "$REPO/gpu_kit/kit.tar.xz" ] || bash "$REPO/tools/gpu_kit/pack.sh"

# 1. What travels: tracked + untracked-not-ignored files + gpu_kit/.
echo "== copying what travels into $RDIR/tree"
rm -rf "$RDIR/tree" && mkdir -p "$RDIR/tree"
(cd "$REPO" && git ls-files -z -co --exclude-standard |
  while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
  xargs -0 cp -a --parents -t "$RDIR/tree")
rm -rf "$RDIR/tree/gpu_kit" && cp -a "$REPO/gpu_kit" "$RDIR/tree/gpu_kit"
TRAVEL=$(du -sb "$RDIR/tree" | cut -f1)
echo "   travels: $(awk -v b="$TRAVEL" 'BEGIN { printf "%.1f", b / 1048576 }') MiB (the kit's budget assumes 64 MiB)"
[ "$TRAVEL" -le $(( 64 * 1048576 )) ] || { echo "rehearse.sh: over 64 MiB" >&2; exit 1; }

# 2. The pruned copies of the package directories (hard links: instant, no space).
echo "== hiding ${#HIDE_PACKAGES[@]} packages' files"
rm -rf "$RDIR/farm" && mkdir -p "$RDIR/farm"
: > "$RDIR/farm/.roots"
for root in "${FARM_ROOTS[@]}"; do
  [ -d "$root" ] || continue
  mkdir -p "$RDIR/farm$(dirname "$root")"
  cp -al "$root" "$RDIR/farm$root"
  echo "$root" >> "$RDIR/farm/.roots"
done
hidden=0
while IFS= read -r f; do
  for root in "${FARM_ROOTS[@]}"; do
    case $f in "$root"/*)
      if [ -L "$RDIR/farm$f" ] || [ -f "$RDIR/farm$f" ]; then rm -f "$RDIR/farm$f"; hidden=$((hidden + 1)); fi ;;
    esac
  done
done < <({ dpkg -L "${HIDE_PACKAGES[@]}" 2>/dev/null || true; printf '%s\n' "${HIDE_EXTRA[@]}"; } | sort -u)
echo "   $hidden files hidden"

# 3. CMake and ninja from pip, like the GPU machine's Python.
if [ ! -x "$RDIR/venv/bin/cmake" ]; then
  python3 -m venv "$RDIR/venv" && "$RDIR/venv/bin/pip" install -q cmake ninja ||
    echo "   (no pip cmake/ninja: the host's are used)"
fi
[ -x "$RDIR/venv/bin/cmake" ] && export PATH="$RDIR/venv/bin:$PATH"

# 4. Run, in the namespace.
CUSTOM=1
if [ "${1:-}" = --shell ]; then
  set -- bash -i
elif [ "${1:-}" = -- ]; then
  shift
else
  CUSTOM=0
  set -- bash -c "cd '$RDIR/tree' && OUT='$RDIR/out' bash tools/gpu_kit/run_on_gpu.sh \
    --unpack-to '$RDIR/kit' --build-dir '$RDIR/build-gpu' --jobs 2 --deadline 0 \
    --steps all,cpu_tests,mpi_cpu,mpi_script"
fi
rc=0
rm -f "$RDIR/out/gpu_report.txt"
unshare --mount --propagation private --net -- bash "$0" --inner "$@" || rc=$?
rm -rf "$RDIR/farm"
if [ "$CUSTOM" = 0 ]; then
  # Without a GPU only nvidia-smi and the benchmarks may fail; every other
  # step must pass (the GPU tests pass by skipping).
  rc=0
  for step in kit env mpi_smoke configure build linkage ctest_gpu gpu_modes cpu_tests mpi_cpu mpi_script; do
    grep -qE "^# PASS +$step " "$RDIR/out/gpu_report.txt" 2>/dev/null || { echo "rehearsal: step $step did not pass"; rc=1; }
  done
fi
echo "== rehearsal: $(( $(date +%s) - T0 ))s, $([ $rc = 0 ] && echo OK || echo FAILED) (report: $RDIR/out/gpu_report.txt)"
exit $rc
