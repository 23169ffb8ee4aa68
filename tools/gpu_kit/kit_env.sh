# tools/gpu_kit/kit_env.sh: sourced (not run) by run_on_gpu.sh and rehearse.sh.
#
# Functions that unpack gpu_kit/kit.tar.xz (made by pack.sh) and point a shell
# at it, plus the CUDA detection of a bare GPU machine:
#   gpu_kit_unpack TARBALL DEST  unpack once (a checksum stamp skips repeats)
#   gpu_kit_activate DEST        export PATH, LD_LIBRARY_PATH, PKG_CONFIG_*,
#                                OPAL_*/PMIX_*/OMPI_* for the relocated OpenMPI;
#                                fill GPU_KIT_CMAKE_ARGS with the kit's paths
#   gpu_kit_find_cuda DEST       find nvcc, cuBLAS(Lt), NCCL, cuDNN, NVRTC (CUDA toolkit or
#                                Python nvidia-* wheels); append to
#                                GPU_KIT_CMAKE_ARGS, extend LD_LIBRARY_PATH;
#                                describe it in GPU_KIT_CUDA_REPORT
# Invariant: after gpu_kit_activate the kit comes first on every search path
# (binaries, shared libraries, pkg-config, CMake packages, MPI wrapper), and
# the host's copy of a library is never shadowed by the kit's fallback/ copy.
# Nothing here writes outside DEST.

GPU_KIT_ARCH_LIB=usr/lib/x86_64-linux-gnu

gpu_kit_unpack() {
  local tarball=$1 dest=$2 sum
  [ -f "$tarball" ] || { echo "gpu_kit: no kit at $tarball (make gpu-kit, and carry gpu_kit)" >&2; return 1; }
  sum=$(md5sum < "$tarball" | cut -d' ' -f1)
  if [ -f "$dest/.unpacked" ] && [ "$(cat "$dest/.unpacked")" = "$sum" ]; then return 0; fi
  rm -rf "$dest" && mkdir -p "$dest"
  if command -v xz >/dev/null; then
    tar -C "$dest" -xJf "$tarball"
  else  # no xz binary: Python's lzma does it
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$tarball" "$dest"
  fi
  echo "$sum" > "$dest/.unpacked"
}

# Is a library with this soname already known to the host's dynamic loader?
gpu_kit_host_has() {
  ldconfig -p 2>/dev/null | grep -q "^[[:space:]]*$1 (.*x86-64" && return 0
  local d
  for d in /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu /lib64 /usr/lib64; do
    [ -e "$d/$1" ] && return 0
  done
  return 1
}

gpu_kit_host_lib() {  # full path of the host's soname, empty when none
  ldconfig -p 2>/dev/null | sed -n "s/^[[:space:]]*$1 (.*x86-64.*) => \(.*\)/\1/p" | head -1
}

gpu_kit_activate() {
  local dest=$1 k=$1/root lib=$1/root/$GPU_KIT_ARCH_LIB f soname zlib
  # fallback/: expose only the sonames the host lacks.
  rm -rf "$dest/fallback-active" && mkdir -p "$dest/fallback-active"
  for f in "$dest"/fallback/lib/*; do
    soname=${f##*/}
    [[ $soname =~ \.so\.[0-9]+$ ]] || continue
    gpu_kit_host_has "$soname" || ln -sfn "$f" "$dest/fallback-active/$soname"
  done

  export PATH="$k/usr/bin:$PATH"
  export LD_LIBRARY_PATH="$lib:$lib/openblas-openmp:$lib/openmpi/lib:$lib/pmix2/lib:$dest/fallback-active${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # pkg-config: the kit's pkgconf, the kit's .pc files only.
  export PKG_CONFIG_LIBDIR="$lib/pkgconfig:$k/usr/share/pkgconfig"
  unset PKG_CONFIG_PATH
  # OpenMPI 4.1 and PMIx 4 look for their plugins, help texts, wrapper data and
  # /etc files under their configure-time paths (/usr/...); *_DESTDIR prefixes
  # every one of them with the kit's root.
  export OPAL_DESTDIR="$k" PMIX_DESTDIR="$k"
  unset OPAL_PREFIX
  # mpirun as root, one node, no ssh, no InfiniBand: shared memory (without the
  # ptrace-based single copy, refused in many containers) and loopback TCP;
  # more ranks than cores allowed; no core binding (OpenMP threads and CUDA
  # ranks would share one core each otherwise).
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_pml=ob1
  export OMPI_MCA_btl_vader_single_copy_mechanism=none
  export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_hwloc_base_binding_policy=none
  export OMPI_MCA_plm_rsh_agent=false    # never look for ssh: local launch only
  # Shared-memory segments live in /dev/shm unless it is missing or small.
  if [ "$(df -Pm /dev/shm 2>/dev/null | awk 'NR == 2 { print $4 }')" -lt 1024 ] 2>/dev/null ||
     [ ! -w /dev/shm ]; then
    export OMPI_MCA_btl_vader_backing_directory=/tmp
  fi

  zlib=$(gpu_kit_host_lib libz.so.1)
  [ -n "$zlib" ] || zlib="$dest/fallback-active/libz.so.1"
  GPU_KIT_CMAKE_ARGS=(
    "-DCMAKE_PREFIX_PATH=$k/usr"
    "-DMPI_CXX_COMPILER=$k/usr/bin/mpicxx"
    "-DMPI_C_COMPILER=$k/usr/bin/mpicc"
    "-DMPIEXEC_EXECUTABLE=$k/usr/bin/mpiexec"
    "-DPKG_CONFIG_EXECUTABLE=$k/usr/bin/pkg-config"
    "-DLLM_ONEDNN=OFF"
    "-DOPENBLAS_INCLUDE_DIR=$k/usr/include/x86_64-linux-gnu/openblas-openmp"
    "-DOPENBLAS_LIBRARY=$lib/openblas-openmp/libopenblas.so"
    "-DZLIB_INCLUDE_DIR=$k/usr/include"
    "-DZLIB_LIBRARY=$zlib"
    "-DCUDNN_FRONTEND_INCLUDE_DIR=$dest/cudnn-frontend/include"
  )
}

# First file matching NAME (a glob) in the given directories, else empty.
gpu_kit_first() {
  local name=$1 d f
  shift
  for d in "$@"; do
    for f in "$d"/$name; do [ -e "$f" ] && { echo "$f"; return 0; }; done
  done
  return 0
}

# Python site-packages' nvidia/* wheel folders (nvidia/cu13, nvidia/nccl, ...).
gpu_kit_wheel_dirs() {
  local py
  for py in python3 /opt/torch/.venv/bin/python3; do
    command -v "$py" >/dev/null || continue
    "$py" - <<'EOF' 2>/dev/null
import glob, os, site, sys
seen = []
for p in sys.path + site.getsitepackages():
    for d in sorted(glob.glob(os.path.join(p, "nvidia", "*"))):
        if os.path.isdir(d) and d not in seen:
            seen.append(d)
            print(d)
EOF
  done | awk '!seen[$0]++'
}

gpu_kit_find_cuda() {
  local dest=$1 nvcc root wheels=() libdirs=() incdirs=() d name f unversioned flags=""
  GPU_KIT_CUDA_REPORT=""
  nvcc=${CUDACXX:-}
  [ -n "$nvcc" ] || nvcc=$(command -v nvcc || true)
  [ -n "$nvcc" ] || nvcc=$(gpu_kit_first nvcc /usr/local/cuda/bin /usr/local/cuda-*/bin)
  mapfile -t wheels < <(gpu_kit_wheel_dirs)
  [ -n "$nvcc" ] || nvcc=$(gpu_kit_first bin/nvcc "${wheels[@]}")
  if [ -z "$nvcc" ]; then
    GPU_KIT_CUDA_REPORT="nvcc: NOT FOUND (the build will have no CUDA backend)"
    return 0
  fi
  root=$(cd "$(dirname "$nvcc")/.." && pwd)
  export PATH="$(dirname "$nvcc"):$PATH"
  libdirs=("$root/lib64" "$root/lib" "$root/targets/x86_64-linux/lib" /usr/lib/x86_64-linux-gnu)
  incdirs=("$root/include" "$root/targets/x86_64-linux/include" /usr/include)
  for d in "${wheels[@]}"; do libdirs+=("$d/lib"); incdirs+=("$d/include"); done
  GPU_KIT_CMAKE_ARGS+=("-DCMAKE_CUDA_COMPILER=$nvcc")
  GPU_KIT_CUDA_REPORT="nvcc: $nvcc ($("$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'))"

  # A library CMake finds by itself needs lib<name>.so in the toolkit; a
  # wheel ships only lib<name>.so.<N>: link it as lib<name>.so into a shim
  # folder and name it to CMake (FindCUDAToolkit's CUDA_<name>_LIBRARY, our
  # LLM_NCCL_LIBRARY). Its folder goes on LD_LIBRARY_PATH for the run.
  mkdir -p "$dest/cuda-shim"
  for name in cudart cublas cublasLt nccl cudnn nvrtc; do
    unversioned=$(gpu_kit_first "lib$name.so" "${libdirs[@]}")
    f=${unversioned:-$(gpu_kit_first "lib$name.so.[0-9]*" "${libdirs[@]}")}
    if [ -z "$f" ]; then
      GPU_KIT_CUDA_REPORT+=$'\n'"lib$name: NOT FOUND"
      continue
    fi
    GPU_KIT_CUDA_REPORT+=$'\n'"lib$name: $f"
    if [ -z "$unversioned" ]; then
      ln -sfn "$(readlink -f "$f")" "$dest/cuda-shim/lib$name.so"
      f=$dest/cuda-shim/lib$name.so
    fi
    case $name in
      nccl) GPU_KIT_CMAKE_ARGS+=("-DLLM_NCCL_LIBRARY=$f") ;;
      cudart) [ -z "$unversioned" ] && GPU_KIT_CMAKE_ARGS+=("-DCUDA_CUDART=$f" "-DCUDA_cudart_LIBRARY=$f") ;;
      cublas|cublasLt|nvrtc) [ -z "$unversioned" ] && GPU_KIT_CMAKE_ARGS+=("-DCUDA_${name}_LIBRARY=$f") ;;
      cudnn) GPU_KIT_CMAKE_ARGS+=("-DLLM_CUDNN_LIBRARY=$f") ;;
    esac
    export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$(dirname "$(readlink -f "$f")")"
  done
  # Headers outside the toolkit's include folder (a wheel's) go to the compilers.
  for name in cublasLt.h nccl.h cudnn.h; do
    f=$(gpu_kit_first "$name" "${incdirs[@]}")
    if [ -z "$f" ]; then
      GPU_KIT_CUDA_REPORT+=$'\n'"$name: NOT FOUND"
      continue
    fi
    GPU_KIT_CUDA_REPORT+=$'\n'"$name: $f"
    d=$(dirname "$f")
    [ "$name" = cudnn.h ] && GPU_KIT_CMAKE_ARGS+=("-DLLM_CUDNN_INCLUDE_DIR=$d")
    case $d in "$root/include"|"$root/targets/x86_64-linux/include") ;; *) flags+=" -I$d" ;; esac
  done
  if [ -n "$flags" ]; then
    GPU_KIT_CMAKE_ARGS+=("-DCMAKE_CUDA_FLAGS=$flags" "-DCMAKE_CXX_FLAGS=$flags")
  fi
  f=$(gpu_kit_host_lib libcuda.so.1)
  [ -n "$f" ] || f=$(gpu_kit_first libcuda.so.1 ${LD_LIBRARY_PATH//:/ } /usr/local/nvidia/lib64 /usr/lib/wsl/lib)
  GPU_KIT_CUDA_REPORT+=$'\n'"libcuda.so.1 (driver): ${f:-NOT FOUND}"
}
