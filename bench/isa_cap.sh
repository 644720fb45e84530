# The same ISA cap for dtrain and PyTorch (sourced by bench/common.sh and
# bench/gpt_step.sh). CAP = avx2 | avx512_core | avx512_core_bf16 | (empty:
# none) sets dtrain's DTRAIN_MAX_CPU_ISA and PyTorch's own variables: ATen's
# kernels (ATEN_CPU_CAPABILITY), oneDNN (ONEDNN_MAX_CPU_ISA), and its BLAS
# (OPENBLAS_CORETYPE for Debian's OpenBLAS build, MKL_ENABLE_INSTRUCTIONS for
# the PyPI wheel's MKL). isa_cap_report prints what each side says it runs.
CAP=${CAP:-}
case "$CAP" in
"") ;;
avx2)
    export DTRAIN_MAX_CPU_ISA=avx2 ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2
    export OPENBLAS_CORETYPE=Haswell MKL_ENABLE_INSTRUCTIONS=AVX2 ;;
avx512_core)
    export DTRAIN_MAX_CPU_ISA=avx512_core ATEN_CPU_CAPABILITY=avx512 ONEDNN_MAX_CPU_ISA=AVX512_CORE
    export OPENBLAS_CORETYPE=SkylakeX MKL_ENABLE_INSTRUCTIONS=AVX512 ;;
avx512_core_bf16)
    export DTRAIN_MAX_CPU_ISA=avx512_core_bf16 ATEN_CPU_CAPABILITY=avx512
    export ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16 OPENBLAS_CORETYPE=Cooperlake MKL_ENABLE_INSTRUCTIONS=AVX512 ;;
*) echo "bench: CAP=$CAP: expected avx2, avx512_core or avx512_core_bf16" >&2; exit 1 ;;
esac

# isa_cap_report DTRAIN PYTHON: one line each
isa_cap_report() {
    echo "# cap: ${CAP:-none}; dtrain: $("$1" --version 2>/dev/null | sed -n 's/^  CPU ISA: *//p');" \
        "$("$1" --version 2>/dev/null | sed -n 's/^  BLAS: .*(kernels \(.*\))/OpenBLAS \1/p')"
    "$2" - <<'PY' 2>/dev/null | sed 's/^/# /'
import torch
cap = torch.backends.cpu.get_cpu_capability() if hasattr(torch.backends, "cpu") and \
    hasattr(torch.backends.cpu, "get_cpu_capability") else \
    [l.strip() for l in torch.__config__.show().splitlines() if "CPU capability" in l]
x = torch.randn(8, 16, 16, 16)
torch.nn.functional.conv2d(x, torch.randn(16, 16, 3, 3))
import re
blas = re.search(r"BLAS_INFO=(\w+)", torch.__config__.show())
print("PyTorch", torch.__version__, "ATen capability:", cap, "| BLAS:", blas.group(1) if blas else "?")
PY
    ONEDNN_VERBOSE=1 "$2" -c 'import torch; torch.nn.functional.conv2d(torch.randn(8, 16, 16, 16), torch.randn(16, 16, 3, 3))' 2>/dev/null |
        grep -m1 'exec,cpu,convolution' | cut -d, -f1-5 | sed 's/^/# PyTorch oneDNN: /'
}
