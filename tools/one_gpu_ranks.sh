#!/usr/bin/env bash
# tools/one_gpu_ranks.sh: several NCCL ranks on one GPU, for testing only.
#
#   tools/one_gpu_ranks.sh mpirun -np 4 ./train --config configs/tiny.toml ...
#   mpirun -np 4 tools/one_gpu_ranks.sh ./train ...        (the same, per rank)
#
# NCCL refuses two ranks on one GPU of one host, and takes a rank's host from
# NCCL_HOSTID when it is set. This gives every rank a host id of its own
# (hostname and world rank), so NCCL treats the ranks as separate hosts and
# joins them through its socket transport over loopback: NCCL's own kernels,
# proxies, transport, initialization and abort, on one GPU. The trainer
# admits such ranks and says so at start (parallel/nccl_placement.h). Its
# speed means nothing. docs/gpu.md#many-nccl-ranks-on-one-gpu.
#
# In the first form the launcher's options are read up to the program, which
# is then run through this script; options that take a value must be among
# those listed in MPIRUN_VALUE_OPTIONS below, else use the second form.
set -euo pipefail
self=$(readlink -f "$0")

rank=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-${PMI_RANK:-${SLURM_PROCID:-}}}}
case ${1:-} in
  mpirun|mpiexec|orterun|*/mpirun|*/mpiexec|*/orterun)
    if [ -z "$rank" ]; then
      MPIRUN_VALUE_OPTIONS=" -n -np -c --np -x -H --host -hostfile --hostfile -machinefile
        --machinefile --map-by --rank-by --bind-to --wdir -wdir --path --prefix --npernode
        -npernode --npersocket -N --output-filename --report-bindings-file --timeout "
      launcher=("$1"); shift
      while [ $# -gt 0 ]; do
        case $1 in
          --mca|-mca|--gmca|-gmca) launcher+=("$1" "$2" "$3"); shift 3 ;;
          -*) if [[ $MPIRUN_VALUE_OPTIONS == *" $1 "* ]]; then launcher+=("$1" "$2"); shift 2
              else launcher+=("$1"); shift; fi ;;
          *) break ;;
        esac
      done
      [ $# -gt 0 ] || { echo "one_gpu_ranks.sh: no program after the launcher's options" >&2; exit 2; }
      exec "${launcher[@]}" "$self" "$@"
    fi ;;
esac

[ $# -gt 0 ] || { echo "usage: tools/one_gpu_ranks.sh mpirun -np N PROGRAM [ARGS...]" >&2; exit 2; }
[ -n "$rank" ] || { echo "one_gpu_ranks.sh: no rank in the environment (run it under mpirun)" >&2; exit 2; }
export NCCL_HOSTID="$(uname -n)-rank$rank"
# One transport between the ranks: sockets over loopback. The in-host
# transports (peer-to-peer, shared memory, NVLink SHARP, multi-node NVLink)
# would find the ranks on one GPU; InfiniBand is not wanted either.
export NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-lo}
export NCCL_IB_DISABLE=1 NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NVLS_ENABLE=0 NCCL_MNNVL_ENABLE=0
exec "$@"
