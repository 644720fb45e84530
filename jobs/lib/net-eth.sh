# Network settings for an Ethernet cluster (sourced by jobs/*-eth.sbatch).
# Needs DTRAIN_ETH_IFACE: the interface the nodes reach each other on.
#
# MPI (MPICH's ch4:ucx): UCX over TCP between nodes, shared memory within a
# node. NCCL (GPU builds): sockets on the same interface, InfiniBand verbs off
# so that NCCL never probes for an HCA. DTRAIN_UCX_TLS (optional) replaces the
# UCX transport list, e.g. self,tcp to keep even same-node ranks on TCP.
: "${DTRAIN_ETH_IFACE:?set DTRAIN_ETH_IFACE in the site block of the job script}"
export UCX_TLS=${DTRAIN_UCX_TLS:-self,sm,tcp}
export UCX_NET_DEVICES=$DTRAIN_ETH_IFACE
export UCX_WARN_UNUSED_ENV_VARS=n
DTRAIN_NET=eth
export NCCL_SOCKET_IFNAME=$DTRAIN_ETH_IFACE
export NCCL_IB_DISABLE=1
