#!/bin/sh
# mpiexec -n N bench/network/netns-exec.sh PROGRAM ARGS...
# Runs PROGRAM in the network namespace of this MPI rank, ${NETNS_PREFIX}<rank>
# (made by netns.sh up N), so that each rank talks through its own shaped
# link. The rank comes from MPICH hydra's PMI_RANK (or PMIX_RANK, or Open MPI's
# OMPI_COMM_WORLD_RANK). `ip netns exec` changes only the network (and mount)
# namespace: the environment and the open file descriptors, the PMI socket
# among them, pass through unchanged.
# With NETNS_FALLBACK=1 (no namespaces; loopback shaped instead) it just
# runs PROGRAM.
rank=${PMI_RANK:-${PMIX_RANK:-${OMPI_COMM_WORLD_RANK:-}}}
if [ "${NETNS_FALLBACK:-0}" = 1 ]; then
    exec "$@"
fi
if [ -z "$rank" ]; then
    echo "netns-exec: no PMI_RANK in the environment (run me under mpiexec)" >&2
    exit 1
fi
ns=${NETNS_PREFIX:-dtn}$rank
if ! ip netns list | grep -q "^$ns\( \|$\)"; then
    echo "netns-exec: rank $rank: namespace $ns does not exist (bench/network/netns.sh up N)" >&2
    exit 1
fi
exec ip netns exec "$ns" "$@"
