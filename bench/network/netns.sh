#!/bin/bash
# An emulated switched cluster on one machine: one network namespace per rank,
# each joined to a bridge (the switch) by its own veth pair (its link), each
# link shaped with tbf in both directions. Needs root (CAP_NET_ADMIN and
# CAP_SYS_ADMIN for `ip netns`).
#
#   bench/network/netns.sh up N          namespaces ${NETNS_PREFIX}0..N-1, bridge, veths
#   bench/network/netns.sh shape RATE    every link at RATE (e.g. 1gbit, 10gbit) or unlimited
#   bench/network/netns.sh stats         bytes each link carried (both ends)
#   bench/network/netns.sh down          remove every namespace, veth, bridge and qdisc made here
#
# Or source it (run.sh does) and call net_up / net_shape / net_stats / net_down.
#
# Layout, rank r (0-based):
#   namespace ${NETNS_PREFIX}r:  eth0 = 10.77.0.(r+1)/24, lo
#   root namespace:        ${NETNS_PREFIX}v<r> (the veth's other end), a port of bridge ${NETNS_PREFIX}br
# Shaping: tbf as the root qdisc on the egress of BOTH ends of each veth. The
# namespace end limits what rank r sends (its uplink); the bridge end limits
# what the bridge delivers to rank r (its downlink). Together: a full-duplex
# link of RATE per rank into a non-blocking switch, as on a switched cluster.
# (Ingress policing would drop instead of queueing, which TCP takes as loss.)
#
# Without namespaces (not root, or `ip netns add` refused) NETNS_FALLBACK=1 is
# set and shaping goes on loopback instead: ONE tbf for all ranks together, a
# shared bus, not a cluster, and it slows every other user of lo on the
# machine. The messages say so.

NETNS_PREFIX=${NETNS_PREFIX:-dtn}
NETNS_SUBNET=${NETNS_SUBNET:-10.77.0}
NETNS_FALLBACK=${NETNS_FALLBACK:-0}
NETNS_MADE=0            # ranks whose namespace and veth this shell created
NETNS_BRIDGE_MADE=0
NETNS_LO_SHAPED=0

net_log() { echo "netns: $*" >&2; }

# every process below PID, children first (the drivers end a run's whole tree)
descendants() {
    local c
    for c in $(ps -o pid= --ppid "$1" 2>/dev/null); do
        descendants "$c"
        echo "$c"
    done
}

net_can_isolate() {
    [ "$(id -u)" = 0 ] || return 1
    command -v ip >/dev/null && command -v tc >/dev/null || return 1
    local probe=${NETNS_PREFIX}probe$$
    ip netns add "$probe" 2>/dev/null || return 1
    ip netns del "$probe"
}

# tbf parameters for a rate such as 1gbit: the bucket holds 1 ms of traffic
# and at least 128 KiB (two 64 KiB GSO super-packets, so tbf never has to
# split one); the queue holds 10 ms more before it drops.
net_tbf_args() {
    local rate=$1 bps burst
    bps=$(tc_rate_bps "$rate") || return 1
    burst=$((bps / 8 / 1000))
    [ "$burst" -ge 131072 ] || burst=131072
    echo "rate $rate burst $burst latency 10ms"
}

# 1gbit, 10gbit, 500mbit, 100kbit, 1000000 (bit/s) -> bit/s
tc_rate_bps() {
    local r=${1,,}
    case $r in
        *gbit) echo $((${r%gbit} * 1000000000)) ;;
        *mbit) echo $((${r%mbit} * 1000000)) ;;
        *kbit) echo $((${r%kbit} * 1000)) ;;
        *bit) echo "${r%bit}" ;;
        *[!0-9]*|'') net_log "bad rate '$1' (expected e.g. 1gbit, 10gbit, 500mbit)"; return 1 ;;
        *) echo "$r" ;;
    esac
}

net_up() {
    local n=$1 r ns
    if [ "$NETNS_FALLBACK" != 1 ] && ! net_can_isolate; then
        NETNS_FALLBACK=1
    fi
    if [ "$NETNS_FALLBACK" = 1 ]; then
        net_log "WARNING: cannot create network namespaces (not root, or ip netns refused)."
        net_log "WARNING: falling back to shaping loopback: all ranks share ONE link (a bus, not a"
        net_log "WARNING: switched cluster), and every other program using lo is slowed too."
        export NETNS_FALLBACK
        return 0
    fi
    if ip link show "${NETNS_PREFIX}br" >/dev/null 2>&1 || ip netns list | grep -q "^${NETNS_PREFIX}[0-9]"; then
        net_log "${NETNS_PREFIX}br or ${NETNS_PREFIX}<r> namespaces already exist (another run, or one that was"
        net_log "killed with SIGKILL): remove them with 'bench/network/netns.sh down' (NETNS_PREFIX=$NETNS_PREFIX) first"
        return 1
    fi
    ip link add "${NETNS_PREFIX}br" type bridge || return 1
    NETNS_BRIDGE_MADE=1
    # forward at once: no STP listening/learning delay on new ports
    ip link set "${NETNS_PREFIX}br" type bridge forward_delay 0 stp_state 0 || return 1
    ip link set "${NETNS_PREFIX}br" up || return 1
    for ((r = 0; r < n; r++)); do
        ns=${NETNS_PREFIX}$r
        ip netns add "$ns" || return 1
        NETNS_MADE=$((r + 1))
        ip link add "${NETNS_PREFIX}v$r" type veth peer name eth0 netns "$ns" || return 1
        ip link set "${NETNS_PREFIX}v$r" master "${NETNS_PREFIX}br" up || return 1
        ip -n "$ns" addr add "$NETNS_SUBNET.$((r + 1))/24" dev eth0 || return 1
        ip -n "$ns" link set eth0 up || return 1
        ip -n "$ns" link set lo up || return 1
    done
    net_log "$n namespaces ${NETNS_PREFIX}0..$((n - 1)) on bridge ${NETNS_PREFIX}br ($NETNS_SUBNET.1-$n)"
}

# Shape every link (both directions) at RATE, or remove the shaping (unlimited).
net_shape() {
    local rate=$1 n r args
    if [ "$NETNS_FALLBACK" = 1 ]; then
        if [ "$rate" = unlimited ]; then
            # only a tbf of ours: lo's qdisc belongs to the whole machine
            [ "$NETNS_LO_SHAPED" = 1 ] && tc qdisc del dev lo root 2>/dev/null
            NETNS_LO_SHAPED=0
        else
            args=$(net_tbf_args "$rate") || return 1
            # shellcheck disable=SC2086
            tc qdisc replace dev lo root tbf $args || { net_log "tc on lo refused: runs are unshaped"; return 1; }
            NETNS_LO_SHAPED=1
            net_log "WARNING: loopback shaped to $rate for ALL ranks together (shared bus)"
        fi
        return 0
    fi
    n=$NETNS_MADE
    if [ "$rate" != unlimited ]; then
        args=$(net_tbf_args "$rate") || return 1
    fi
    for ((r = 0; r < n; r++)); do
        if [ "$rate" = unlimited ]; then
            tc qdisc del dev "${NETNS_PREFIX}v$r" root 2>/dev/null
            ip netns exec "${NETNS_PREFIX}$r" tc qdisc del dev eth0 root 2>/dev/null
        else
            # shellcheck disable=SC2086
            tc qdisc replace dev "${NETNS_PREFIX}v$r" root tbf $args || return 1
            # shellcheck disable=SC2086
            ip netns exec "${NETNS_PREFIX}$r" tc qdisc replace dev eth0 root tbf $args || return 1
        fi
    done
}

# "rank tx_bytes rx_bytes" per link, from the namespace end (what the rank sent
# and received over its link); in fallback mode one line for lo.
net_stats() {
    local r
    if [ "$NETNS_FALLBACK" = 1 ]; then
        echo "lo $(cat /sys/class/net/lo/statistics/tx_bytes) $(cat /sys/class/net/lo/statistics/rx_bytes)"
        return
    fi
    for ((r = 0; r < NETNS_MADE; r++)); do
        ip netns exec "${NETNS_PREFIX}$r" sh -c \
            "echo $r \$(cat /sys/class/net/eth0/statistics/tx_bytes) \$(cat /sys/class/net/eth0/statistics/rx_bytes)"
    done
}

# Remove what net_up/net_shape made. Without a record of what this shell made
# (the CLI `down`), remove everything named with NETNS_PREFIX.
net_down() {
    local r ns all=${1:-}
    if [ "$NETNS_LO_SHAPED" = 1 ]; then
        tc qdisc del dev lo root 2>/dev/null
        NETNS_LO_SHAPED=0
        net_log "loopback shaping removed"
    fi
    if [ "$all" = all ] && [ "$NETNS_FALLBACK" = 1 ] && tc qdisc show dev lo | grep -q '^qdisc tbf'; then
        tc qdisc del dev lo root 2>/dev/null && net_log "loopback shaping (tbf) removed"
    fi
    if [ "$all" = all ]; then
        for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^${NETNS_PREFIX}[0-9][0-9]*$"); do
            r=${ns#"$NETNS_PREFIX"}
            [ "$r" -ge "$NETNS_MADE" ] && NETNS_MADE=$((r + 1))
        done
        ip link show "${NETNS_PREFIX}br" >/dev/null 2>&1 && NETNS_BRIDGE_MADE=1
    fi
    for ((r = 0; r < NETNS_MADE; r++)); do
        ns=${NETNS_PREFIX}$r
        # qdiscs go with their devices, but say so explicitly
        tc qdisc del dev "${NETNS_PREFIX}v$r" root 2>/dev/null
        ip link del "${NETNS_PREFIX}v$r" 2>/dev/null   # takes eth0 in $ns with it
        ip netns del "$ns" 2>/dev/null
    done
    if [ "$NETNS_MADE" -gt 0 ]; then
        net_log "removed namespaces ${NETNS_PREFIX}0..$((NETNS_MADE - 1)) and their veths"
    fi
    NETNS_MADE=0
    if [ "$NETNS_BRIDGE_MADE" = 1 ]; then
        ip link del "${NETNS_PREFIX}br" 2>/dev/null
        NETNS_BRIDGE_MADE=0
        net_log "removed bridge ${NETNS_PREFIX}br"
    fi
}

# Anything of ours still there? (prints it; status 1 if so)
net_leftovers() {
    local left
    left=$( { ip netns list 2>/dev/null | awk '{print $1}' | grep "^${NETNS_PREFIX}[0-9][0-9]*$";
              ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep "^${NETNS_PREFIX}"; } )
    [ -z "$left" ] && return 0
    echo "$left"
    return 1
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    set -u
    case ${1:-} in
        up)
            [ $# -eq 2 ] || { echo "usage: $0 up N" >&2; exit 2; }
            # a half-made setup is removed again
            net_up "$2" || { net_down; exit 1; } ;;
        shape)
            [ $# -eq 2 ] || { echo "usage: $0 shape RATE|unlimited" >&2; exit 2; }
            for ns in $(ip netns list | awk '{print $1}' | grep "^${NETNS_PREFIX}[0-9][0-9]*$"); do
                r=${ns#"$NETNS_PREFIX"}
                [ "$r" -ge "$NETNS_MADE" ] && NETNS_MADE=$((r + 1))
            done
            net_shape "$2" ;;
        stats)
            for ns in $(ip netns list | awk '{print $1}' | grep "^${NETNS_PREFIX}[0-9][0-9]*$"); do
                r=${ns#"$NETNS_PREFIX"}
                [ "$r" -ge "$NETNS_MADE" ] && NETNS_MADE=$((r + 1))
            done
            net_stats ;;
        down)
            net_down all
            net_leftovers >/dev/null || { echo "netns: still there:" >&2; net_leftovers >&2; exit 1; } ;;
        *)
            echo "usage: $0 up N | shape RATE|unlimited | stats | down" >&2
            exit 2 ;;
    esac
fi
