#!/usr/bin/env bash
# Fuzzes the coordinator's request decoder and handlers in-process
# (tests/fuzz/fuzz_engine.c) for a bounded time, from the committed corpus
# (tests/fuzz/corpus). Builds with clang into build-fuzz (ASan + UBSan +
# libFuzzer); says so and exits 0 where clang is missing. A crash, leak or
# hang fails, and the input that caused it is kept in build-fuzz/artifacts.
#   bash scripts/fuzz.sh [SECONDS]     (default: $C10D_FUZZ_SECONDS, else 60)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-${C10D_FUZZ_SECONDS:-60}}
if ! command -v clang >/dev/null; then
    echo "fuzz: clang is not installed (scripts/install-deps.sh installs it): skipping"
    exit 0
fi
build=$root/build-fuzz
CC=clang cmake -S "$root" -B "$build" -DC10D_FUZZ=ON -DC10D_BUILD_TESTS=OFF \
    -DC10D_WITH_NCCL=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "$(nproc)" --target fuzz_engine >/dev/null
mkdir -p "$build/artifacts"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "fuzz: fuzz_engine for $secs s from tests/fuzz/corpus"
# New inputs go to $work (the first corpus); the committed corpus is read.
ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$root/tests/lsan.supp \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$build/tests/fuzz/fuzz_engine" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$build/artifacts/" -print_final_stats=1 \
    "$work" "$root/tests/fuzz/corpus" >"$build/fuzz.log" 2>&1 || {
    tail -60 "$build/fuzz.log"
    echo "fuzz: FAILED (the input is in $build/artifacts; log $build/fuzz.log)"
    exit 1
}
grep -E "stat::number_of_executed_units|stat::peak_rss_mb|cov:" "$build/fuzz.log" | tail -3
echo "fuzz: ok"
