#!/bin/bash
# Every committed fuzz corpus input (tests/fuzz/corpus/NAME/*: seeds and
# the crashers fuzzing found) runs clean through its libFuzzer harness,
# built with AddressSanitizer + UndefinedBehaviorSanitizer. Skips without
# clang's libFuzzer (configure says "libFuzzer: no").
set -u
TEST_BIN=${TEST_BIN:-$(pwd)/tests}
src=${srcdir:-.}/tests/fuzz/corpus
if [ ! -x "$TEST_BIN/fuzz/fuzz_deck" ]; then
    echo "# SKIP: no libFuzzer harnesses built (configure found no clang with -fsanitize=fuzzer)"
    exit 77
fi
pass=0 fail=0 n=0
for h in deck deck_sections idx cifar topology egraph compress tokens; do
    n=$((n + 1))
    files=$(ls "$src/$h" 2>/dev/null | wc -l)
    if [ "$files" -eq 0 ]; then
        echo "not ok $n - fuzz_$h: no corpus in $src/$h"; fail=$((fail + 1)); continue
    fi
    log=$(mktemp)
    if ASAN_OPTIONS=detect_leaks=1 "$TEST_BIN/fuzz/fuzz_$h" "$src/$h"/* >"$log" 2>&1; then
        echo "ok $n - fuzz_$h: $files corpus inputs run clean under ASan + UBSan"; pass=$((pass + 1))
    else
        echo "not ok $n - fuzz_$h: a corpus input fails"; fail=$((fail + 1))
        grep -E "ERROR|SUMMARY|Running:|runtime error" "$log" | tail -8 | sed 's/^/#   /'
    fi
    rm -f "$log"
done
echo "# $pass passed, $fail failed"
[ "$fail" -eq 0 ]
