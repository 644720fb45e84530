# Network settings for an InfiniBand cluster (sourced by jobs/*-ib.sbatch).
# Needs DTRAIN_IB_HCA (the HCA port, mlx5_0:1 style: `ibstat` or `ucx_info -d`
# lists them), DTRAIN_IB_TRANSPORT (rc, or dc for large jobs: one DC
# context serves every peer where RC needs a queue pair per peer) and
# DTRAIN_OOB_IFACE (an IP interface, e.g. ib0 or eth0, for NCCL's bootstrap).
#
# MPI (MPICH's ch4:ucx): UCX's verbs transport on the HCA between nodes, shared
# memory within a node (UCX's `rc` alias brings its UD wire-up with it). NCCL
# (GPU builds): the same HCA port for data, the IP interface for bootstrap.
: "${DTRAIN_IB_HCA:?set DTRAIN_IB_HCA in the site block of the job script}"
: "${DTRAIN_IB_TRANSPORT:?set DTRAIN_IB_TRANSPORT (rc or dc) in the site block of the job script}"
: "${DTRAIN_OOB_IFACE:?set DTRAIN_OOB_IFACE in the site block of the job script}"
export UCX_TLS=self,sm,$DTRAIN_IB_TRANSPORT
export UCX_NET_DEVICES=$DTRAIN_IB_HCA
export UCX_WARN_UNUSED_ENV_VARS=n
DTRAIN_NET=ib
export NCCL_IB_HCA=$DTRAIN_IB_HCA
export NCCL_SOCKET_IFNAME=$DTRAIN_OOB_IFACE
