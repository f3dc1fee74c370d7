#!/bin/sh
# run-checks.sh - what `make check` runs: every cmocka unit test, every CLI
# test (tests/cli/t*.sh), then each fuzz target for a short while on its
# committed corpus. Logs go to tests/out/. Ends with "N passed, N failed".
#   usage: tests/run-checks.sh "UNIT TESTS" "FUZZ TARGETS" FUZZ_SECONDS [CLI TESTS]
# CLI TESTS: the CLI test files to run (default all, tests/cli/t[0-9]*.sh;
# "none" for none): `make check-unit`, `check-cli` and `check-fuzz` run one
# part each through it. CLI_SKIP in the environment: names of CLI tests
# (e.g. "t0900-grammar") left out of this run (.ci/run's sanitizer pass).
set -u
units=$1 fuzzers=$2 fuzz_seconds=$3 clis=${4:-tests/cli/t[0-9]*.sh}
[ "$clis" = none ] && clis=
top=$(pwd)
out=$top/tests/out
mkdir -p "$out"
. "$top/tests/check-lib.sh"

for t in $units; do
    check_run "$t" "$out/$(basename "$t").log" "./$t"
done

for t in $clis; do
    [ -f "$t" ] || continue
    n=$(basename "$t" .sh)
    case " ${CLI_SKIP:-} " in *" $n "*) echo "SKIP $t (CLI_SKIP: run by the other pass)"; continue ;; esac
    check_run "$t" "$out/$n.log" env KVCHAT="$top/kvchat" MKMODEL="$top/tests/mkmodel" MKSESSION="$top/tests/mksession" \
        TOP="$top" TMPDIR="${TMPDIR:-/tmp}" sh "$t"
done

for f in $fuzzers; do
    n=$(basename "$f")
    corpus=tests/fuzz/corpus/${n#fuzz_}
    work=$(mktemp -d "${TMPDIR:-/tmp}/kvchat-$n.XXXXXX")
    # new inputs go to $work; the committed corpus is only read
    check_run "$f ($fuzz_seconds s)" "$out/$n.log" "./$f" -max_total_time="$fuzz_seconds" \
        -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 "$work" "$corpus"
    rm -rf "$work"
done

check_summary
