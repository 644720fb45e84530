#!/bin/sh
# Run record and checkpoint tests (tests/test_io.c) on 2 ranks and on 1 rank.
# Environment (set by `make check`): MPIEXEC (default mpiexec), TEST_BIN (the
# build tree's tests/ directory; default: this script's directory).
MPIEXEC=${MPIEXEC:-mpiexec}
TEST_BIN=${TEST_BIN:-$(dirname "$0")}
prog="$TEST_BIN/test_io"
if [ ! -x "$prog" ]; then
    echo "mpi_io.sh: $prog not found or not executable (build it with make check)" >&2
    exit 1
fi
status=0
for n in 2 1; do
    echo "# $MPIEXEC -n $n $prog"
    if ! $MPIEXEC -n $n "$prog"; then
        echo "mpi_io.sh: test_io failed on $n rank(s)" >&2
        status=1
    fi
done
exit $status
