#!/usr/bin/env python3
"""Post-processing of bench/network/run.sh (standard library only).

    analyze.py collect OUT      OUT/runs/*/try*/ -> OUT/results.csv, OUT/hetero.csv,
                                OUT/tables.md, OUT/scaling-<bandwidth>.dat

Each try directory holds train.csv (dtrain-post csv of the run record) and
meta.txt (key=value lines written by run.sh). Of several tries of one point,
the least disturbed one is used (least CPU used by other programs during it).

Per rank, the timed window runs from the first /train row (after the warm-up
steps) to the last: time per iteration = (wall_last - wall_first) /
(step_last - step_first); compute, comm and wait per iteration are the sums
of the rows after the first over the same steps. The figures of a point are
means over ranks (over the ranks other than the slow one for other_*).

The alpha-beta model (doc/references.md, Alpha-beta cost model), M = 4 * parameters bytes:
    allreduce (ring)             2 (n-1) alpha + 2 (n-1)/n * M / B
    sgp, dpsgd, adpsgd (1 peer)  alpha + M / B
    osgp                         alpha + M / B, overlapped: time = max(compute, comm)
    predicted time = measured compute + predicted comm (osgp: the max; adpsgd:
    half the ranks (active) at compute + comm, half (passive) at compute, and
    time per iteration = 1 / mean iterations per second, as measured)
alpha and B come from OUT/calib.csv (linkprobe.py with all n links busy at once).
"""
import csv
import glob
import math
import os
import statistics
import sys

MODES = ["allreduce", "sgp", "osgp", "dpsgd", "adpsgd"]


def read_meta(path):
    meta = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if "=" in line:
                k, v = line.split("=", 1)
                meta[k] = v
    return meta


def rank_windows(train_csv):
    """{rank: (t_iter, compute, comm, wait, steps, from_start)} over the timed window.

    A rank with a single /train row (an adpsgd rank that made few local steps)
    is timed from the start of training (step 0, wall 0), warm-up included;
    from_start says so."""
    rows = {}
    with open(train_csv) as f:
        for r in csv.DictReader(f):
            step = int(r["step"])
            if step < 0:
                continue
            rows.setdefault(int(r["rank"]), []).append(
                (step, float(r["wall"]), float(r["compute_time"]), float(r["comm_time"]),
                 float(r["wait_time"])))
    out = {}
    for rank, v in rows.items():
        v.sort()
        from_start = len(v) < 2
        if from_start:
            v = [(0, 0.0, 0.0, 0.0, 0.0)] + v
        ds = v[-1][0] - v[0][0]
        if ds <= 0:
            continue
        out[rank] = ((v[-1][1] - v[0][1]) / ds,
                     sum(x[2] for x in v[1:]),
                     sum(x[3] for x in v[1:]),
                     sum(x[4] for x in v[1:]),
                     ds, from_start)
    return out


def mean(xs):
    xs = list(xs)
    return sum(xs) / len(xs) if xs else float("nan")


def pace(w, ranks):
    """Time per iteration of a set of ranks: 1 / (mean iterations per second),
    i.e. the aggregate throughput per rank. Equal to every rank's own time in
    the synchronous modes; in adpsgd, where ranks run at different paces, the
    time per iteration the group achieves on average."""
    ranks = [r for r in ranks if r in w]
    if not ranks:
        return float("nan")
    return 1.0 / mean(1.0 / w[r][0] for r in ranks)


def try_metrics(d):
    meta = read_meta(os.path.join(d, "meta.txt"))
    train = os.path.join(d, "train.csv")
    if meta.get("status") != "ok" or not os.path.exists(train):
        return None
    w = rank_windows(train)
    n = int(meta["ranks"])
    if len(w) != n:
        return None
    slow = int(meta.get("slow_rank", "-1"))
    allr = sorted(w)
    others = [r for r in allr if r != slow]
    steps = sum(w[r][4] for r in allr)
    m = dict(meta)
    m["time_per_iter"] = pace(w, allr)
    # step-weighted: the shares of an average iteration
    m["compute"] = sum(w[r][1] for r in allr) / steps
    m["comm"] = sum(w[r][2] for r in allr) / steps
    m["wait"] = sum(w[r][3] for r in allr) / steps
    m["iter_min"] = min(w[r][0] for r in allr)
    m["iter_max"] = max(w[r][0] for r in allr)
    # adpsgd's bipartite roles: odd ranks active (they exchange), even passive
    m["active_time_per_iter"] = pace(w, [r for r in allr if r % 2 == 1])
    m["passive_time_per_iter"] = pace(w, [r for r in allr if r % 2 == 0])
    m["other_time_per_iter"] = pace(w, others)
    m["slow_time_per_iter"] = w[slow][0] if slow in w else float("nan")
    m["from_start_ranks"] = ",".join(str(r) for r in allr if w[r][5])
    m["timed_steps"] = steps
    return m


def disturbance(m):
    return float(m.get("outside_cpu", "0") or 0) + float(m.get("busy_before", "0") or 0)


def load_calib(out):
    cal = {}
    path = os.path.join(out, "calib.csv")
    if os.path.exists(path):
        with open(path) as f:
            for r in csv.DictReader(f):
                cal[(r["bandwidth"], int(r["ranks"]))] = (float(r["alpha_s"]), float(r["beta_Bps"]))
    return cal


def predict(mode, n, nparams, compute, calib, bw):
    if (bw, n) not in calib:
        return float("nan"), float("nan")
    alpha, beta = calib[(bw, n)]
    M = 4.0 * nparams
    if mode == "allreduce":
        comm = 2 * (n - 1) * alpha + 2 * (n - 1) / n * M / beta
    else:
        comm = alpha + M / beta
    if mode == "osgp":
        return comm, max(compute, comm)
    if mode == "adpsgd":
        # active (odd) ranks compute and exchange; passive (even) ranks only
        # compute, their thread answers: the group's pace mixes both halves
        if compute <= 0:
            return comm, float("nan")
        return comm, 1.0 / (0.5 / (compute + comm) + 0.5 / compute)
    return comm, compute + comm


def fmt(x, nd=4):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return ""
    return ("%." + str(nd) + "g") % x


def bw_key(bw):
    if bw == "unlimited":
        return 1e30
    b = bw.lower()
    for suf, f in (("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3)):
        if b.endswith(suf):
            return float(b[: -len(suf)]) * f
    return float(b)


def collect(out):
    calib = load_calib(out)
    best = {}
    tries = {}
    for d in sorted(glob.glob(os.path.join(out, "runs", "*", "try*"))):
        key = os.path.basename(os.path.dirname(d))
        tries[key] = tries.get(key, 0) + 1
        m = try_metrics(d)
        if m is None:
            continue
        m["try_dir"] = d
        if key not in best or disturbance(m) < disturbance(best[key]):
            best[key] = m
    grid = {}
    het = []
    for key, m in best.items():
        m["tries"] = tries[key]
        if m.get("variant", "grid") == "grid":
            grid[(m["mode"], int(m["ranks"]), m["bandwidth"])] = m
        else:
            het.append(m)

    # Hidden fraction of osgp, against sgp at the same ranks and bandwidth
    # (same messages, same graph, no overlap):
    #   hidden      = (t_sgp - t_osgp) / (t_sgp - compute_sgp): of the time sgp
    #                 spends per iteration beyond computing, the part osgp saves
    #   hidden_time = 1 - (comm + wait)_osgp / (comm + wait)_sgp: the same from
    #                 dtrain's timers alone, blind to time outside them (e.g. the
    #                 per-step stop-flag MPI_Wait, or compute slowed down by the
    #                 communication thread's kernel work on a shared core)
    for (mode, n, bw), m in grid.items():
        m["hidden"] = float("nan")
        m["hidden_time"] = float("nan")
        m["hidden_of_hideable"] = float("nan")
        if mode != "osgp" or ("sgp", n, bw) not in grid:
            continue
        s = grid[("sgp", n, bw)]
        if s["time_per_iter"] - s["compute"] > 0:
            m["hidden"] = (s["time_per_iter"] - m["time_per_iter"]) / (
                s["time_per_iter"] - s["compute"])
        sgp_comm = s["comm"] + s["wait"]
        if sgp_comm > 0:
            m["hidden_time"] = 1 - (m["comm"] + m["wait"]) / sgp_comm
        # overlap can save at most min(compute, communication) per iteration
        # (alpha-beta: time = max(compute, comm)); the share of that it saves
        hideable = min(s["compute"], s["time_per_iter"] - s["compute"])
        if hideable > 0:
            m["hidden_of_hideable"] = (s["time_per_iter"] - m["time_per_iter"]) / hideable

    for (mode, n, bw), m in grid.items():
        nparams = int(m["nparams"])
        m["pred_comm"], m["pred_time"] = predict(mode, n, nparams, m["compute"], calib, bw)
        if (bw, n) in calib:
            m["alpha"], m["beta"] = calib[(bw, n)]
        else:
            m["alpha"] = m["beta"] = float("nan")
        steps = int(m["steps"])
        m["veth_bytes_per_rank_step"] = float(m.get("veth_tx_bytes", "nan")) / n / steps
        M = 4.0 * nparams
        m["model_bytes_per_rank_step"] = 2 * (n - 1) / n * M if mode == "allreduce" else M

    cols = ["mode", "ranks", "bandwidth", "time_per_iter_s", "compute_s", "comm_s", "wait_s",
            "hidden_fraction", "hidden_fraction_timers", "hidden_of_hideable", "other_s", "pred_comm_s", "pred_time_per_iter_s",
            "alpha_s", "beta_Bps", "iter_min_s", "iter_max_s", "active_time_per_iter_s",
            "passive_time_per_iter_s", "from_start_ranks", "veth_bytes_per_rank_step",
            "model_bytes_per_rank_step", "busy_before_cores", "outside_cpu_cores", "tries",
            "finalize_killed", "steps", "warmup", "nparams", "yield_shim", "date"]
    order = lambda k: (bw_key(k[2]), MODES.index(k[0]) if k[0] in MODES else 99, k[1])
    with open(os.path.join(out, "results.csv"), "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(cols)
        for k in sorted(grid, key=order):
            m = grid[k]
            wr.writerow([m["mode"], m["ranks"], m["bandwidth"], fmt(m["time_per_iter"], 5),
                         fmt(m["compute"], 5), fmt(m["comm"], 5), fmt(m["wait"], 5),
                         fmt(m["hidden"], 3), fmt(m["hidden_time"], 3), fmt(m["hidden_of_hideable"], 3),
                         fmt(m["time_per_iter"] - m["compute"] - m["comm"] - m["wait"], 4),
                         fmt(m["pred_comm"], 5),
                         fmt(m["pred_time"], 5), fmt(m["alpha"], 4), fmt(m["beta"], 4),
                         fmt(m["iter_min"], 5), fmt(m["iter_max"], 5),
                         fmt(m["active_time_per_iter"], 5) if m["mode"] == "adpsgd" else "",
                         fmt(m["passive_time_per_iter"], 5) if m["mode"] == "adpsgd" else "",
                         m["from_start_ranks"],
                         fmt(m["veth_bytes_per_rank_step"], 5),
                         fmt(m["model_bytes_per_rank_step"], 5), m.get("busy_before", ""),
                         m.get("outside_cpu", ""), m["tries"], m.get("finalize_killed", ""),
                         m["steps"], m["warmup"], m["nparams"], m.get("yield_shim", ""),
                         m.get("date", "")])

    # heterogeneous: slowed run against its unslowed twin (variant het-base)
    hcols = ["mode", "ranks", "bandwidth", "slow_rank", "delay_ms", "base_other_time_per_iter_s",
             "slow_other_time_per_iter_s", "other_throughput_ratio", "slow_rank_time_per_iter_s",
             "base_busy_before", "slow_busy_before", "base_outside_cpu", "slow_outside_cpu"]
    hrows = []
    base = {(m["mode"], m["ranks"], m["bandwidth"]): m for m in het if m["variant"] == "het-base"}
    for m in het:
        if m["variant"] != "het-slow":
            continue
        b = base.get((m["mode"], m["ranks"], m["bandwidth"]))
        if b is None:
            continue
        hrows.append([m["mode"], m["ranks"], m["bandwidth"], m["slow_rank"], m["delay_ms"],
                      fmt(b["other_time_per_iter"], 5), fmt(m["other_time_per_iter"], 5),
                      fmt(b["other_time_per_iter"] / m["other_time_per_iter"], 4),
                      fmt(m["slow_time_per_iter"], 5), b.get("busy_before", ""),
                      m.get("busy_before", ""), b.get("outside_cpu", ""),
                      m.get("outside_cpu", "")])
    with open(os.path.join(out, "hetero.csv"), "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(hcols)
        wr.writerows(sorted(hrows))

    # gnuplot data: one file per bandwidth, one block (two blank lines apart) per mode
    bws = sorted({k[2] for k in grid}, key=bw_key)
    for bw in bws:
        with open(os.path.join(out, "scaling-%s.dat" % bw), "w") as f:
            for mode in MODES:
                f.write("# %s %s: ranks time_per_iter_s\n" % (mode, bw))
                for n in sorted({k[1] for k in grid}):
                    if (mode, n, bw) in grid:
                        f.write("%d %.6g\n" % (n, grid[(mode, n, bw)]["time_per_iter"]))
                f.write("\n\n")

    write_tables(out, grid, hrows, bws)


def write_tables(out, grid, hrows, bws):
    lines = []
    ranks = sorted({k[1] for k in grid})
    for bw in bws:
        lines.append("**%s** (seconds per iteration; α-β prediction in parentheses; other = "
                     "time outside dtrain's three timers; notes: osgp hidden fraction of sgp's "
                     "communication / of what overlap can hide / from the timers alone; "
                     "adpsgd: s/iter of the active and passive ranks)\n" % bw)
        lines.append("| mode | ranks | time/iter (α-β) | compute | comm | wait | other | comm+wait (α-β comm) | notes |")
        lines.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for mode in MODES:
            for n in ranks:
                m = grid.get((mode, n, bw))
                if m is None:
                    continue
                hid = ""
                if mode == "osgp" and not math.isnan(m["hidden"]):
                    hid = "%.0f %% / %.0f %% / %.0f %%" % (
                        100 * m["hidden"], 100 * m["hidden_of_hideable"], 100 * m["hidden_time"])
                if mode == "adpsgd":
                    hid = "active %.3f, passive %.3f" % (m["active_time_per_iter"],
                                                         m["passive_time_per_iter"])
                lines.append("| %s | %d | %.3f (%.3f) | %.3f | %.3f | %.3f | %.3f | %.3f (%.3f) | %s |" % (
                    mode, n, m["time_per_iter"], m["pred_time"], m["compute"], m["comm"],
                    m["wait"], m["time_per_iter"] - m["compute"] - m["comm"] - m["wait"],
                    m["comm"] + m["wait"], m["pred_comm"], hid))
        lines.append("")
    # sgp / allreduce ratio per ranks and bandwidth
    lines.append("| ranks | bandwidth | sgp / allreduce time per iteration | α-β prediction |")
    lines.append("| ---: | --- | ---: | ---: |")
    for bw in bws:
        for n in ranks:
            a, s = grid.get(("allreduce", n, bw)), grid.get(("sgp", n, bw))
            if a and s:
                lines.append("| %d | %s | %.2f | %.2f |" % (
                    n, bw, s["time_per_iter"] / a["time_per_iter"], s["pred_time"] / a["pred_time"]))
    lines.append("")
    if hrows:
        lines.append("| mode | ranks | bandwidth | slow rank, delay | others' s/iter unslowed | others' s/iter slowed | others' throughput kept | slow rank's s/iter |")
        lines.append("| --- | ---: | --- | --- | ---: | ---: | ---: | ---: |")
        for h in sorted(hrows):
            lines.append("| %s | %s | %s | %s, %s ms | %s | %s | %.0f %% | %s |" % (
                h[0], h[1], h[2], h[3], h[4], h[5], h[6], 100 * float(h[7]), h[8]))
        lines.append("")
    with open(os.path.join(out, "tables.md"), "w") as f:
        f.write("\n".join(lines))


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "collect":
        collect(sys.argv[2])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
