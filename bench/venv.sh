#!/bin/bash
# A virtual environment with current PyTorch from PyPI, the second peer of the
# benchmarks (beside Debian's python3-torch 1.13): bench/venv.sh [DIR]
# (default /tmp/dtrain-torch-venv), then PYTHON=DIR/bin/python3 for any
# bench/ script. The PyPI wheel brings its CUDA libraries too (several GB) and
# runs on the CPU here. Never used by the tests.
set -euo pipefail
dir=${1:-/tmp/dtrain-torch-venv}
python=${VENV_PYTHON:-python3}
if [ ! -x "$dir/bin/python3" ]; then
    "$python" -m venv "$dir"
fi
"$dir/bin/python3" -m pip install -q --upgrade pip
"$dir/bin/python3" -m pip install -q torch numpy
"$dir/bin/python3" -c 'import torch; print("torch", torch.__version__, "in", torch.__file__);
print(torch.__config__.show())' | head -n 12
