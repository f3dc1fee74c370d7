# lib.sh - shared by the CLI tests (tests/cli/tNNNN-*.sh): each test sources
# this, then calls check/expect_* for each assertion. A failed assertion
# prints what was expected and what came, and the test exits 1 at the end.
# Environment from run-checks.sh: KVCHAT, MKMODEL, TOP.
set -u
: "${KVCHAT:?}" "${TOP:?}"
T=$(mktemp -d "${TMPDIR:-/tmp}/kvchat-test.XXXXXX")
trap 'rm -rf "$T"' EXIT
export KVCHAT_HOME="$T/home" XDG_CONFIG_HOME="$T/config" XDG_STATE_HOME="$T/state" NO_COLOR=1
n_fail=0 n_ok=0

ok() { n_ok=$((n_ok + 1)); echo "ok: $*"; }
not_ok() { n_fail=$((n_fail + 1)); echo "NOT OK: $*"; }

# run CMD...: runs it, keeping stdout in $T/out, stderr in $T/err, status in $rc
run() {
    "$@" >"$T/out" 2>"$T/err"
    rc=$?
    echo "\$ $* -> $rc"
}

expect_rc() { [ "$rc" = "$1" ] && ok "exit $1" || { not_ok "exit $rc, wanted $1"; sed 's/^/  stderr: /' "$T/err"; }; }
expect_out() { grep -q -e "$1" "$T/out" && ok "stdout has '$1'" || { not_ok "stdout lacks '$1'"; sed 's/^/  stdout: /' "$T/out"; }; }
expect_err() { grep -q -e "$1" "$T/err" && ok "stderr has '$1'" || { not_ok "stderr lacks '$1'"; sed 's/^/  stderr: /' "$T/err"; }; }
expect_out_empty() { [ ! -s "$T/out" ] && ok "stdout empty" || { not_ok "stdout not empty"; sed 's/^/  stdout: /' "$T/out"; }; }

# rel_err A B: max|a-b| / range(b) of two f32 files of the same length
rel_err() {
    od -An -v -f -w4 "$1" >"$T/a.txt"
    od -An -v -f -w4 "$2" >"$T/b.txt"
    paste "$T/a.txt" "$T/b.txt" | awk '
        NR == 1 { lo = $2; hi = $2 }
        { d = $1 - $2; if (d < 0) d = -d; if (d > m) m = d
          if ($2 < lo) lo = $2; if ($2 > hi) hi = $2; n++ }
        END { if (n == 0 || hi <= lo) print "nan"; else printf "%.3g\n", m / (hi - lo) }'
}
# le A B: A <= B as numbers (neither "nan")
le() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a != "nan" && b != "nan" && a + 0 <= b + 0) }'; }

finish() {
    echo "$n_ok passed, $n_fail failed"
    [ "$n_fail" -eq 0 ]
}
