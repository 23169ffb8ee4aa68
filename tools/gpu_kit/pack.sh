#!/usr/bin/env bash
# tools/gpu_kit/pack.sh [OUT_DIR]  (`make gpu-kit`)
#
# Packs every Debian package the build and the tests need (headers, CMake and
# pkg-config files, shared libraries, OpenMPI's mpirun with its runtime) into
# one git-ignored folder, gpu_kit/ by default, for a bare GPU machine that has
# CUDA, a compiler, CMake and ninja but none of our Debian packages and no
# network (tools/gpu_kit/run_on_gpu.sh unpacks and uses it there).
#
# Packages come from `apt-get download` (this machine's Debian 12 lists) and
# are unpacked with `dpkg-deb -x`; nothing is installed here.
#
# Invariant: OUT_DIR holds exactly kit.tar.xz and MANIFEST.txt, together under
# GPU_KIT_LIMIT_MIB (default 48 MiB, so the repository and the kit travel
# together in 64 MiB). The tarball unpacks to
#   root/      a relocatable copy of the packages' /usr and /etc, pruned of docs,
#              man pages, static libraries that have a shared twin, Fortran/Java/
#              OpenSHMEM parts and every OpenMPI/PMIx plugin whose libraries are
#              not in the kit (InfiniBand, UCX, libfabric, PSM, ...);
#   fallback/  libraries every normal Linux has (zlib, libudev, libgfortran,
#              libquadmath), used by kit_env.sh only where the host lacks them;
#   cudnn-frontend/  the cudnn-frontend headers (tools/fetch_cudnn_frontend.sh);
# and every shared object under root/ has each DT_NEEDED library inside root/,
# inside fallback/, or in the base set every glibc + g++ system has (the script
# fails otherwise).
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
OUT_DIR=${1:-$REPO/gpu_kit}
LIMIT_MIB=${GPU_KIT_LIMIT_MIB:-48}
ARCH_LIB=usr/lib/x86_64-linux-gnu

# The build and test dependencies (Makefile's DEB_PACKAGES) with the runtime
# packages they pull in. OpenMPI 4.1 on Debian 12 runs its own runtime (ORTE,
# no prrte) over an external PMIx, hwloc and libevent; libpmix links libmunge.
# The build runs protoc-c, which links the C++ protobuf and protoc libraries.
KIT_PACKAGES=(
  libspdlog-dev libspdlog1.10 libfmt-dev libfmt9
  libsentencepiece-dev libsentencepiece0
  libtomlplusplus-dev libtomlplusplus3 nlohmann-json3-dev
  libprotobuf-c-dev libprotobuf-c1 protobuf-c-compiler libprotoc32 libprotobuf32
  libopenmpi-dev libopenmpi3 openmpi-bin openmpi-common
  libpmix2 libhwloc15 libevent-core-2.1-7 libevent-pthreads-2.1-7 libmunge2
  libopenblas-openmp-dev libopenblas0-openmp
  libgtest-dev zlib1g-dev
  pkgconf pkgconf-bin libpkgconf3
)
# Present on nearly every system; kit_env.sh adds them only when missing, so
# the host's (newer) copies are never shadowed.
FALLBACK_PACKAGES=(zlib1g libudev1 libgfortran5 libquadmath0)
# Sonames any glibc system with g++ provides.
BASE_SONAMES="libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1 libutil.so.1
  libresolv.so.2 ld-linux-x86-64.so.2 libstdc++.so.6 libgcc_s.so.1 libgomp.so.1"

for tool in apt-get dpkg-deb readelf xz tar; do
  command -v "$tool" >/dev/null || { echo "pack.sh: needs $tool" >&2; exit 1; }
done

STAGE=$(mktemp -d /tmp/gpu_kit_stage.XXXXXX)
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/debs" "$STAGE/kit/root" "$STAGE/kit/fallback/lib" "$STAGE/fb"

echo "== downloading ${#KIT_PACKAGES[@]} + ${#FALLBACK_PACKAGES[@]} Debian packages"
download() {
  (cd "$STAGE/debs" && apt-get -q -o APT::Sandbox::User=root download "$@" 2>&1 | grep -v '^Get:' || true)
}
download "${KIT_PACKAGES[@]}" "${FALLBACK_PACKAGES[@]}"
if [ "$(ls "$STAGE/debs"/*.deb 2>/dev/null | wc -l)" -lt $(( ${#KIT_PACKAGES[@]} + ${#FALLBACK_PACKAGES[@]} )) ]; then
  echo "   some downloads failed; refreshing the package lists once"
  $([ "$(id -u)" = 0 ] || echo sudo) apt-get update -qq
  download "${KIT_PACKAGES[@]}" "${FALLBACK_PACKAGES[@]}"
fi
deb_of() { ls "$STAGE/debs/$1"_*.deb 2>/dev/null | head -1; }
for p in "${KIT_PACKAGES[@]}" "${FALLBACK_PACKAGES[@]}"; do
  [ -n "$(deb_of "$p")" ] || { echo "pack.sh: could not download $p" >&2; exit 1; }
done

ROOT=$STAGE/kit/root
for p in "${KIT_PACKAGES[@]}"; do dpkg-deb -x "$(deb_of "$p")" "$ROOT"; done
for p in "${FALLBACK_PACKAGES[@]}"; do dpkg-deb -x "$(deb_of "$p")" "$STAGE/fb"; done
# Fallback: the shared objects alone, flat.
find "$STAGE/fb" \( -type f -o -type l \) -name '*.so.*' -exec cp -a {} "$STAGE/kit/fallback/lib/" \;
UNPACKED=$(du -sm "$ROOT" | cut -f1)

echo "== pruning (unpacked: ${UNPACKED} MiB)"
# Documentation and anything not used to build, link or run.
rm -rf "$ROOT"/usr/share/{doc,doc-base,man,info,lintian,aclocal,java} "$ROOT"/usr/src \
       "$ROOT/$ARCH_LIB/fortran" "$ROOT/usr/share/openmpi/amca-param-sets"
# Static libraries that have a shared twin (GoogleTest ships only static ones).
find "$ROOT" -name '*.a' ! -name 'libgtest*.a' -delete
# OpenBLAS: we link libopenblas.so itself; its BLAS/LAPACK alternatives go.
rm -f "$ROOT/$ARCH_LIB"/openblas-openmp/{libblas,liblapack}.so*
rm -rf "$ROOT/$ARCH_LIB"/openblas-openmp/cmake
# OpenMPI: Fortran, Java, OpenSHMEM, tracing and tools we never run.
rm -f "$ROOT/$ARCH_LIB"/libmpi_{mpifh,usempi,java}*.so* "$ROOT/$ARCH_LIB"/libmpi_usempi*.so* \
      "$ROOT/$ARCH_LIB"/liboshmem.so* "$ROOT/$ARCH_LIB"/libompitrace.so* \
      "$ROOT/$ARCH_LIB"/openmpi/lib/{libmpi_java,libmpi_mpifh,libmpi_usempi*,liboshmem,libompitrace}.so \
      "$ROOT/$ARCH_LIB"/openmpi/lib/ompi_monitoring_prof.so \
      "$ROOT/$ARCH_LIB"/openmpi/lib/openmpi3/{mca_memheap,mca_scoll,mca_spml,mca_sshmem,mca_atomic}_*.so
find "$ROOT/usr/bin" \( -name 'osh*' -o -name 'shmem*' -o -name 'mpif*' -o -name 'mpijava*' \
     -o -name aggregate_profile -o -name profile2mat \) -delete
find "$ROOT/usr/share/openmpi" -name '*-wrapper-data.txt' ! -name 'mpic*' ! -name 'mpiCC*' \
     ! -name 'opalc*' -delete
rm -f "$ROOT"/$ARCH_LIB/openmpi/lib/pkgconfig/ompi-f*.pc "$ROOT"/$ARCH_LIB/pkgconfig/ompi-f*.pc
rm -rf "$ROOT"/$ARCH_LIB/openmpi/include/*.mod "$ROOT"/$ARCH_LIB/openmpi/lib/*.mod

# Debian's update-alternatives links (mpirun, mpicxx, ...) are made by maintainer
# scripts, not shipped: make them, relative.
for t in mpirun mpiexec mpicc mpicxx mpic++ mpiCC; do
  [ -e "$ROOT/usr/bin/$t.openmpi" ] && ln -sfn "$t.openmpi" "$ROOT/usr/bin/$t"
done
# Absolute symlinks (zlib1g-dev's libz.so -> /lib/...) would point at the host:
# re-aim those whose target is in the kit, drop the others (libz.so: kit_env.sh
# links the host's zlib explicitly).
while IFS= read -r link; do
  target=$(readlink "$link")
  if [ -e "$ROOT$target" ]; then
    ln -sfn "$(realpath --relative-to="$(dirname "$link")" "$ROOT$target")" "$link"
  else
    rm -f "$link"
  fi
done < <(find "$ROOT" -type l -lname '/*')

# pkg-config files name /usr: make them relative to their own directory, so
# the kit works wherever it is unpacked (pkgconf and pkg-config both define
# ${pcfiledir}).
while IFS= read -r pc; do
  up=$(realpath --relative-to="$(dirname "$pc")" "$ROOT")
  sed -i "s#/usr\\b#\${pcfiledir}/$up/usr#g" "$pc"
done < <(find "$ROOT" -name '*.pc')

# Every ELF's DT_NEEDED must resolve inside the kit, the fallback or the base
# set. A plugin (dlopened MCA/PMIx component, or the libmca_common_* helper of
# some) that cannot is removed: OpenMPI and PMIx simply do not offer that
# transport. Anything else fails the pack.
echo "== checking shared-library closure"
kit_sonames() {
  { find "$ROOT" "$STAGE/kit/fallback" \( -type f -o -type l \) -name '*.so*' -printf '%f\n'
    echo "$BASE_SONAMES" | tr ' ' '\n'; } | sed '/^$/d' | sort -u
}
is_elf() { [ "$(head -c4 "$1" 2>/dev/null | od -An -c | tr -d ' ')" = '177ELF' ]; }
while :; do
  have=$(kit_sonames)
  removed=0
  while IFS= read -r f; do
    is_elf "$f" || continue
    missing=$(readelf -d "$f" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' |
              grep -vxF -f <(echo "$have") || true)
    [ -z "$missing" ] && continue
    case "$f" in
      */openmpi/lib/openmpi3/*|*/pmix2/lib/pmix/*|*/libmca_common_*)
        echo "   drop plugin ${f#$ROOT/} (needs $(echo $missing))"; rm -f "$f"; removed=1 ;;
      *) echo "pack.sh: ${f#$ROOT/} needs $(echo $missing), not in the kit" >&2; exit 1 ;;
    esac
  done < <(find "$ROOT" -type f \( -name '*.so*' -o -path '*/bin/*' \))
  [ "$removed" = 0 ] && break
done
# Shared libraries whose (versioned) file went with a dropped part.
find "$ROOT" -xtype l -delete

for must in usr/bin/mpirun usr/bin/mpicxx usr/bin/orterun usr/bin/pkg-config \
            usr/include/spdlog/spdlog.h usr/include/fmt/format.h usr/include/toml++/toml.h \
            usr/include/nlohmann/json.hpp usr/include/gtest/gtest.h usr/include/zlib.h \
            usr/include/sentencepiece_processor.h usr/include/x86_64-linux-gnu/openblas-openmp/cblas.h \
            usr/bin/protoc-c usr/include/protobuf-c/protobuf-c.h $ARCH_LIB/pkgconfig/libprotobuf-c.pc \
            $ARCH_LIB/openblas-openmp/libopenblas.so $ARCH_LIB/libgtest.a \
            $ARCH_LIB/openmpi/include/mpi.h $ARCH_LIB/cmake/GTest/GTestConfig.cmake \
            $ARCH_LIB/pkgconfig/sentencepiece.pc; do
  [ -e "$ROOT/$must" ] || { echo "pack.sh: kit lacks $must" >&2; exit 1; }
done

# The header-only cudnn-frontend (PyPI, not Debian) for the cuDNN attention.
echo "== cudnn-frontend headers"
bash "$REPO/tools/fetch_cudnn_frontend.sh"
cp -a "$REPO/third_party/cudnn-frontend" "$STAGE/kit/cudnn-frontend"

# Manifest: what is inside, for the report and for humans.
{
  echo "# gpu_kit: Debian packages unpacked for a bare GPU machine (tools/gpu_kit/pack.sh)"
  echo "# packed $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(. /etc/os-release && echo "$PRETTY_NAME")"
  echo "# root/ (on the search paths):"
  for p in "${KIT_PACKAGES[@]}"; do echo "$p $(dpkg-deb -f "$(deb_of "$p")" Version)"; done
  echo "# fallback/ (used only where the host lacks the library):"
  for p in "${FALLBACK_PACKAGES[@]}"; do echo "$p $(dpkg-deb -f "$(deb_of "$p")" Version)"; done
  echo "# cudnn-frontend/ (PyPI nvidia-cudnn-frontend, headers only): $(cat "$STAGE/kit/cudnn-frontend/VERSION")"
  echo "# OpenMPI plugins kept:"
  ls "$ROOT/$ARCH_LIB/openmpi/lib/openmpi3" | sed 's/^/#   /'
} > "$STAGE/MANIFEST.txt"
cp "$STAGE/MANIFEST.txt" "$STAGE/kit/MANIFEST.txt"

PRUNED=$(du -sm "$STAGE/kit" | cut -f1)
echo "== compressing (pruned tree: ${PRUNED} MiB)"
rm -rf "$OUT_DIR"
mkdir -p "$OUT_DIR"
tar -C "$STAGE/kit" -cf - root fallback cudnn-frontend MANIFEST.txt | xz -6 -T2 > "$OUT_DIR/kit.tar.xz"
cp "$STAGE/MANIFEST.txt" "$OUT_DIR/MANIFEST.txt"

BYTES=$(du -sb "$OUT_DIR" | cut -f1)
MIB=$(awk -v b="$BYTES" 'BEGIN { printf "%.1f", b / 1048576 }')
echo "== $OUT_DIR: ${MIB} MiB (kit.tar.xz; unpacks to ${PRUNED} MiB; packages unpacked were ${UNPACKED} MiB)"
if [ "$BYTES" -gt $(( LIMIT_MIB * 1048576 )) ]; then
  echo "pack.sh: $OUT_DIR is over GPU_KIT_LIMIT_MIB=$LIMIT_MIB MiB" >&2
  exit 1
fi
