#!/usr/bin/env bash
# Fuzzes the coordinator's request decoder and handlers in-process
# (tests/fuzz/fuzz_engine.c) for a bounded time, from the committed corpus
# (tests/fuzz/corpus). Builds with clang into build-fuzz (ASan + UBSan +
# libFuzzer); says so and exits 0 where clang is missing. A crash, leak or
# hang fails, and the input that caused it is kept in build-fuzz/artifacts.
# Two runs of SECONDS each: small limits, then big stored values.
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
# run NAME [VAR=VALUE...]: one bounded run, new inputs in $work/NAME.
run() {
    local name=$1
    shift
    mkdir -p "$work/$name"
    echo "fuzz: fuzz_engine ($name) for $secs s from tests/fuzz/corpus"
    env "$@" ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$root/tests/lsan.supp \
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        "$build/tests/fuzz/fuzz_engine" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix="$build/artifacts/$name-" -print_final_stats=1 \
        "$work/$name" "$root/tests/fuzz/corpus" >"$build/fuzz-$name.log" 2>&1 || {
        tail -60 "$build/fuzz-$name.log"
        echo "fuzz: FAILED (the input is in $build/artifacts; log $build/fuzz-$name.log)"
        exit 1
    }
    grep -E "stat::number_of_executed_units|stat::peak_rss_mb|cov:" "$build/fuzz-$name.log" |
        tail -3
}
# The small limits, which the fuzzer reaches; then the defaults with four
# 16 MiB values stored, which requests name thousands of times (one such
# request once held the engine ~100 s; -timeout catches a stall).
run small
run big-values C10D_FUZZ_VALUES=big
echo "fuzz: ok"
