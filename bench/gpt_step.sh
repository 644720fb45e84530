#!/bin/bash
# GPT forward + backward: dtrain (bench/gpt_step) against the same model in
# PyTorch eager (bench/gpt_step.py), side by side: the two programs alternate,
# ROUNDS times per configuration and thread count, one process per run (so
# each peak RSS is that configuration's). Prints dtrain's median and PyTorch's
# best tokens/s, their ratio, dtrain's fraction of the sgemm peak (measured by
# each gpt_step run at the same thread count), both peak RSS, and the ratio of
# the rates per CPU-second (dtrain's median against PyTorch's best: on a
# loaded machine the wall clock also counts time spent descheduled).
#
#   make bench/gpt_step && bench/gpt_step.sh            # ROUNDS=3 THREADS="1 2" CONFIGS="baby small"
# Environment: GPT_STEP (default bench/gpt_step beside this script's build),
# PYTHON (default /usr/bin/python3), ROUNDS, THREADS, CONFIGS, STEPS_baby, STEPS_small,
# CAP (the same ISA cap for both sides, bench/isa_cap.sh), COMPILE=1 (PyTorch runs
# torch.compile'd: PyTorch 2.x, e.g. PYTHON=/tmp/dtrain-torch-venv/bin/python3).
set -eu
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
GPT_STEP=${GPT_STEP:-$HERE/gpt_step}
PYTHON=${PYTHON:-/usr/bin/python3}
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-1 2}
CONFIGS=${CONFIGS:-baby small}
STEPS_baby=${STEPS_baby:-50}
STEPS_small=${STEPS_small:-5}
COMPILE=${COMPILE:-0}
compile_arg=()
[ "$COMPILE" = 1 ] && compile_arg=(--compile)
[ -x "$GPT_STEP" ] || { echo "gpt_step.sh: $GPT_STEP not built (make bench/gpt_step)" >&2; exit 1; }
"$PYTHON" -c 'import torch' 2>/dev/null || { echo "gpt_step.sh: $PYTHON cannot import torch" >&2; exit 1; }

. "$HERE/isa_cap.sh" # CAP: the same ISA cap for both sides
echo "# $(date -u '+%F %T') UTC; $(lscpu | sed -n 's/^Model name: *//p'), $(nproc --all) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg)$([ "$COMPILE" = 1 ] && echo "; PyTorch under torch.compile")"
isa_cap_report "${DTRAIN:-$HERE/../src/dtrain}" "$PYTHON"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for th in $THREADS; do
    for cfg in $CONFIGS; do
        steps_var=STEPS_$cfg
        for r in $(seq "$ROUNDS"); do
            OPENBLAS_NUM_THREADS=$th OMP_NUM_THREADS=$th "$GPT_STEP" --threads "$th" \
                --steps "${!steps_var}" --rounds 1 "$cfg" | sed -n "s/^RESULT /$th /p" >>"$out"
            OMP_NUM_THREADS=$th "$PYTHON" "$HERE/gpt_step.py" --threads "$th" "${compile_arg[@]}" \
                --steps "${!steps_var}" --rounds 1 "$cfg" | sed -n "s/^RESULT /$th /p" >>"$out"
        done
    done
done
# lines: threads who config tok_s_median X tok_s_best Y [peak_gflops G] rss_kib R
awk -v C="$CONFIGS" -v TH="$THREADS" '
function med(a, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
                                 return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
{ k = $1 " " $3
  if ($2 == "dtrain") { nd[k]++; d[k, nd[k]] = $5; dc[k, nd[k]] = $13; pk[k] += $9; nk[k]++; if ($11 > drss[k]) drss[k] = $11 }
  else { if ($5 > tb[k]) tb[k] = $5; if ($11 > tcb[k]) tcb[k] = $11; if ($9 > trss[k]) trss[k] = $9 } }
END {
  printf "%-7s %-6s %12s %12s %7s %10s %9s %9s %9s %6s %8s\n", "threads", "config", "dtrain_med", "torch_best", "ratio",
         "sgemm_GF", "%peak", "dt_MiB", "pt_MiB", "rss", "cpu_ratio"
  split(TH, ths, " "); split(C, cs, " ")
  for (i in ths) for (j in cs) {
    k = ths[i] " " cs[j]; if (!(k in nd)) continue
    n = nd[k]; for (r = 1; r <= n; r++) v[r] = d[k, r]; m = med(v, n)
    for (r = 1; r <= n; r++) v[r] = dc[k, r]; mc = med(v, n)
    L = cs[j] == "baby" ? 4 : 6; Cc = cs[j] == "baby" ? 128 : 384; T = cs[j] == "baby" ? 64 : 256
    fl = 72 * L * Cc * Cc + 12 * L * T * Cc; peak = pk[k] / nk[k]
    printf "%-7s %-6s %12.0f %12.0f %6.2fx %10.1f %8.0f%% %9.1f %9.1f %5.2fx %7.2fx\n", ths[i], cs[j], m, tb[k], m / tb[k],
           peak, 100 * m * fl * 1e-9 / peak, drss[k] / 1024, trss[k] / 1024, drss[k] / trss[k], mc / tcb[k]
  } }' "$out"
